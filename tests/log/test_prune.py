"""The tool-result pruner: compaction-spec 6, cases C44 and C45.

`prune_content` cuts the middle of a result's text by Unicode code points; `prune_session`
replaces each over-long `tool/result` of the surface by a content-only copy, after a
`compaction/prune` that prices the original.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance._builders import SE, SS, TC, TE, TR, TS, A, U, append, call, fixed_clock, txt
from duraloop.errors import InvariantError, UsageError
from duraloop.log import (
    Message,
    PrunerConfig,
    Session,
    check_pairing,
    prune_content,
    prune_session,
)
from duraloop.log.vocabulary import (
    BLOCK_REASONING,
    BLOCK_TEXT,
    COMPACTION_PRUNE,
    PRUNE_MARKER,
    SURFACE_REPLACE,
    TOOL_RESULT,
)

C44 = PrunerConfig(threshold_chars=50, head_chars=4, tail_chars=3)


def estimate(message: Message) -> int:
    return len(str(message)) // 4


def test_c44_pruner_keeps_code_points_not_utf16_units() -> None:
    pruned = prune_content([txt("😀" * 60)], C44)
    assert pruned == [txt("😀" * 4 + PRUNE_MARKER + "😀" * 3)]


def test_c44_mixed_blocks_keep_their_places_and_empty_text_blocks_are_dropped() -> None:
    reasoning = {"type": BLOCK_REASONING, "text": "thinking"}
    tool_call = call("c9")
    blocks = [txt("A" * 40), reasoning, txt("B" * 30), tool_call, txt("C" * 30)]
    assert prune_content(blocks, C44) == [
        txt("AAAA" + PRUNE_MARKER),
        reasoning,
        tool_call,
        txt("CCC"),
    ]
    assert blocks[0] == txt("A" * 40), "the input is not changed"


def test_content_at_the_threshold_is_not_pruned() -> None:
    assert prune_content([txt("x" * 50), {"type": "image", "data": "y" * 500}], C44) is None


def test_a_text_blocks_extra_keys_are_kept() -> None:
    pruned = prune_content([{"type": BLOCK_TEXT, "text": "z" * 80, "cache": True}], C44)
    assert pruned == [{"type": BLOCK_TEXT, "text": "zzzz" + PRUNE_MARKER + "zzz", "cache": True}]


def _text(blocks: list[Any]) -> str:
    return "".join(block["text"] for block in blocks if block.get("type") == BLOCK_TEXT)


_BLOCKS = st.lists(
    st.one_of(
        st.builds(txt, st.text(max_size=40)),
        st.just({"type": BLOCK_REASONING, "text": "r"}),
        st.just(call("c")),
    ),
    max_size=8,
)


@st.composite
def _configs(draw: st.DrawFn) -> PrunerConfig:
    head = draw(st.integers(0, 30))
    tail = draw(st.integers(0, 30))
    threshold = head + len(PRUNE_MARKER) + tail + draw(st.integers(0, 40))
    return PrunerConfig(threshold_chars=threshold, head_chars=head, tail_chars=tail)


@settings(max_examples=300, deadline=None)
@given(blocks=_BLOCKS, config=_configs())
def test_prune_content_keeps_head_and_tail_exactly_and_never_grows(
    blocks: list[Any], config: PrunerConfig
) -> None:
    text = _text(blocks)
    pruned = prune_content(blocks, config)
    if len(text) <= config.threshold_chars:
        assert pruned is None
        return
    assert pruned is not None
    kept = _text(pruned)
    assert len(kept) == config.head_chars + len(PRUNE_MARKER) + config.tail_chars
    assert len(kept) < len(text)
    tail = text[len(text) - config.tail_chars :]
    assert kept == text[: config.head_chars] + PRUNE_MARKER + tail
    assert [b for b in pruned if b["type"] != BLOCK_TEXT] == [
        b for b in blocks if b["type"] != BLOCK_TEXT
    ]
    assert all(b["text"] for b in pruned if b["type"] == BLOCK_TEXT)
    assert prune_content(pruned, config) is None, "one pass converges"


def _session_with_results(*texts: str, close: bool = False) -> Session:
    session = Session("s", clock=fixed_clock())
    append(session, TS(1))
    append(session, U("go"))
    append(session, SS(1, 1))
    calls = [f"c{index}" for index in range(len(texts))]
    append(session, A(1, 1, *(call(call_id) for call_id in calls)))
    for call_id, text in zip(calls, texts, strict=True):
        append(session, TC(1, 1, call_id))
        append(session, TR(1, 1, call_id, text))
    append(session, SE(1, 1))
    if close:
        append(session, TE(1))
    return session


def test_c45_prune_session_keeps_every_field_but_the_content() -> None:
    session = Session("s", clock=fixed_clock())
    for spec in (TS(1), U("go"), SS(1, 1), A(1, 1, call("c1")), TC(1, 1, "c1")):
        append(session, spec)
    error = {"name": "ExitError", "code": "EXIT_1"}
    spec = TR(1, 1, "c1", "x" * 100, is_error=True, error=error, meta={"exitCode": 1})
    spec.data["futureField"] = {"kept": True}
    original = append(session, spec)
    s = original.seq
    assert prune_session(session, C44, estimate=estimate) == 1
    prune, replacement = session.events[-2:]
    assert prune.type == COMPACTION_PRUNE
    assert prune.data == {
        "shadowedRange": {"start": s, "end": s},
        "shadowedSeqs": [s],
        "shadowedTokenCount": estimate(original.data["message"]),
    }
    assert replacement.type == TOOL_RESULT
    assert replacement.surface_op == {"op": SURFACE_REPLACE, "start": s, "end": s}
    assert replacement.source_event_seqs == [s]
    expected = {**original.data}
    first = {
        **original.data["message"]["content"][0],
        "content": [txt("xxxx" + PRUNE_MARKER + "xxx")],
    }
    expected["message"] = {**original.data["message"], "content": [first]}
    assert replacement.data == expected
    assert replacement.data["futureField"] == {"kept": True}
    assert replacement.data["error"] == error and replacement.data["meta"] == {"exitCode": 1}
    assert session.surface.nodes[-1] == replacement.seq


def test_c45_outside_an_open_turn_the_invariants_refuse_the_replacement() -> None:
    session = _session_with_results("y" * 100, close=True)
    before = len(session.events)
    with pytest.raises(InvariantError, match="outside any open turn"):
        prune_session(session, C44, estimate=estimate)
    # As in dsh: the compaction/prune before the refused replacement stays in the log.
    assert [event.type for event in session.events[before:]] == [COMPACTION_PRUNE]


def test_a_second_pass_prunes_nothing() -> None:
    session = _session_with_results("a" * 100, "short", "b" * 60)
    assert prune_session(session, C44, estimate=estimate) == 2
    count = len(session.events)
    assert prune_session(session, C44, estimate=estimate) == 0
    assert len(session.events) == count


def test_pruned_messages_keep_their_pairing_and_positions() -> None:
    session = _session_with_results("a" * 100, "short", "b" * 60)
    before = session.derive_messages()
    prune_session(session, C44, estimate=estimate)
    after = session.derive_messages()
    check_pairing(after)
    assert [m.get("id") for m in after] == [m.get("id") for m in before]
    assert after[3] == before[3], "the short result is untouched"
    result = after[2]["content"][0]
    assert result["toolCallId"] == "c0"
    assert result["content"] == [txt("aaaa" + PRUNE_MARKER + "aaa")]
    replayed = Session("r", seed=list(session.events), clock=fixed_clock())
    assert replayed.derive_messages() == after, "a replay derives the same messages"


def test_protect_leaves_the_newest_surface_nodes() -> None:
    session = _session_with_results("a" * 100, "b" * 100)
    assert prune_session(session, C44, protect=1, estimate=estimate) == 1
    newest = session.derive_messages()[-1]["content"][0]
    assert newest["content"] == [txt("b" * 100)]
    assert prune_session(session, C44, protect=0, estimate=estimate) == 1


@pytest.mark.parametrize("protect", [-1, 1.5, True])
def test_protect_must_be_a_non_negative_integer(protect: Any) -> None:
    session = _session_with_results("a" * 100)
    with pytest.raises(UsageError, match="protect"):
        prune_session(session, C44, protect=protect, estimate=estimate)
