"""Whole-log checks for tests: relational invariants, Law 4, one `turn/end` per turn.

`assert_log_valid` is what every failure test asserts afterwards: the log is still a valid,
provider-acceptable conversation, whatever failed. `describe_log` renders a log in the
spec's compact notation so a test can compare the shape of a whole log in one line.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..log import (
    Event,
    InvariantChecker,
    Session,
    check_pairing,
    pending_approval,
    tool_calls_of,
)
from ..log.vocabulary import (
    APPROVAL_ALLOWED_ONCE,
    APPROVAL_ASKED,
    APPROVAL_DECIDED,
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from ._retry_check import check_retry_events


def _result_call_id(event: Event) -> str:
    return str(event.data["message"]["source"]["callId"])


def _describe(event: Event) -> str | None:
    kind, data = event.type, event.data
    if kind == TURN_START:
        return f"T+{data['turn']}"
    if kind == TURN_END:
        return f"T-{data['turn']}({data['reason']['kind']})"
    if kind == STEP_START:
        return f"S+{data['step']}"
    if kind == STEP_END:
        return f"S-{data['step']}"
    if kind == USER_MESSAGE:
        return "U"
    if kind == REQUEST_HEADER:
        return "H"
    if kind == REQUEST_CONTEXT:
        return "C"
    if kind == ASSISTANT_CHUNK:
        return None
    if kind == ASSISTANT_MESSAGE:
        calls = [block["id"] for block in tool_calls_of(data["message"])]
        flag = "!" if data.get("interrupted") else ""
        return f"A{flag}({','.join(calls)})" if calls else f"A{flag}"
    if kind == TOOL_CALL:
        return f"call({data['callId']})"
    if kind == TOOL_RESULT:
        error = data.get("error")
        is_error = data["message"]["content"][0].get("isError")
        status = error["code"] if error else ("err" if is_error else "ok")
        return f"res({_result_call_id(event)},{status})"
    return kind


def describe_log(events: Sequence[Event]) -> list[str]:
    """Render a log in the spec's notation, dropping `assistant/chunk`s.

    Args:
        events: the log.

    Returns:
        One string per event, e.g. `T+1 S+1 U H C A(c1) call(c1) res(c1,ok) S-1 T-1(completed)`:
        `A!` marks an interrupted message, `res(id,CODE)` an error with a code, `res(id,err)`
        an error without one.
    """
    return [text for text in map(_describe, events) if text is not None]


def _check_law4(events: Sequence[Event]) -> None:
    """Each step's assistant calls have exactly one result each, in call order, before step/end.

    A `tool/result` that replaces another (`surfaceOp` replace: the pruner's, which an
    overflow runs inside a step; docs/compaction.md#the-pruner) answers no call.
    """
    expected: list[str] = []
    answered: list[str] = []
    for event in events:
        if event.type == STEP_START:
            expected, answered = [], []
        elif event.type == ASSISTANT_MESSAGE:
            expected = [block["id"] for block in tool_calls_of(event.data["message"])]
        elif event.type == TOOL_RESULT and not isinstance(event.surface_op, dict):
            answered.append(_result_call_id(event))
        elif event.type == STEP_END and answered != expected:
            raise AssertionError(
                f"Law 4: step {event.data['step']} of turn {event.data['turn']} (step/end at "
                f"seq {event.seq}) answered {answered}, expected {expected}"
            )


def assert_log_valid(session: Session) -> None:
    """Assert a session log is valid after whatever happened to it.

    Checks: the relational invariants (`InvariantChecker`) over the whole log; Law 4 for every
    closed step; dsh's llm-retry invariants (`check_retry_events`); exactly one `turn/end` per
    `turn/start`; that the derived messages pass the provider pairing check; and the approval
    rules (`_check_approvals`). A final turn paused on an approval (`log.pending_approval`,
    docs/approvals.md#pausing) is valid open: its step's messages are not paired yet.

    Args:
        session: the session to check.

    Raises:
        AssertionError: naming the first broken rule.
    """
    events = session.events
    _check_approvals(events)
    paused = pending_approval(events) is not None
    try:
        InvariantChecker().check_all(events)
        messages = session.derive_messages()
        if paused:
            last = max(i for i, m in enumerate(messages) if m.get("role") == "assistant")
            messages = messages[:last]
        check_pairing(messages)
    except Exception as exc:
        raise AssertionError(f"log check failed: {exc}") from exc
    _check_law4(events)
    check_retry_events(events)
    starts = [e.data["turn"] for e in events if e.type == TURN_START]
    ends = [e.data["turn"] for e in events if e.type == TURN_END]
    if paused:
        ends.append(starts[-1])
    if starts != ends:
        raise AssertionError(f"turn/start {starts} and turn/end {ends} do not pair up")


def _check_approvals(events: Sequence[Event]) -> None:
    """Each ask is decided at most once, and an asking call is recorded only once decided.

    A `tool/call` of a call with an `approval/asked` in its step must follow that ask's
    `approval/decided` (a body never runs without a durable decision), and a call decided
    anything but `allowed-once` must be answered with an error result.
    """
    asked: dict[str, str] = {}  # ask id -> call id
    decided: dict[str, str] = {}  # call id -> outcome, for the calls of the open step
    waiting: set[str] = set()  # call ids asked and not decided yet
    for event in events:
        kind, data = event.type, event.data
        if kind == STEP_START:
            decided, waiting = {}, set()
        elif kind == APPROVAL_ASKED:
            if data["id"] in asked:
                raise AssertionError(f"approval/asked repeats id {data['id']} (seq {event.seq})")
            asked[data["id"]] = data.get("callId", "")
            waiting.add(data.get("callId", ""))
        elif kind == APPROVAL_DECIDED:
            call_id = asked.pop(data["id"], None)
            if call_id is None:
                raise AssertionError(
                    f"approval/decided {data['id']} (seq {event.seq}) answers no pending ask"
                )
            waiting.discard(call_id)
            decided[call_id] = data["outcome"]
        elif kind == TOOL_CALL and data["callId"] in waiting:
            raise AssertionError(
                f"tool/call {data['callId']} (seq {event.seq}) before its approval was decided"
            )
        elif kind == TOOL_RESULT:
            call_id = _result_call_id(event)
            outcome = decided.get(call_id)
            ok = not event.data["message"]["content"][0].get("isError")
            if outcome is not None and outcome != APPROVAL_ALLOWED_ONCE and ok:
                raise AssertionError(
                    f"call {call_id} was decided {outcome} but its result (seq {event.seq}) "
                    "is a success"
                )
