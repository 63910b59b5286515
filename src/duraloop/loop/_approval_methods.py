"""`AgentLoop`'s approval methods: pending approvals, decide, continue (docs/approvals.md)."""

from __future__ import annotations

from ..errors import UsageError
from ..log import PendingApproval, Session
from ..log.vocabulary import POLICY_NEVER
from ..tools import Approver
from ._approvals import PausedTurn
from ._config import LoopConfig
from ._driver import TurnDriver
from ._result import TurnResult
from ._state import LoopState


class ApprovalMethods:
    """`AgentLoop`'s approval methods (docs/approvals.md); the loop provides the state."""

    _paused: PausedTurn
    _driver: TurnDriver
    config: LoopConfig
    approver: Approver | None
    _state: LoopState
    _closed: bool
    session: Session

    @property
    def paused(self) -> PendingApproval | None:
        """The approval the session's open turn waits on (decided or not), or None."""
        return self._paused.pending

    def pending_approvals(self) -> list[PendingApproval]:
        """Return the calls waiting for a person's decision: at most one.

        A waiting call is a barrier (docs/approvals.md#the-barrier). An ask this loop's
        policy or allow-list answers is not listed: `continue_turn()` answers it.
        """
        pending = self._paused.pending
        if pending is None or pending.decided or self._policy_answers(pending):
            return []
        return [pending]

    def _policy_answers(self, pending: PendingApproval) -> bool:
        """Whether the loop's policy or allow-list answers `pending` without a person."""
        policy = self.config.approval_policy or self._state.approval_policy
        return policy == POLICY_NEVER or pending.tool_name in self.config.auto_approve

    def _answers_itself(self) -> bool:
        """Whether the loop answers the undecided waiting ask itself (policy, list, approver)."""
        pending = self._paused.pending
        return pending is not None and (self.approver is not None or self._policy_answers(pending))

    async def decide(
        self, call_id: str, *, allow: bool, feedback: str | None = None
    ) -> PendingApproval:
        """Record a person's decision for the waiting call; it is durable when this returns.

        Then `continue_turn()` carries it out (here, or in a loop resumed elsewhere).

        Args:
            call_id: the waiting call (`pending_approvals()[0].call_id`).
            allow: True runs the call once; False rejects it (the model gets an error result).
            feedback: with a rejection, what the model is told (not kept with an approval).

        Returns:
            The approval, now decided.

        Raises:
            ApprovalError: if `call_id` is not waiting for a decision (none waits, another
                call waits, or it is already decided), `allow` is not a bool, or `feedback` is
                not text of at most `log.MAX_FEEDBACK_CHARS` characters; nothing
                is appended.
            UsageError: if the loop is closed or a turn is running.
        """
        self._check_idle()
        return self._paused.decide(call_id, allow=allow, feedback=feedback)

    async def continue_turn(self) -> TurnResult:
        """Continue the paused turn, as `run_turn()` runs a turn.

        The waiting call's decision is carried out: the recorded one, else the one this
        loop makes itself (its `never` policy, its allow-list, or its approver, asked about
        the same ask). The call runs (allowed) or gets its error result (rejected); the rest
        of the step runs in model order; the turn goes on to the next model request.

        Returns:
            The turn's result (`paused` again if a later call waits for approval, or the
            approver gave no answer).

        Raises:
            ApprovalError: if the session is not paused, or its ask is undecided and this
                loop has no way to answer it (`decide()` first).
            UsageError: if the loop is closed or a turn is running.
            Exception: the original failure of an `error` turn, as from `run_turn()`.
        """
        self._check_idle()
        self._paused.check_can_continue(answerable=self._answers_itself())
        result = await self._driver.run(None)
        if result.error is not None:
            raise result.error
        return result

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(
                f"this AgentLoop for session {self.session.id} is closed (its writer is released, "
                "so nothing would be persisted); open the session again with resume_session()"
            )

    def _check_idle(self) -> None:
        self._check_open()
        if self._driver.signal is not None:
            raise UsageError("a turn is already running on this AgentLoop; await it or cancel it")
