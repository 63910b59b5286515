"""The one pending-call tracker and the one recovery-result constructor.

See docs/recovery.md#pending-calls.

Crash repair and the live step recovery share these, so each tracker rule of the table in
docs/recovery.md#pending-calls is pinned here event by event, and both recovery codes are pinned on
the constructor (Law 5: a recorded call is never reported as not-started).
"""

from __future__ import annotations

from conformance._builders import RAW, SE, SS, TC, TE, TR, TS, A, U, build, call, txt
from duraloop.log import Event, PendingCall, PendingToolCalls, unanswered_tool_result


def tracked(events: list[Event]) -> list[PendingCall]:
    tracker = PendingToolCalls()
    for event in events:
        tracker.observe(event)
    return tracker.pending()


def test_assistant_message_registers_calls_in_content_order() -> None:
    events = build(TS(1), SS(1, 1), A(1, 1, call("b"), txt("between"), call("a")))
    assert tracked(events) == [PendingCall("b", 1), PendingCall("a", 1)]


def test_tool_call_annotates_and_orphan_is_ignored() -> None:
    events = build(TS(1), SS(1, 1), A(1, 1, call("a"), call("b")), TC(1, 1, "b"), TC(1, 1, "ghost"))
    assert tracked(events) == [PendingCall("a", 1), PendingCall("b", 1, 3)]


def test_later_tool_call_overwrites_call_seq() -> None:
    events = build(TS(1), SS(1, 1), A(1, 1, call("a")), TC(1, 1, "a"), TC(1, 1, "a"))
    assert tracked(events) == [PendingCall("a", 1, 4)]


def test_repeated_call_id_keeps_position_and_drops_call_seq() -> None:
    events = build(
        TS(1),
        SS(1, 1),
        A(1, 1, call("a"), call("b")),
        TC(1, 1, "a"),
        A(1, 1, call("a"), message_id="again"),
    )
    assert tracked(events) == [PendingCall("a", 1), PendingCall("b", 1)]


def test_tool_result_removes_its_call_whatever_its_surface_op() -> None:
    events = build(TS(1), SS(1, 1), A(1, 1, call("a"), call("b")), TR(1, 1, "b"))
    assert tracked(events) == [PendingCall("a", 1)]
    replaced = build(
        TS(1),
        SS(1, 1),
        A(1, 1, call("a")),
        TR(1, 1, "a", op={"op": "replace", "start": 2, "end": 2}, sources=[2]),
    )
    assert tracked(replaced) == []


def test_step_end_and_turn_boundaries_clear_but_step_start_does_not() -> None:
    base = [TS(1), SS(1, 1), A(1, 1, call("a"))]
    assert tracked(build(*base, SE(1, 1))) == []
    assert tracked(build(*base, TE(1))) == []
    assert tracked(build(*base, TS(2))) == []
    assert tracked(build(*base, SS(1, 2))) == [PendingCall("a", 1)]


def test_other_events_change_nothing() -> None:
    base = [TS(1), SS(1, 1), A(1, 1, call("a"))]
    others = [
        U("x"),
        RAW("assistant/chunk", {"turn": 1, "step": 1}),
        RAW("vendor/x", None),
        RAW("session/end-seed", {}),
    ]
    assert tracked(build(*base, *others)) == [PendingCall("a", 1)]


def test_pending_returns_a_snapshot() -> None:
    tracker = PendingToolCalls()
    for event in build(TS(1), SS(1, 1), A(1, 1, call("a"))):
        tracker.observe(event)
    snapshot = tracker.pending()
    tracker.observe(build(TS(1), SS(1, 1), A(1, 1), TR(1, 1, "a"))[3])
    assert snapshot == [PendingCall("a", 1)]
    assert len(tracker) == 0


def test_unanswered_tool_result_for_a_recorded_call_is_outcome_unknown() -> None:
    result = unanswered_tool_result(PendingCall("c-1", 2, call_seq=7), turn=3, seq=9)
    assert result.source_event_seqs == [7]
    assert result.data["turn"] == 3
    assert result.data["step"] == 2
    assert result.data["error"] == {
        "name": "ToolOutcomeUnknownError",
        "code": "TOOL_OUTCOME_UNKNOWN",
    }
    message = result.data["message"]
    assert message["id"] == "interrupted-tool-result-c-1-9"
    assert message["source"] == {"kind": "tool", "callId": "c-1"}
    block = message["content"][0]
    assert block["isError"] is True
    assert block["toolCallId"] == "c-1"
    assert block["content"][0]["text"].startswith(
        "The tool call was interrupted after it was recorded"
    )


def test_unanswered_tool_result_for_an_unrecorded_call_is_not_started() -> None:
    result = unanswered_tool_result(PendingCall("c-2", 1), turn=1, seq=4)
    assert result.source_event_seqs is None
    assert result.data["error"] == {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
    assert result.data["message"]["id"] == "interrupted-tool-result-c-2-4"
    text = result.data["message"]["content"][0]["content"][0]["text"]
    assert text.startswith("The tool call was interrupted before the Harness recorded it")


def test_unanswered_tool_results_do_not_share_mutable_state() -> None:
    first = unanswered_tool_result(PendingCall("a", 1), turn=1, seq=1)
    first.data["error"]["code"] = "MUTATED"
    second = unanswered_tool_result(PendingCall("b", 1), turn=1, seq=2)
    assert second.data["error"]["code"] == "TOOL_NOT_STARTED"
