"""Approvals in the log: the effective policy, and the paused ask of an open turn.

See docs/approvals.md.

A call that needs a person's approval is asked with `approval/asked {id, toolName, callId,
reason}` before its `tool/call` (its body has not started) and answered with
`approval/decided {id, outcome[, feedback]}`. A turn waiting for that answer is *paused*: it
stays open, and its log ends in a shape this module recognizes, so a resume (in any process)
continues it instead of closing it as a crash. The shape (`pending_approval`):

- the final turn is open, and so is its last step;
- the step's assistant message requested calls; every call recorded by a `tool/call` has its
  `tool/result`, and the first call still unanswered (in model order) has no `tool/call`;
- an `approval/asked` of the step names that call, and no outcome other than allowed-once or
  rejected answers it (a decision recorded before the process stopped is kept: it is carried
  out by the next `continue_turn()`).

Anything else that ends inside a turn is a crash, closed by repair as before. dsh's reader
closes a paused turn as interrupted (the waiting call gets `TOOL_NOT_STARTED`), so it never
sees an unpaired history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._event import Event
from ._messages import ToolCallBlock, tool_calls_of
from ._pending import PendingToolCalls
from ._turns import open_turn_start
from .vocabulary import (
    APPROVAL_ALLOWED_ONCE,
    APPROVAL_ASKED,
    APPROVAL_DECIDED,
    APPROVAL_POLICIES,
    APPROVAL_POLICY,
    APPROVAL_REJECTED,
    ASSISTANT_MESSAGE,
    BLOCK_TOOL_CALL,
    POLICY_ASK,
    STEP_END,
    STEP_START,
)


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """The ask a paused turn waits on (docs/approvals.md#pausing).

    Args:
        ask_id: the `approval/asked` id.
        call_id: the waiting tool call's id.
        tool_name: the tool the model called.
        arguments: the call's raw argument text, as the model wrote it (untrusted).
        reason: why approval is needed ("" if the asker gave none).
        turn: the open turn.
        step: the open step.
        asked_seq: the seq of the `approval/asked`.
        outcome: `"allowed-once"` or `"rejected"` once decided; None while waiting.
        feedback: the person's feedback with a rejection, or None.
    """

    ask_id: str
    call_id: str
    tool_name: str
    arguments: str
    reason: str
    turn: int
    step: int
    asked_seq: int
    outcome: str | None = None
    feedback: str | None = None

    @property
    def decided(self) -> bool:
        """Whether a decision is recorded (the turn can be continued)."""
        return self.outcome is not None


MAX_FEEDBACK_CHARS = 4000
"""The longest feedback kept with a rejection, in characters (longer text is cut)."""


def pending_approval(events: Sequence[Event]) -> PendingApproval | None:
    """Return the ask the log's open final turn is paused on, or None (see the module).

    Reads only the final turn (a backward walk to its `turn/start`).

    Args:
        events: a log in seq order.

    Returns:
        The paused ask, or None when no turn is open or the open turn is not paused (a crash
        tail, which repair closes).
    """
    start = open_turn_start(events)
    if start is None:
        return None
    step_index = _open_step_start(events, start)
    if step_index is None:
        return None
    step_events = events[step_index:]
    tracker = PendingToolCalls()
    asked: dict[str, Event] = {}  # call id -> its latest ask
    decided: dict[str, Event] = {}  # ask id -> its decision
    arguments: dict[str, str] = {}
    for event in step_events:
        tracker.observe(event)
        kind, data = event.type, event.data
        if kind == ASSISTANT_MESSAGE:
            arguments.update(_call_arguments(data))
            asked.clear()
            decided.clear()
        elif kind == APPROVAL_ASKED and isinstance(data.get("callId"), str):
            asked[data["callId"]] = event
        elif kind == APPROVAL_DECIDED and isinstance(data.get("id"), str):
            decided[data["id"]] = event
    pending = tracker.pending()
    if not pending or any(call.call_seq is not None for call in pending):
        return None
    first = pending[0]
    ask = asked.get(first.call_id)
    if ask is None or not isinstance(ask.data.get("id"), str):
        return None
    ask_id = ask.data["id"]
    decision = decided.get(ask_id)
    outcome: str | None = None
    feedback: str | None = None
    if decision is not None:
        outcome = decision.data.get("outcome")
        if outcome not in (APPROVAL_ALLOWED_ONCE, APPROVAL_REJECTED):
            return None  # cancelled or unavailable: the call was being closed, a crash tail
        note = decision.data.get("feedback")
        feedback = note if isinstance(note, str) else None
    reason = ask.data.get("reason")
    tool_name = ask.data.get("toolName")
    start_data = events[step_index].data
    return PendingApproval(
        ask_id=ask_id,
        call_id=first.call_id,
        tool_name=tool_name if isinstance(tool_name, str) else "",
        arguments=arguments.get(first.call_id, ""),
        reason=reason if isinstance(reason, str) else "",
        turn=int(start_data.get("turn", 0)),
        step=int(start_data.get("step", 0)),
        asked_seq=ask.seq,
        outcome=outcome,
        feedback=feedback,
    )


def effective_policy(events: Sequence[Event], default: str = POLICY_ASK) -> str:
    """Return the session's approval policy: the last `approval/policy` event's, else `default`.

    dsh's fold (last event wins). A log read with an index of latest events folds the same
    way through `policy_of`.

    Args:
        events: a log in seq order.
        default: the policy when no event sets one.

    Returns:
        `"ask"` or `"never"`.
    """
    for index in range(len(events) - 1, -1, -1):
        if events[index].type == APPROVAL_POLICY:
            return policy_of(events[index], default)
    return default


def policy_of(event: Event | None, default: str = POLICY_ASK) -> str:
    """Return the policy the latest `approval/policy` event sets (`default` for none).

    An event with a policy outside dsh's two (which dsh's invariant refuses) sets `default`.
    """
    policy = None if event is None else event.data.get("policy")
    return str(policy) if policy in APPROVAL_POLICIES else default


def decided_data(ask_id: str, outcome: str, feedback: str | None) -> dict[str, Any]:
    """Return the `approval/decided` data of one decision (feedback only with a rejection).

    Args:
        ask_id: the ask's id.
        outcome: one of dsh's four outcomes.
        feedback: the person's feedback, cut to `MAX_FEEDBACK_CHARS`; None or "" for none.
    """
    data: dict[str, Any] = {"id": ask_id, "outcome": outcome}
    if feedback and outcome == APPROVAL_REJECTED:
        data["feedback"] = feedback[:MAX_FEEDBACK_CHARS]
    return data


def waiting_calls(events: Sequence[Event], pending: PendingApproval) -> list[ToolCallBlock]:
    """Return the paused step's waiting call and the calls after it, in model order.

    Args:
        events: the log `pending` was read from.
        pending: its pending approval.

    Returns:
        The tool-call blocks of the step's assistant message from `pending.call_id` on.
    """
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event.type == ASSISTANT_MESSAGE and event.seq < pending.asked_seq:
            calls = tool_calls_of(event.data["message"])
            ids = [call["id"] for call in calls]
            return calls[ids.index(pending.call_id) :] if pending.call_id in ids else []
    return []


def _open_step_start(events: Sequence[Event], turn_start: int) -> int | None:
    """Return the index of the open step's `step/start` within the final turn, or None."""
    for index in range(len(events) - 1, turn_start, -1):
        kind = events[index].type
        if kind == STEP_END:
            return None
        if kind == STEP_START:
            return index
    return None


def _call_arguments(data: object) -> dict[str, str]:
    """Return each tool-call block's raw arguments of an `assistant/message`, by call id."""
    message = data.get("message") if isinstance(data, dict) else None
    found: dict[str, str] = {}
    if not isinstance(message, dict):
        return found
    for block in message.get("content") or ():
        if isinstance(block, dict) and block.get("type") == BLOCK_TOOL_CALL:
            call_id, raw = block.get("id"), block.get("arguments")
            if isinstance(call_id, str):
                found[call_id] = raw if isinstance(raw, str) else ""
    return found
