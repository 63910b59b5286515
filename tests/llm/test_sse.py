"""The SSE parser against the HTML standard's event-stream rules (WHATWG HTML 9.2.6).

Each rule the Chat Completions adapters rely on is pinned by a byte-level example (line
ends, comments, multi-line data, the undispatched tail), and a property test feeds the
same bytes split at random points (inside UTF-8 sequences and CRLF pairs included) and
requires the same events as one whole feed.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from duraloop.llm._sse import SseComment, SseEvent, SseItem, SseParser


def _parse(data: bytes) -> list[SseItem]:
    parser = SseParser()
    return [*parser.feed(data), *parser.close()]


def test_sse_events_dispatch_on_blank_lines_with_any_line_end() -> None:
    assert _parse(b"data: a\n\ndata: b\r\n\r\ndata: c\r\rdata: d\n") == [
        SseEvent("a"),
        SseEvent("b"),
        SseEvent("c"),
    ]


def test_sse_multi_line_data_joins_with_newlines_and_drops_one_leading_space() -> None:
    assert _parse(b"data:x\ndata:  y\ndata\n\n") == [SseEvent("x\n y\n")]


def test_sse_comment_lines_are_reported_and_dispatch_nothing() -> None:
    assert _parse(b": keep-alive\n\n:x\ndata: 1\n\n") == [
        SseComment("keep-alive"),
        SseComment("x"),
        SseEvent("1"),
    ]


def test_sse_event_type_id_and_retry_fields() -> None:
    parser = SseParser()
    items = parser.feed(b"event: error\nid: 7\ndata: {}\n\nid: a\x00b\nretry: 15x\ndata: 2\n\n")
    assert items == [SseEvent("{}", "error", "7"), SseEvent("2", "message", "7")]
    assert parser.retry_ms is None
    parser.feed(b"retry: 1500\n\n")
    assert parser.retry_ms == 1500


def test_sse_event_without_data_or_blank_line_is_not_dispatched() -> None:
    assert _parse(b"event: ping\n\ndata: [DONE]\n") == []
    assert _parse(b"data: [DONE]") == []


def test_sse_empty_data_line_dispatches_an_empty_event() -> None:
    assert _parse(b"data:\n\n") == [SseEvent("")]


def test_sse_line_separator_inside_json_is_not_a_line_end() -> None:
    payload = '{"content":"a\u2028b\x85c"}'
    assert _parse(f"data: {payload}\n\n".encode()) == [SseEvent(payload)]


def test_sse_leading_bom_is_dropped_and_invalid_utf8_is_replaced() -> None:
    assert _parse(b"\xef\xbb\xbfdata: \xff\n\n") == [SseEvent("\ufffd")]


def test_sse_lone_cr_at_the_end_of_the_stream_completes_its_line() -> None:
    parser = SseParser()
    assert parser.feed(b"data: x\r") == []
    assert parser.close() == []  # the line is complete, but no blank line dispatched it
    parser = SseParser()
    assert parser.feed(b"data: x\r\r") == []  # the second CR may start a CRLF
    assert parser.close() == [SseEvent("x")]


STREAM = (
    ": keep-alive\r\n\r\n"
    'data: {"choices":[{"delta":{"content":"héllo ✓ 𝄞"}}]}\r\n\r\n'
    "event: error\rdata: one\rdata: two\r\r"
    "data: [DONE]\n\n"
).encode()


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_sse_any_split_of_the_bytes_gives_the_same_items(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(STREAM)]
    parser = SseParser()
    items: list[SseItem] = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        items += parser.feed(STREAM[start:end])
    items += parser.close()
    assert items == _parse(STREAM)
    assert items == [
        SseComment("keep-alive"),
        SseEvent('{"choices":[{"delta":{"content":"héllo ✓ 𝄞"}}]}'),
        SseEvent("one\ntwo", "error"),
        SseEvent("[DONE]"),
    ]
