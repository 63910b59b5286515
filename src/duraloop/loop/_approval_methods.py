"""`AgentLoop`'s approval methods: pending approvals, decide, continue (docs/approvals.md)."""

from __future__ import annotations

from ..errors import UsageError
from ..log import PendingApproval
from ._approvals import PausedTurn
from ._driver import TurnDriver
from ._result import TurnResult


class ApprovalMethods:
    """`AgentLoop`'s approval methods (docs/approvals.md); the loop provides the state."""

    _paused: PausedTurn
    _driver: TurnDriver

    def _check_open(self) -> None:
        raise NotImplementedError  # pragma: no cover - AgentLoop's

    @property
    def paused(self) -> PendingApproval | None:
        """The approval the session's open turn waits on (decided or not), or None."""
        return self._paused.pending

    def pending_approvals(self) -> list[PendingApproval]:
        """Return the calls waiting for a decision: at most one (docs/approvals.md#the-barrier)."""
        pending = self._paused.pending
        return [pending] if pending is not None and not pending.decided else []

    async def decide(
        self, call_id: str, *, allow: bool, feedback: str | None = None
    ) -> PendingApproval:
        """Record a person's decision for the waiting call; it is durable when this returns.

        Then `continue_turn()` carries it out (here, or in a loop resumed elsewhere).

        Args:
            call_id: the waiting call (`pending_approvals()[0].call_id`).
            allow: True runs the call once; False rejects it (the model gets an error result).
            feedback: with a rejection, what the model is told.

        Returns:
            The approval, now decided.

        Raises:
            ApprovalError: if `call_id` is not waiting for a decision (none waits, another
                call waits, or it is already decided), or `allow` is not a bool or `feedback`
                not a str; nothing is appended.
            UsageError: if the loop is closed or a turn is running.
        """
        self._check_idle()
        return self._paused.decide(call_id, allow=allow, feedback=feedback)

    async def continue_turn(self) -> TurnResult:
        """Continue the paused turn once its ask is decided, as `run_turn()` runs a turn.

        The decided call runs (allowed) or gets its error result (rejected); the rest of
        the step runs in model order; the turn goes on to the next model request.

        Returns:
            The turn's result (`paused` again if a later call waits for approval).

        Raises:
            ApprovalError: if the session is not paused, or its ask is not decided.
            UsageError: if the loop is closed or a turn is running.
            Exception: the original failure of an `error` turn, as from `run_turn()`.
        """
        self._check_idle()
        self._paused.check_can_continue()
        result = await self._driver.run(None)
        if result.error is not None:
            raise result.error
        return result

    def _check_idle(self) -> None:
        self._check_open()
        if self._driver.signal is not None:
            raise UsageError("a turn is already running on this AgentLoop; await it or cancel it")
