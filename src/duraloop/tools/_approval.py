"""Approvals in the scheduler: which calls ask, and how an ask is answered.

See docs/approvals.md.

A call asks when its tool's `requires_approval` says so (fail closed) or a pre-execute hook
returns `AskApproval`. The scheduler then records `approval/asked` (before any `tool/call` of
the call) and the `ApprovalGate` answers it: under the `never` policy every ask is rejected;
a tool on the loop's allow-list is approved; otherwise a person answers, in this process
(an `Approver`, such as `duraloop chat`'s inline prompt) or later, from any process, while
the turn is paused. Every answer is recorded as `approval/decided` exactly once, with dsh's
outcomes, and becomes what the call does: allowed-once runs the body, rejected gives the
model an error result (carrying the person's feedback), cancelled answers
`ABORTED_BEFORE_DISPATCH`, unavailable (an approver that failed) an error result.
"""

from __future__ import annotations

import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import anyio

from ..log import PendingApproval, Session, ToolCallBlock, decided_data
from ..log.vocabulary import (
    APPROVAL_ALLOWED_ONCE,
    APPROVAL_ASKED,
    APPROVAL_CANCELLED,
    APPROVAL_DECIDED,
    APPROVAL_REJECTED,
    APPROVAL_UNAVAILABLE,
    POLICY_NEVER,
    REJECTED_TEXT,
    REJECTED_WITH_FEEDBACK_TEXT,
    UNAVAILABLE_TEXT,
)
from ._outcome import ToolOutcome
from ._pipeline import Prepared
from ._request import ToolCallRequest, planned_calls
from ._scheduler_events import append_skipped_pair
from ._signal import CancelSignal

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ApprovalRequest:
    """What a person is asked about one call (handed to an `Approver`).

    Every string but `session_id` and `ask_id` comes from the model: untrusted, escape it
    wherever it is shown.

    Args:
        session_id: the session the call belongs to.
        ask_id: the `approval/asked` id.
        call_id: the tool call's id.
        tool_name: the tool the model called.
        arguments: the call's raw argument text, as the model wrote it.
        reason: why approval is needed ("" if the asker gave none).
    """

    session_id: str
    ask_id: str
    call_id: str
    tool_name: str
    arguments: str
    reason: str


@dataclass(frozen=True)
class Decision:
    """A person's answer to one ask.

    Args:
        allow: True to run the call once; False to reject it.
        feedback: with a rejection, what the model is told besides the rejection (kept up
            to `log.MAX_FEEDBACK_CHARS` characters); ignored when allowing.
    """

    allow: bool
    feedback: str | None = None


Approver: TypeAlias = Callable[[ApprovalRequest], "Decision | None | Awaitable[Decision | None]"]
"""Answers an ask in this process, sync or async: a `Decision`, or None to pause the turn
(the ask stays pending for `AgentLoop.decide`, from this process or another). A raise or any
other value is recorded `unavailable` (fail closed)."""


class ApprovalGate:
    """Answer one step's asks under the session's approval policy (see the module).

    Args:
        session: the live session (the audit events are appended to it).
        policy: the session's effective approval policy, `"ask"` or `"never"`.
        auto_approve: the tools whose asks are approved without a person.
        approver: answers asks in this process; None pauses the turn on each ask.
        recorded: the ask a continued turn starts from (docs/approvals.md#continuing): its
            decision is carried out, or, undecided, it is answered as a new ask is (policy,
            allow-list, approver) without being asked again; or None.
    """

    def __init__(
        self,
        session: Session,
        *,
        policy: str,
        auto_approve: frozenset[str] = frozenset(),
        approver: Approver | None = None,
        recorded: PendingApproval | None = None,
    ) -> None:
        self.session = session
        self.policy = policy
        self.auto_approve = auto_approve
        self.approver = approver
        self.recorded = recorded

    def holds(self, call: ToolCallRequest) -> bool:
        """Whether `call` is the recorded ask of a continued turn (`answer_recorded` it)."""
        return self.recorded is not None and self.recorded.call_id == call.call_id

    async def answer_recorded(
        self,
        call: ToolCallRequest,
        signal: CancelSignal,
        ensure_durable: Callable[[int], Awaitable[None]] | None,
    ) -> Prepared | None:
        """Return what the recorded ask's call does: its decision, or a new answer to it.

        An undecided recorded ask (already durable) is answered by the policy, the
        allow-list or the approver, and its one `approval/decided` appended; None pauses
        the turn again on it.
        """
        recorded = self.recorded
        if recorded is None:  # pragma: no cover - the scheduler asks `holds` first
            raise RuntimeError("no recorded ask to answer")
        self.recorded = None
        if recorded.outcome is not None:
            return _prepared(call, recorded.outcome, recorded.feedback)
        if self.policy == POLICY_NEVER:
            return self._decide(call, recorded.ask_id, APPROVAL_REJECTED)
        if call.name in self.auto_approve:
            return self._decide(call, recorded.ask_id, APPROVAL_ALLOWED_ONCE)
        return await self._ask_person(
            call, recorded.ask_id, recorded.reason, signal, ensure_durable
        )

    def needs_person(self, call: ToolCallRequest) -> bool:
        """Whether asking about `call` waits for a person (not the policy or the allow-list)."""
        return self.policy != POLICY_NEVER and call.name not in self.auto_approve

    async def ask(
        self,
        call: ToolCallRequest,
        reason: str,
        signal: CancelSignal,
        ensure_durable: Callable[[int], Awaitable[None]] | None,
    ) -> Prepared | None:
        """Record the ask, answer it, record the decision; return what the call does.

        Args:
            call: the asking call (no `tool/call` of it is in the log).
            reason: why it asks.
            signal: the turn's cancellation signal (a cancel decides `cancelled`).
            ensure_durable: makes the log durable through a seq; the ask is durable before
                any person is asked, and a person's decision before it is carried out.

        Returns:
            The prepared call (dispatch, or its result), or None to pause: no one answers
            in this process, and the ask stays pending in the log.
        """
        data: dict[str, Any] = {"id": str(uuid.uuid4()), "toolName": call.name}
        data["callId"] = call.call_id
        if reason:
            data["reason"] = reason
        asked = self.session.append(APPROVAL_ASKED, data)
        ask_id = data["id"]
        if self.policy == POLICY_NEVER:
            return self._decide(call, ask_id, APPROVAL_REJECTED)
        if call.name in self.auto_approve:
            return self._decide(call, ask_id, APPROVAL_ALLOWED_ONCE)
        if ensure_durable is not None:
            await ensure_durable(asked.seq)
        return await self._ask_person(call, ask_id, reason, signal, ensure_durable)

    async def _ask_person(
        self,
        call: ToolCallRequest,
        ask_id: str,
        reason: str,
        signal: CancelSignal,
        ensure_durable: Callable[[int], Awaitable[None]] | None,
    ) -> Prepared | None:
        """Ask the approver about a durable ask; None pauses (no approver, or no answer)."""
        if signal.aborted:  # cancelled while the ask became durable: no one is asked
            return self._decide(call, ask_id, APPROVAL_CANCELLED)
        if self.approver is None:
            return None
        request = ApprovalRequest(
            session_id=self.session.id,
            ask_id=ask_id,
            call_id=call.call_id,
            tool_name=call.name,
            arguments=call.raw_arguments,
            reason=reason,
        )
        try:
            answer = await _answer(self.approver, request, signal)
        except BaseException:  # KeyboardInterrupt, a cancel of the caller: still decided once
            self._decide(call, ask_id, APPROVAL_CANCELLED)
            raise
        if answer is None:
            return None
        outcome, feedback = answer
        prepared = self._decide(call, ask_id, outcome, feedback)
        if ensure_durable is not None:
            await ensure_durable(self.session.seq - 1)
        return prepared

    def _decide(
        self, call: ToolCallRequest, ask_id: str, outcome: str, feedback: str | None = None
    ) -> Prepared:
        self.session.append(APPROVAL_DECIDED, decided_data(ask_id, outcome, feedback))
        return _prepared(call, outcome, feedback)


def _prepared(call: ToolCallRequest, outcome: str, feedback: str | None) -> Prepared:
    """What a call does after its ask was decided `outcome` (docs/approvals.md#outcomes)."""
    if outcome == APPROVAL_ALLOWED_ONCE:
        return Prepared("dispatch")
    if outcome == APPROVAL_CANCELLED:
        return Prepared("final-result", ToolOutcome.cancelled(body_invoked=False))
    if outcome == APPROVAL_REJECTED:
        text = (
            REJECTED_WITH_FEEDBACK_TEXT.format(name=call.name, feedback=feedback)
            if feedback
            else REJECTED_TEXT.format(name=call.name)
        )
        return Prepared("post-result", ToolOutcome.failure(text))
    return Prepared("post-result", ToolOutcome.failure(UNAVAILABLE_TEXT.format(name=call.name)))


async def _answer(
    approver: Approver, request: ApprovalRequest, signal: CancelSignal
) -> tuple[str, str | None] | None:
    """Ask `approver`, racing the turn's cancel; return (outcome, feedback) or None to pause."""
    if signal.aborted:  # cancelled before anyone was asked: no one is (dsh's abort rule)
        return APPROVAL_CANCELLED, None
    answer: object = None
    failed = False
    with anyio.CancelScope() as scope:
        remove = signal.add_listener(lambda _reason: scope.cancel())
        try:
            answer = approver(request)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as exc:  # noqa: BLE001 - a failing approver is `unavailable`
            logger.warning(
                "approver raised %s for call %s; recorded unavailable",
                type(exc).__name__,
                request.call_id,
            )
            failed = True
        finally:
            remove()
    if signal.aborted or scope.cancelled_caught:
        return APPROVAL_CANCELLED, None
    if failed:
        return APPROVAL_UNAVAILABLE, None
    if answer is None:
        return None
    if not isinstance(answer, Decision) or not _well_formed(answer):
        logger.warning(
            "approver returned %s for call %s, not a Decision or None; recorded unavailable",
            type(answer).__name__,
            request.call_id,
        )
        return APPROVAL_UNAVAILABLE, None
    if answer.allow:
        return APPROVAL_ALLOWED_ONCE, None
    return APPROVAL_REJECTED, answer.feedback


def _well_formed(decision: Decision) -> bool:
    """Whether a `Decision` holds a bool `allow` and a str (or None) `feedback`."""
    feedback = decision.feedback
    return isinstance(decision.allow, bool) and (feedback is None or isinstance(feedback, str))


def cancel_waiting(
    session: Session, pending: PendingApproval, calls: Sequence[ToolCallBlock]
) -> None:
    """Answer a paused step's waiting calls as cancelled (docs/approvals.md#cancel-while-paused).

    Records `approval/decided {cancelled}` unless the ask is already decided, then a
    `tool/call` + `ABORTED_BEFORE_DISPATCH` pair for the waiting call and each call after it.

    Args:
        session: the live session.
        pending: the ask the step waits on.
        calls: the waiting call and the calls after it (`log.waiting_calls`), in model order.
    """
    if not pending.decided:
        session.append(APPROVAL_DECIDED, decided_data(pending.ask_id, APPROVAL_CANCELLED, None))
    for call in planned_calls(calls, turn=pending.turn, step=pending.step):
        append_skipped_pair(session, call)
