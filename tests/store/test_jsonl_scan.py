"""Torn-tail scanning of raw and zstd JSONL logs, exactly per docs/store.md#reading-and-torn-tails
(cases 55-61).

A bad or gapped line is tolerated (the start of a torn tail) only if no later decodable line
contains a `turn/end`; otherwise the committed region is damaged and the scan raises with
the line number. Scanning is pure, so these tests feed bytes straight to `scan_log`.
"""

from __future__ import annotations

from random import Random

import pytest

from duraloop.errors import CorruptLogError
from duraloop.log import Event, encode_event
from duraloop.store._codec._records import encode_header
from duraloop.store._jsonl._scan import scan_log, scan_zstd_log
from duraloop.store._jsonl._zstd import FrameCodec

from ._builders import meta, se, ss, te, text_chunk, ts

HEADER = encode_header(meta("s"))


def lines(*items: Event | bytes) -> bytes:
    return b"".join(
        (item if isinstance(item, bytes) else encode_event(item)) + b"\n" for item in items
    )


@pytest.mark.parametrize(
    "body", [b"", b'{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}']
)
def test_case_55_header_must_be_a_complete_line(body: bytes) -> None:
    with pytest.raises(CorruptLogError, match="header-less"):
        scan_log(body, path="p")


def test_case_55_two_header_lines_are_corrupt() -> None:
    with pytest.raises(CorruptLogError, match="unparsable committed event.*line 2"):
        scan_log(HEADER + HEADER + lines(te(0, 1)), path="p")


def test_case_56_final_fragment_without_newline_is_torn() -> None:
    e0 = encode_event(ts(0, 1)) + b"\n"
    result = scan_log(HEADER + e0 + b"ignored torn tail", path="p")
    assert [e.seq for e in result.events] == [0]
    assert result.committed_bytes == len(HEADER) + len(e0)
    assert result.torn_offset == result.committed_bytes


def test_case_57_unparsable_line_without_later_turn_end_is_a_torn_tail() -> None:
    result = scan_log(HEADER + lines(ts(0, 1), b"{not json", ss(1, 1, 1)), path="p")
    assert [e.seq for e in result.events] == [0]
    assert result.torn_offset == len(HEADER) + len(lines(ts(0, 1)))


def test_case_57_gap_on_a_turn_end_line_is_fatal() -> None:
    with pytest.raises(
        CorruptLogError, match=r"seq gap in committed region \(expected 0, got 1\) at line 2"
    ):
        scan_log(HEADER + lines(te(1, 1)), path="p")


def test_case_58_seq_gap_without_later_turn_end_is_tolerated() -> None:
    result = scan_log(HEADER + lines(ts(0, 1), ss(2, 1, 1)), path="p")
    assert [e.seq for e in result.events] == [0]


def test_case_58_seq_gap_before_a_turn_end_is_corruption() -> None:
    with pytest.raises(CorruptLogError, match="seq gap in committed region.*line 3 of p"):
        scan_log(HEADER + lines(ts(0, 1), ss(2, 1, 1), te(3, 1)), path="p")


def test_case_58_corrupt_line_before_a_turn_end_raises_with_its_line_number() -> None:
    with pytest.raises(
        CorruptLogError, match="unparsable committed event.* at line 2 of p"
    ) as info:
        scan_log(HEADER + lines(b"{not json", te(1, 1)), path="p")
    assert info.value.line == 2
    assert info.value.path == "p"


def test_case_58_blank_line_is_an_unparsable_line() -> None:
    with pytest.raises(CorruptLogError, match="line 3"):
        scan_log(HEADER + lines(ts(0, 1), b"", te(1, 1)), path="p")


def test_case_59_header_only_file_has_no_events() -> None:
    result = scan_log(HEADER, path="p")
    assert result.events == []
    assert result.committed_bytes == len(HEADER)
    assert result.torn_offset is None


def test_case_60_gap_after_the_last_turn_end_is_dropped() -> None:
    result = scan_log(HEADER + lines(ts(0, 1), te(1, 1), ss(9, 1, 1)), path="p")
    assert [e.seq for e in result.events] == [0, 1]
    assert result.torn_offset is not None


def test_case_61_packed_row_expands_between_turn_start_and_end() -> None:
    row = (
        b'{"type":"text-chunks","seq0":1,"time0":2,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],'
        b'"texts":["a","b","c"]}}'
    )
    result = scan_log(HEADER + lines(ts(0, 1), row, te(4, 1)), path="p")
    assert [e.seq for e in result.events] == [0, 1, 2, 3, 4]
    member = result.events[2]
    assert (member.type, member.time, member.data["chunk"]) == (
        "assistant/chunk",
        3,
        {"type": "text-delta", "index": 0, "text": "b"},
    )


def test_case_61_malformed_row_before_a_turn_end_is_corruption() -> None:
    row = (
        b'{"type":"text-chunks","seq0":1,"time0":2,"data":{"turn":1,"step":1,"index":0,"dt":[1],'
        b'"texts":["a","b","c"]}}'
    )
    with pytest.raises(CorruptLogError, match="malformed text-chunks storage row"):
        scan_log(HEADER + lines(ts(0, 1), row, te(4, 1)), path="p")


def test_case_61_packed_row_whose_seq0_skips_is_dropped_whole() -> None:
    row = (
        b'{"type":"text-chunks","seq0":5,"time0":2,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],'
        b'"texts":["a","b","c"]}}'
    )
    prefix = HEADER + lines(ts(0, 1), te(1, 1))
    result = scan_log(prefix + row + b"\n", path="p")
    assert [e.seq for e in result.events] == [0, 1]
    assert result.committed_bytes == len(prefix)


def test_a_turn_end_spelled_with_an_escape_after_an_issue_is_still_corruption() -> None:
    escaped = encode_event(te(2, 1)).replace(b"turn/end", b"turn\\/end")
    with pytest.raises(CorruptLogError, match="seq gap in committed region.*line 3"):
        scan_log(HEADER + lines(ts(0, 1), ss(2, 1, 1), escaped), path="p")


def test_a_valid_event_whose_type_spells_a_row_tag_stays_an_event() -> None:
    odd = b'{"type":"text-chunks","seq":1,"time":1,"data":{},"ignorable":true}'
    result = scan_log(HEADER + lines(ts(0, 1), odd), path="p")
    assert result.events[1] == Event("text-chunks", 1, 1, {}, ignorable=True)


def test_a_row_written_with_another_key_order_expands_the_same() -> None:
    row = (
        b'{"seq0":1,"time0":2,"type":"text-chunks","data":{"texts":["a","b","c"],"dt":[1,1],'
        b'"index":0,"step":1,"turn":1}}'
    )
    result = scan_log(HEADER + lines(ts(0, 1), row, te(4, 1)), path="p")
    assert [e.seq for e in result.events] == [0, 1, 2, 3, 4]
    assert result.events[3].data["chunk"] == {"type": "text-delta", "index": 0, "text": "c"}


# --------------------------------------------------------------------------- zstd
# (docs/store.md#reading-and-torn-tails)


def zstd_log(*plaintexts: bytes) -> bytes:
    codec = FrameCodec()
    return b"".join(codec.compress(text) for text in [HEADER, *plaintexts])


def big_batch(first_seq: int, count: int) -> bytes:
    """A batch of incompressible chunk lines, large enough to span several zstd blocks."""
    random = Random(first_seq)
    return lines(
        *[
            text_chunk(
                first_seq + k,
                0,
                "".join(random.choice("0123456789abcdef") for _ in range(200)),
                index=k,
            )
            for k in range(count)
        ]
    )


def test_zstd_log_with_complete_frames_reads_every_event() -> None:
    data = zstd_log(lines(ts(0, 1)), lines(ss(1, 1, 1), se(2, 1, 1)), lines(te(3, 1)))
    result = scan_zstd_log(data, path="p")
    assert [e.seq for e in result.events] == [0, 1, 2, 3]
    assert (result.torn_offset, result.recovered_events) == (None, 0)


@pytest.mark.parametrize("header_frame", [HEADER + HEADER, HEADER[:-1], b""])
def test_case_55_zstd_header_frame_must_hold_exactly_one_line(header_frame: bytes) -> None:
    data = FrameCodec().compress(header_frame) + FrameCodec().compress(lines(ts(0, 1)))
    with pytest.raises(CorruptLogError, match="header-less"):
        scan_zstd_log(data, path="p")


def test_zstd_log_without_a_complete_frame_is_header_less() -> None:
    with pytest.raises(CorruptLogError, match="header-less"):
        scan_zstd_log(zstd_log()[:-1], path="p")


@pytest.mark.parametrize(
    "batch",
    [
        lines(ts(0, 1), b"{not json"),
        lines(ts(0, 1), ss(2, 1, 1)),
        lines(ts(0, 1)) + b'{"type":"turn',
    ],
    ids=["bad-line", "seq-gap", "torn-record"],
)
def test_any_damage_inside_a_complete_zstd_frame_is_corruption(batch: bytes) -> None:
    with pytest.raises(CorruptLogError, match="complete zstd frame"):
        scan_zstd_log(zstd_log(batch), path="p")


def test_torn_zstd_frame_keeps_the_events_it_still_yields_as_recovered() -> None:
    complete = zstd_log(lines(ts(0, 1), ss(1, 1, 1)))
    torn_frame = FrameCodec().compress(big_batch(2, 2000))
    result = scan_zstd_log(complete + torn_frame[: len(torn_frame) - 10], path="p")
    assert result.torn_offset == len(complete)
    assert 0 < result.recovered_events < 2000
    assert [e.seq for e in result.events] == list(range(2 + result.recovered_events))


def test_torn_zstd_frame_that_yields_nothing_recovers_nothing() -> None:
    complete = zstd_log(lines(ts(0, 1)))
    result = scan_zstd_log(complete + FrameCodec().compress(lines(ss(1, 1, 1)))[:-5], path="p")
    assert (len(result.events), result.recovered_events, result.torn_offset) == (
        1,
        0,
        len(complete),
    )
