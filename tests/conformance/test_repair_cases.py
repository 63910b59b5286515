"""Conformance: crash repair, docs/cases.md#crash-repair-cases cases 1-15
(`interrupted_turn_closers`).

Pins Law 4 after crash plus resume and Law 5 (a recorded call without a result is
TOOL_OUTCOME_UNKNOWN, an unrecorded one TOOL_NOT_STARTED). Each test builds the case's log
with `time == seq` and compares the closers as whole events, so a change to a seq, a time, a
code, the message id format or a model-visible text fails here. The texts are written out
verbatim, not imported, so the test also pins `vocabulary.py`.
"""

from __future__ import annotations

from typing import Any

from duraloop.log import Event, Session, interrupted_turn_closers

from ._builders import ES, SE, SS, TC, TE, TR, TS, A, U, build, call, fixed_clock, txt

NOT_STARTED_TEXT = (
    "The tool call was interrupted before the Harness recorded it as started. "
    "Retry it if it is still needed."
)
OUTCOME_UNKNOWN_TEXT = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. "
    "Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the "
    "operation is read-only or idempotent; if it may have side effects, first verify external "
    "state or ask the user. Do not retry blindly."
)


def _result(
    call_id: str, *, turn: int, step: int, seq: int, time: int, call_seq: int | None
) -> Event:
    text = NOT_STARTED_TEXT if call_seq is None else OUTCOME_UNKNOWN_TEXT
    error = (
        {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
        if call_seq is None
        else {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
    )
    message = {
        "id": f"interrupted-tool-result-{call_id}-{seq}",
        "role": "user",
        "source": {"kind": "tool", "callId": call_id},
        "content": [
            {
                "type": "tool-result",
                "toolCallId": call_id,
                "isError": True,
                "content": [{"type": "text", "text": text}],
            }
        ],
    }
    data = {"turn": turn, "step": step, "message": message, "error": error}
    sources = None if call_seq is None else [call_seq]
    return Event("tool/result", seq, time, data, sources, "append")


def NS(call_id: str, *, turn: int, step: int, seq: int, time: int) -> Event:  # noqa: N802
    return _result(call_id, turn=turn, step=step, seq=seq, time=time, call_seq=None)


def OU(  # noqa: N802
    call_id: str, *, turn: int, step: int, seq: int, time: int, call_seq: int
) -> Event:
    return _result(call_id, turn=turn, step=step, seq=seq, time=time, call_seq=call_seq)


def step_end(turn: int, step: int, *, seq: int, time: int) -> Event:
    return Event("step/end", seq, time, {"turn": turn, "step": step})


def turn_end(turn: int, *, seq: int, time: int) -> Event:
    return Event("turn/end", seq, time, {"turn": turn, "reason": {"kind": "interrupted"}})


def assert_balanced(
    log: list[Event], closers: list[Event], *, check_invariants: bool = True
) -> None:
    """The repaired log is a valid seed (with relational invariants on, unless the case's
    log opens at turn 2, which the invariant checker rightly refuses as a first turn)."""
    session = Session(
        "repaired", seed=log + closers, clock=fixed_clock(), check_invariants=check_invariants
    )
    assert session.events[len(log) + len(closers)].type == "session/end-seed"


def test_case_01_closed_turn_gets_no_closers() -> None:
    log = build(TS(1), TE(1, "completed"))
    assert interrupted_turn_closers(log) == []


def test_case_02_empty_log_gets_no_closers() -> None:
    assert interrupted_turn_closers([]) == []


def test_case_03_open_turn_without_step_gets_turn_end_only() -> None:
    log = build(TS(1))
    closers = interrupted_turn_closers(log)
    assert closers == [turn_end(1, seq=1, time=0)]
    assert_balanced(log, closers)


def test_case_04_open_step_gets_step_end_then_turn_end() -> None:
    log = build(TS(1), SS(1, 1))
    closers = interrupted_turn_closers(log)
    assert closers == [step_end(1, 1, seq=2, time=1), turn_end(1, seq=3, time=1)]
    assert_balanced(log, closers)


def _case_05_log() -> list[Any]:
    return [TS(2), SS(2, 1), A(2, 1, txt("calling a tool"), call("call-1", "bash", "{}"))]


def test_case_05_unstarted_call_gets_not_started_result() -> None:
    log = build(*_case_05_log())
    closers = interrupted_turn_closers(log)
    assert closers == [
        NS("call-1", turn=2, step=1, seq=3, time=2),
        step_end(2, 1, seq=4, time=2),
        turn_end(2, seq=5, time=2),
    ]
    result = closers[0]
    assert result.source_event_seqs is None
    assert result.surface_op == "append"
    assert result.data["message"]["id"] == "interrupted-tool-result-call-1-3"
    assert result.data["message"]["content"][0]["content"][0]["text"] == NOT_STARTED_TEXT
    # Key order of a repair result (docs/recovery.md#recovery-results): message then block.
    assert list(result.data["message"]) == ["id", "role", "source", "content"]
    assert list(result.data["message"]["content"][0]) == [
        "type",
        "toolCallId",
        "isError",
        "content",
    ]
    assert_balanced(log, closers, check_invariants=False)


def test_case_06_answered_call_gets_no_result() -> None:
    log = build(*_case_05_log(), TR(2, 1, "call-1"))
    closers = interrupted_turn_closers(log)
    assert closers == [step_end(2, 1, seq=4, time=3), turn_end(2, seq=5, time=3)]


def test_case_07_call_in_closed_step_gets_no_result() -> None:
    log = build(TS(2), SS(2, 1), A(2, 1, call("call-1")), SE(2, 1))
    closers = interrupted_turn_closers(log)
    assert closers == [turn_end(2, seq=4, time=3)]
    assert_balanced(log, closers, check_invariants=False)


def test_case_08_only_the_trailing_open_turn_is_repaired() -> None:
    log = build(
        TS(1),
        SS(1, 1),
        A(1, 1, call("old-call")),
        TR(1, 1, "old-call"),
        SE(1, 1),
        TE(1, "completed"),
        TS(2),
        SS(2, 1),
        A(2, 1, call("new-call")),
    )
    assert log[8].seq == 8
    closers = interrupted_turn_closers(log)
    assert closers == [
        NS("new-call", turn=2, step=1, seq=9, time=8),
        step_end(2, 1, seq=10, time=8),
        turn_end(2, seq=11, time=8),
    ]


def test_case_09_partly_answered_step_gets_results_for_the_rest() -> None:
    log = build(TS(1), SS(1, 1), A(1, 1, call("call-a"), call("call-b")), TR(1, 1, "call-a"))
    closers = interrupted_turn_closers(log)
    assert closers == [
        NS("call-b", turn=1, step=1, seq=4, time=3),
        step_end(1, 1, seq=5, time=3),
        turn_end(1, seq=6, time=3),
    ]


def test_case_10_recorded_call_gets_outcome_unknown_result() -> None:
    log = build(TS(1), SS(1, 1), A(1, 1, call("call-1")), TC(1, 1, "call-1"))
    closers = interrupted_turn_closers(log)
    assert closers == [
        OU("call-1", turn=1, step=1, seq=4, time=3, call_seq=3),
        step_end(1, 1, seq=5, time=3),
        turn_end(1, seq=6, time=3),
    ]
    result = closers[0]
    assert result.surface_op == "append"
    assert result.source_event_seqs == [3]
    assert result.data["error"] == {
        "name": "ToolOutcomeUnknownError",
        "code": "TOOL_OUTCOME_UNKNOWN",
    }
    assert result.data["message"]["id"] == "interrupted-tool-result-call-1-4"
    assert result.data["message"]["content"][0]["content"][0]["text"] == OUTCOME_UNKNOWN_TEXT
    assert_balanced(log, closers)


def test_case_11_orphan_tool_call_is_ignored() -> None:
    log = build(TS(1), SS(1, 1), TC(1, 1, "orphan"))
    closers = interrupted_turn_closers(log)
    assert closers == [step_end(1, 1, seq=3, time=2), turn_end(1, seq=4, time=2)]


def test_case_12_results_follow_assistant_block_order_not_tool_call_order() -> None:
    log = build(TS(1), SS(1, 1), A(1, 1, call("a"), call("b")), TC(1, 1, "b"))
    closers = interrupted_turn_closers(log)
    assert closers == [
        NS("a", turn=1, step=1, seq=4, time=3),
        OU("b", turn=1, step=1, seq=5, time=3, call_seq=3),
        step_end(1, 1, seq=6, time=3),
        turn_end(1, seq=7, time=3),
    ]
    assert closers[0].data["message"]["id"] == "interrupted-tool-result-a-4"
    assert closers[1].data["message"]["id"] == "interrupted-tool-result-b-5"


def test_case_13_seq_base_and_time_come_from_the_last_event_of_any_type() -> None:
    log = build(TS(1), ES().at(50))
    closers = interrupted_turn_closers(log)
    assert closers == [turn_end(1, seq=2, time=50)]


def test_case_14_latest_tool_call_wins() -> None:
    log = build(TS(1), SS(1, 1), A(1, 1, call("a")), TC(1, 1, "a"), TC(1, 1, "a"))
    closers = interrupted_turn_closers(log)
    assert closers == [
        OU("a", turn=1, step=1, seq=5, time=4, call_seq=4),
        step_end(1, 1, seq=6, time=4),
        turn_end(1, seq=7, time=4),
    ]


def test_case_15_tool_outcome_unknown_fixture_resumes_after_closers() -> None:
    log = build(
        TS(1),
        U("run it"),
        SS(1, 1),
        A(1, 1, call("unknown-outcome-call")),
        TC(1, 1, "unknown-outcome-call"),
    )
    closers = interrupted_turn_closers(log)
    assert closers == [
        OU("unknown-outcome-call", turn=1, step=1, seq=5, time=4, call_seq=4),
        step_end(1, 1, seq=6, time=4),
        turn_end(1, seq=7, time=4),
    ]
    assert closers[0].data["message"]["id"] == "interrupted-tool-result-unknown-outcome-call-5"
    # Resume: the constructor writes session/end-seed at 8, an inbox splice and turn 2 follow.
    session = Session("resumed", seed=log + closers, clock=fixed_clock(99))
    assert [e.type for e in session.events[5:]] == [
        "tool/result",
        "step/end",
        "turn/end",
        "session/end-seed",
    ]
    assert session.events[8].seq == 8
    assert session.first_live_seq == 8
    session.append("agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": []})
    started = session.append("turn/start", {"turn": 2})
    assert started.seq == 10
    assert interrupted_turn_closers(session.events) == [turn_end(2, seq=11, time=99)]
