"""`AgentLoop`'s re-run of outcome-unknown idempotent calls.

See docs/recovery.md#re-running-outcome-unknown-calls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import UsageError
from ..log import Message, Session, user_message
from ..tools import ToolRegistry
from ._approvals import PausedTurn
from ._driver import TurnDriver
from ._rerun import Rerun, RerunDecision, RerunOrder, rerun_decisions
from ._result import TurnResult


@dataclass(frozen=True)
class RerunReport:
    """What `AgentLoop.retry_unknown_calls()` did.

    Args:
        decisions: every `TOOL_OUTCOME_UNKNOWN` call of the session and whether it was
            chosen for a re-run (with the reason when not), in log order.
        reruns: what each chosen re-run did, in order (empty when none was chosen).
        turn: the turn that ran the re-runs, or None when there was nothing to re-run.
    """

    decisions: tuple[RerunDecision, ...]
    reruns: tuple[Rerun, ...] = ()
    turn: TurnResult | None = None


class RerunMethods:
    """`AgentLoop.unknown_calls` and `retry_unknown_calls`; the loop provides the state."""

    session: Session
    registry: ToolRegistry
    _driver: TurnDriver
    _paused: PausedTurn
    _check_idle: Callable[[], None]
    _rerun_next: RerunOrder | None = None
    """The re-runs the next opened turn starts with (`_open_turn` hands them over)."""

    def unknown_calls(self) -> list[RerunDecision]:
        """Return every `TOOL_OUTCOME_UNKNOWN` call and whether `retry_unknown_calls` re-runs it.

        See docs/recovery.md#re-running-outcome-unknown-calls. Reads the log only.

        Returns:
            One decision per call in log order: re-run when its tool is registered here and
            declared `idempotent`, it was not re-run before, and its result is still in the
            model's context; otherwise skipped, with the reason.
        """
        return rerun_decisions(self.session, self.registry)

    async def retry_unknown_calls(
        self, prompt: str | Message | None = None, *, continue_with_model: bool = True
    ) -> RerunReport:
        """Re-run the idempotent `TOOL_OUTCOME_UNKNOWN` calls as the first step of a new turn.

        See docs/recovery.md#re-running-outcome-unknown-calls. Never done automatically:
        only this call (`duraloop resume --retry-unknown`) re-runs anything. Each chosen
        call gets a new `tool/call` (same call id, name and arguments, `retryOf`: the seq of
        the earlier `tool/call`), its body runs with the same `ctx.idempotency_key`, and its
        result replaces the unknown one in place (content-only: the model sees the re-run's
        output where it saw "outcome unknown"). Pre-execute hooks run as for any call; a
        call they refuse, or that asks for approval, is not run and keeps its unknown
        result. Contexts a re-run defers enter at the next step; `conclude_turn()` is
        ignored (the model has not seen the outcome yet).

        Args:
            prompt: the user's text or message for the step after the re-runs; None: none.
            continue_with_model: after the re-runs, request the model (with `prompt` and
                pending messages, if any) as the turn's next step; False ends the turn
                `completed` after the re-run step (then `prompt` must be None).

        Returns:
            The decisions, what each re-run did, and the turn (None when nothing was to be
            re-run: no turn is opened then).

        Raises:
            UsageError: if a turn is running, the loop is closed or paused on an approval,
                or a prompt is given with `continue_with_model=False`.
            Exception: the original failure of an `error` turn, as from `run_turn()`.
        """
        self._check_idle()
        if prompt is not None and not continue_with_model:
            raise UsageError(
                "retry_unknown_calls() got a prompt with continue_with_model=False; the turn "
                "would end before the model sees it: drop the prompt or continue with the model"
            )
        paused = self._paused.pending
        if paused is not None:
            raise UsageError(
                f"session {self.session.id} is paused on an approval for call "
                f"{paused.call_id!r}; decide and continue that turn before re-running calls"
            )
        decisions = tuple(self.unknown_calls())
        calls = tuple(decision.call for decision in decisions if decision.rerun)
        if not calls:
            return RerunReport(decisions)
        order = RerunOrder(calls, continue_with_model)
        self._rerun_next = order
        message = user_message(prompt) if isinstance(prompt, str) else prompt
        try:
            result = await self._driver.run(message)
        finally:
            self._rerun_next = None
        if result.error is not None:
            raise result.error
        return RerunReport(decisions, tuple(order.done), result)
