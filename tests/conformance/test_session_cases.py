"""Conformance: session, surface and seed, docs/cases.md#session-and-surface-cases cases 34-46.

Pins Law 1 (history changes only by appending, `replace` included), Law 2 (contiguous seqs,
lossless JSON, the envelope) and Law 3 (model history is derived from the log alone). Surface
cases whose sequence has no turns run with `check_invariants=False`, as the spec's surface
tests do; every rejection also asserts the log and surface are unchanged.
"""

from __future__ import annotations

from typing import Any

import pytest

from duraloop.errors import EventRejectedError
from duraloop.log import Event, Session, decode_event

from ._builders import (
    CH,
    RAW,
    SE,
    SS,
    TC,
    TE,
    TR,
    TS,
    A,
    Spec,
    U,
    append,
    build,
    call,
    fixed_clock,
    result_data,
    txt,
)


def surface_session(*specs: Spec) -> Session:
    session = Session("surface", check_invariants=False, clock=fixed_clock())
    for spec in specs:
        append(session, spec)
    return session


def assert_rejected(session: Session, spec: Spec, fragment: str) -> None:
    before, nodes = list(session.events), list(session.surface.nodes)
    messages = session.derive_messages()
    with pytest.raises(EventRejectedError, match=fragment):
        append(session, spec)
    assert list(session.events) == before
    assert session.surface.nodes == nodes
    assert session.derive_messages() == messages


def replace(start: int, end: int) -> dict[str, Any]:
    return {"op": "replace", "start": start, "end": end}


def _tool_turn() -> list[Spec]:
    return [
        TS(1),
        U("hello"),
        SS(1, 1),
        CH(1, 1),
        A(1, 1, txt("let me check"), call("c1")),
        TC(1, 1, "c1"),
        TR(1, 1, "c1"),
        SE(1, 1),
        TE(1),
    ]


def test_case_34_derivation_projects_surface_events_only() -> None:
    session = surface_session(
        TS(1), U("hello"), CH(1, 1), A(1, 1, txt("let me check"), call("c1")), TR(1, 1, "c1"), TE(1)
    )
    messages = session.derive_messages()
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert len(messages[1]["content"]) == 2
    assert messages[0] is session.events[1].data
    assert messages[2]["source"] == {"kind": "tool", "callId": "c1"}


def test_case_35_empty_assistant_message_derives_nothing() -> None:
    session = Session(
        "empty", seed=build(TS(1), SS(1, 1), A(1, 1), SE(1, 1), TE(1)), clock=fixed_clock()
    )
    assert session.surface.nodes == [2]
    assert session.derive_messages() == []


def test_case_36_replay_keeps_the_log_and_appends_end_seed() -> None:
    original = Session("one", clock=fixed_clock())
    for spec in _tool_turn():
        append(original, spec)
    log = list(original.events)
    n = len(log)
    replay = Session("two", seed=log, clock=fixed_clock(5))
    assert list(replay.events[:n]) == log
    assert replay.events[n] == Event("session/end-seed", n, 5, {})
    assert replay.seq == n + 1
    assert replay.first_live_seq == n
    assert replay.derive_messages() == original.derive_messages()


def test_case_37_empty_seed_writes_end_seed_once() -> None:
    empty = Session("one", seed=[], clock=fixed_clock())
    assert [(e.type, e.seq) for e in empty.events] == [("session/end-seed", 0)]
    assert empty.first_live_seq == 0
    again = Session("three", seed=list(empty.events), clock=fixed_clock())
    assert list(again.events) == list(empty.events)
    assert again.first_live_seq == 1
    assert list(Session("fresh", clock=fixed_clock()).events) == []
    assert Session("fresh", clock=fixed_clock()).first_live_seq == 0


def test_case_38_replace_range_puts_the_replacement_at_the_range() -> None:
    session = surface_session(
        U("a"), U("b"), U("c"), A(1, 1, txt("summary"), op=replace(0, 1), sources=[0, 1])
    )
    assert session.surface.nodes == [3, 2]
    assert session.surface.replace_generation == 1
    assert len(session.events) == 4  # Law 1: shadowed events stay in the log


def test_case_39_middle_and_single_replace() -> None:
    session = surface_session(U("a"), U("b"), U("c"), U("x", op=replace(1, 1), sources=[1]))
    assert session.surface.nodes == [0, 3, 2]
    session = surface_session(U("a"), U("b"), U("x", op=replace(1, 1), sources=[1]))
    assert session.surface.nodes == [0, 2]


def test_case_40_nested_replace_is_positional() -> None:
    session = surface_session(
        U("a"),
        U("b"),
        A(1, 1, txt("s1"), op=replace(0, 0), sources=[0]),
        A(1, 1, txt("s2"), op=replace(2, 1), sources=[2, 1]),
    )
    assert session.surface.nodes == [3]
    assert session.surface.replace_generation == 2
    assert [m["content"] for m in session.derive_messages()] == [[txt("s2")]]


def test_case_41_bad_replace_is_rejected_and_changes_nothing() -> None:
    session = surface_session(U("a"), U("b"))
    assert_rejected(session, U("x", op=replace(5, 1), sources=[0, 1]), "start seq 5 not found")
    assert_rejected(session, U("x", op=replace(0, 99), sources=[0]), "end seq 99 not found")
    assert_rejected(session, U("x", op=replace(1, 0), sources=[0, 1]), "after end seq")
    assert_rejected(session, U("x", op=replace(0, 1), sources=[0]), "missing 1")
    assert_rejected(session, U("x", op=replace(0, 0)), "missing 0")


@pytest.mark.parametrize(
    ("sources", "fragment"),
    [
        ("invalid", "must be an array"),
        ([], "must not be empty"),
        ([0, 0], "duplicates"),
        ([0.5], "non-negative safe integers"),
        ([-1], "non-negative safe integers"),
        (["0"], "non-negative safe integers"),
        ([True], "non-negative safe integers"),
        ([1], "must reference earlier events"),
    ],
)
def test_case_42_bad_source_event_seqs_are_rejected(sources: Any, fragment: str) -> None:
    session = surface_session(U("a"))
    assert_rejected(session, U("b", sources=sources), fragment)


def test_case_42_empty_sources_are_allowed_on_assistant_message() -> None:
    session = surface_session(U("a"))
    assert append(session, A(1, 1, txt("hi"), sources=[])).source_event_seqs == []


def _rewrite(**changes: Any) -> Spec:
    data = result_data(1, 1, "c1", "new text", meta=changes.pop("meta", None))
    message, block = data["message"], data["message"]["content"][0]
    for key, value in changes.items():
        if key in ("callId",):
            message["source"]["callId"] = value
        elif key in ("toolCallId", "isError"):
            block[key] = value
        elif key == "id":
            message["id"] = value
        else:
            data[key] = value
    return Spec("tool/result", data, replace(1, 1), [1])


def test_case_43_tool_result_rewrite_rules() -> None:
    session = surface_session(U("a"), TR(1, 1, "c1", meta=[{"k": 1}]), U("b"))
    assert_rejected(
        session,
        Spec("tool/result", result_data(1, 1, "c1"), replace(1, 2), [1, 2]),
        "exactly one current node",
    )
    assert_rejected(
        session,
        Spec("tool/result", result_data(1, 1, "c1"), replace(0, 0), [0]),
        "must target a current tool/result",
    )
    for change in (
        {"callId": "c2"},
        {"id": "other"},
        {"isError": True},
        {"toolCallId": "c2"},
        {"meta": [{"k": 2}]},
        {"step": 2},
    ):
        assert_rejected(session, _rewrite(**change), "may change only content")
    rewritten = append(session, _rewrite(meta=[{"k": 1}]))
    assert session.surface.nodes == [0, rewritten.seq, 2]
    assert session.derive_messages()[1]["content"][0]["content"] == [txt("new text")]


def test_case_44_surface_markers_are_required_exactly_on_surface_types() -> None:
    session = surface_session(U("a"))
    assert_rejected(session, U("b", op=None), "requires a surfaceOp marker")
    assert_rejected(session, RAW("turn/start", {"turn": 1}, op="append"), "not surface-eligible")
    assert_rejected(session, RAW("turn/start", {"turn": 1}, sources=[0]), "not surface-eligible")
    with pytest.raises(EventRejectedError, match="requires a surfaceOp marker"):
        Session("seed", seed=build(U("a", op=None)), clock=fixed_clock())


@pytest.mark.parametrize(
    "raw",
    [
        '{"type":"x/y","seq":0,"time":0,"data":{},"extra":1}',
        '{"type":1,"seq":0,"time":0,"data":{}}',
        '{"type":"x/y","seq":"0","time":0,"data":{}}',
        '{"type":"x/y","seq":0.5,"time":0,"data":{}}',
        '{"type":"x/y","seq":-1,"time":0,"data":{}}',
        '{"type":"x/y","seq":0,"time":"1","data":{}}',
        '{"type":"x/y","seq":0,"time":0.5,"data":{}}',
        '{"type":"x/y","seq":0,"time":0}',
        '{"type":"x/y","seq":0,"time":0,"data":{},"ignorable":false}',
        '{"type":"x/y","seq":0,"time":0,"data":{},"ignorable":"yes"}',
    ],
)
def test_case_45_bad_envelope_is_rejected(raw: str) -> None:
    with pytest.raises(EventRejectedError, match="invalid event envelope"):
        decode_event(raw)


@pytest.mark.parametrize(
    "event",
    [
        Event("x/y", "0", 0, {}),  # type: ignore[arg-type]
        Event("x/y", -1, 0, {}),
        Event("x/y", 0, 0.5, {}),  # type: ignore[arg-type]
        Event("x/y", 0, "1", {}),  # type: ignore[arg-type]
    ],
)
def test_case_45_bad_envelope_in_a_seed_is_rejected(event: Event) -> None:
    with pytest.raises(EventRejectedError, match="invalid event envelope|contiguous"):
        Session("seed", seed=[event], clock=fixed_clock())


def test_case_45_ignorable_true_is_accepted() -> None:
    event = decode_event('{"type":"x/y","seq":0,"time":0,"data":{},"ignorable":true}')
    session = Session("seed", seed=[event], clock=fixed_clock())
    assert session.events[0].ignorable is True


def test_case_46_seed_message_shapes_are_checked_but_unknown_types_are_not() -> None:
    header = RAW("request/header", {"header": {"config": {}}, "reason": "initial"})
    with pytest.raises(EventRejectedError, match="lacks provider/model"):
        Session("s", seed=build(TS(1), header), clock=fixed_clock())
    old = RAW("assistant/message", {"turn": 1, "step": 1, "content": []}, op="append")
    with pytest.raises(EventRejectedError, match="lacks an identified message"):
        Session("s", seed=build(TS(1), SS(1, 1), old), clock=fixed_clock())
    session = Session("s", seed=build(RAW("vendor/thing", None)), clock=fixed_clock())
    assert session.events[0].data is None
    assert [e.type for e in session.events] == ["vendor/thing", "session/end-seed"]
