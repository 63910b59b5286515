"""The loop's side of approvals: the pending approval, decisions, a cancel while paused.

See docs/approvals.md.

An `AgentLoop` over a session whose final turn is paused (`log.pending_approval`) keeps that
approval here. `decide` records the person's answer (durable before it returns), from this
process or from any other that holds the session's writer; the turn then continues with
`AgentLoop.continue_turn()`. A cancel while paused closes the turn as dsh closes a cancel
during an ask: the ask is decided `cancelled`, the waiting calls get
`ABORTED_BEFORE_DISPATCH`, the step ends, the turn ends `aborted`.
"""

from __future__ import annotations

from typing import Any

from ..errors import ApprovalError
from ..log import (
    MAX_FEEDBACK_CHARS,
    PendingApproval,
    Session,
    decided_data,
    pending_approval,
    waiting_calls,
)
from ..log.vocabulary import (
    APPROVAL_ALLOWED_ONCE,
    APPROVAL_DECIDED,
    APPROVAL_REJECTED,
    REASON_ABORTED,
    STEP_END,
    TURN_END,
)
from ..tools import cancel_waiting
from ._durability import GroupCommit


class PausedTurn:
    """The approval a loop's session waits on, if any, and what can be done about it.

    Args:
        session: the live session.
        durability: the loop's durability (decisions are flushed before they are returned).
    """

    def __init__(self, session: Session, durability: GroupCommit) -> None:
        self._session = session
        self._durability = durability
        self.pending: PendingApproval | None = pending_approval(session.events)
        """The approval the open turn waits on (decided or not), or None when not paused."""

    def refresh(self) -> None:
        """Read the pending approval again from the log (after a turn ran)."""
        self.pending = pending_approval(self._session.events)

    def decide(self, call_id: str, *, allow: bool, feedback: str | None) -> PendingApproval:
        """Record the decision for the waiting call `call_id` and make it durable.

        Args:
            call_id: the waiting call's id.
            allow: True to run the call once, False to reject it.
            feedback: with a rejection, what the model is told (at most
                `log.MAX_FEEDBACK_CHARS` characters).

        Returns:
            The pending approval, now decided.

        Raises:
            ApprovalError: if no call waits for approval, `call_id` is not the waiting call,
                its ask is already decided, `allow` is not a bool, or `feedback` is not a str
                (or None), is longer than `log.MAX_FEEDBACK_CHARS` or is not valid Unicode;
                nothing is appended. Feedback with an approval is not kept.
        """
        pending = self.pending
        session_id = self._session.id
        if pending is None:
            raise ApprovalError(
                f'session "{session_id}" has no call waiting for approval (call {call_id!r}); '
                "`duraloop pending` lists the sessions that wait"
            )
        if pending.call_id != call_id:
            raise ApprovalError(
                f'call {call_id!r} is not waiting for approval in session "{session_id}"; the '
                f"waiting call is {pending.call_id!r} ({pending.tool_name})"
            )
        if pending.decided:
            raise ApprovalError(
                f'call {call_id!r} of session "{session_id}" is already decided '
                f"({pending.outcome}); continue the turn to carry it out"
            )
        if not isinstance(allow, bool):
            raise ApprovalError(f"decide(allow=...) takes True or False, got {allow!r}")
        if feedback is not None and not isinstance(feedback, str):
            raise ApprovalError(f"decide(feedback=...) takes a str or None, got {feedback!r}")
        if feedback is not None and len(feedback) > MAX_FEEDBACK_CHARS:
            raise ApprovalError(
                f"the feedback has {len(feedback):,} characters; a decision keeps at most "
                f"{MAX_FEEDBACK_CHARS:,}: shorten it"
            )
        if feedback is not None and not feedback.isascii():
            try:
                feedback.encode("utf-8")
            except UnicodeEncodeError:
                raise ApprovalError(
                    "the feedback is not valid Unicode text (a lone surrogate); pass UTF-8 text"
                ) from None
        outcome = APPROVAL_ALLOWED_ONCE if allow else APPROVAL_REJECTED
        self._session.append(APPROVAL_DECIDED, decided_data(pending.ask_id, outcome, feedback))
        self._durability.flush()
        decided = pending_approval(self._session.events)
        if decided is None:  # pragma: no cover - a decision keeps the turn paused
            raise ApprovalError(f"the decision for call {call_id!r} did not keep the turn paused")
        self.pending = decided
        return decided

    def check_can_continue(
        self, prompt: object = None, *, answerable: bool = False
    ) -> PendingApproval:
        """Return the approval a continued turn starts from.

        Args:
            prompt: the prompt of the turn asked for; a paused session runs no new turn.
            answerable: whether the loop answers an undecided ask itself (its policy, its
                allow-list or its approver), so the turn may continue undecided.

        Raises:
            ApprovalError: if the session is not paused, its ask is undecided and not
                `answerable`, or a prompt is given (no new turn starts while one is paused).
        """
        pending = self.pending
        if pending is None:
            raise ApprovalError(
                f'session "{self._session.id}" has no paused turn to continue; run a new turn'
            )
        if (not pending.decided and not answerable) or prompt is not None:
            raise ApprovalError(self.waiting_message(pending))
        return pending

    def waiting_message(self, pending: PendingApproval) -> str:
        """The message of the error refusing to go on while `pending` is undecided."""
        if pending.decided:
            return (
                f'session "{self._session.id}" is paused: call {pending.call_id!r} '
                f"({pending.tool_name}) is decided ({pending.outcome}) but not carried out; "
                "continue the turn first (loop.continue_turn(), `duraloop resume "
                f"{self._session.id}`)"
            )
        return (
            f'session "{self._session.id}" is paused: call {pending.call_id!r} '
            f"({pending.tool_name}) waits for approval; decide it with loop.decide("
            f"{pending.call_id!r}, allow=...) or `duraloop approve {self._session.id}`, "
            "then continue the turn"
        )

    def cancel(self, reason: dict[str, Any]) -> None:
        """Close the paused turn as cancelled (see the module); the loop is then not paused.

        Args:
            reason: the cancel's reason, recorded in `turn/end {aborted, reason}`.
        """
        pending = self.pending
        if pending is None:
            return
        session = self._session
        cancel_waiting(session, pending, waiting_calls(session.events, pending))
        session.append(STEP_END, {"turn": pending.turn, "step": pending.step})
        session.append(
            TURN_END, {"turn": pending.turn, "reason": {"kind": REASON_ABORTED, "reason": reason}}
        )
        self._durability.flush()
        self.pending = None
