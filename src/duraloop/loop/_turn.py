"""The turn algorithm (docs/loop.md#turns): one turn's steps, from `turn/start` to `turn/end`.

A turn opens synchronously (`Turn.open`: `turn/start`, then the first claim of the inbox),
so a waking send from idle has both in the log before it returns (docs/loop.md#send-and-cancel). It
then runs steps until the model answers without tool calls and no steering is pending, and always
closes with exactly one `turn/end`. Each step's entering messages come from the inbox claim through
the `pre_step` hook (docs/loop.md#pre-step). A step always closes with `step/end`; when it fails
after the assistant message, the unanswered calls get recovery results first (`StepRecovery`), and
the ORIGINAL failure is recorded in `turn/end`.

A turn whose next call waits for a person's approval is paused (docs/approvals.md#pausing):
it returns a `paused` result and writes no `turn/end`; `Turn.continue_paused` reopens it
(from this process or another) once the ask is decided.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..errors import BudgetExceededError
from ..llm import ToolSchema, turn_failure, unknown_failure
from ..log import (
    Message,
    PendingApproval,
    Session,
    Usage,
    UsageFold,
    open_turn_start,
    pending_approval,
    text_of,
)
from ..log.vocabulary import (
    REASON_ABORTED,
    REASON_BLOCKED,
    REASON_COMPLETED,
    REASON_ERROR,
    REASON_MAX_TOKENS,
    STEP_START,
    TURN_END,
    TURN_START,
)
from ..tools import CancelSignal, TurnCancelled, tool_workers
from ._budget import model_key
from ._hooks import Reject, StepContext, call_hook, entering_messages
from ._prompt import default_system_prompt
from ._rerun import RerunOrder, run_rerun_step
from ._result import TurnResult
from ._state import LoopState, StepSettings, TurnDeps
from ._step import PAUSED, Step

logger = logging.getLogger(__name__)


class Turn:
    """One turn of an `AgentLoop`: opened synchronously, then run to its `turn/end`.

    Build it with `Turn.open()`; `run()` once. It reads what it depends on from `deps` and
    updates the loop's mutable `state` (turn number, request state, pairing check).

    Args:
        deps: what the turn depends on (session, model, tools, config, hooks, inbox, ...).
        state: the loop's mutable state, shared with the loop's other turns.
        number: the turn's number.
        prompt: the turn's prompt, or None (it comes from `next-turn`).
        signal: the turn's cancellation signal.
    """

    def __init__(
        self,
        deps: TurnDeps,
        state: LoopState,
        number: int,
        prompt: Message | None,
        signal: CancelSignal,
    ) -> None:
        self.deps = deps
        self.state = state
        self.turn = number
        self.prompt = prompt
        self.signal = signal
        self.steps = 0
        self.reason: dict[str, Any] | None = None
        self.text = ""
        self.first_claim: list[Message] = []
        self.continuing: PendingApproval | None = None
        """The decided ask a continued turn starts from (`continue_paused`)."""
        self.paused: PendingApproval | None = None
        """The ask the turn paused on, once it has."""
        self.rerun: RerunOrder | None = None
        """The outcome-unknown calls the turn re-runs first (`AgentLoop.retry_unknown_calls`)."""
        self._usage = UsageFold(deps.config.prices, model=model_key(deps.model))
        self._fed = len(deps.session.events) - 1  # from the turn's `turn/start` on

    @classmethod
    def continue_paused(
        cls, deps: TurnDeps, state: LoopState, paused: PendingApproval, signal: CancelSignal
    ) -> Turn:
        """Reopen the paused final turn of `deps.session`; `run()` carries out its decision.

        Args:
            deps: what the turn depends on.
            state: the loop's mutable state.
            paused: the decided ask the turn waits on (`pending_approval` of the log).
            signal: the turn's cancel signal.

        Returns:
            The turn; `run()` continues its paused step, then its steps as usual.
        """
        state.record_policy(deps.session, deps.config.approval_policy)  # for later asks
        turn = cls(deps, state, paused.turn, None, signal)
        turn.steps = paused.step
        turn.continuing = paused
        start = open_turn_start(deps.session.events)
        turn._fed = start if start is not None else turn._fed
        return turn

    @classmethod
    def open(
        cls, deps: TurnDeps, state: LoopState, prompt: Message | None, signal: CancelSignal
    ) -> Turn:
        """Append `turn/start` and claim the first step's messages, synchronously.

        The claim takes every `next-step` message, then the head of `next-turn` when no
        prompt is given (docs/loop.md#pre-step); `prompt` is entered after them.

        Args:
            deps: what the turn depends on.
            state: the loop's mutable state; its `last_turn` becomes this turn's number.
            prompt: the turn's prompt, or None to take it from `next-turn`.
            signal: the turn's cancel signal.

        Returns:
            The opened turn; `run()` it.

        Raises:
            BudgetExceededError: if the session budget is spent (nothing is appended).
            EventRejectedError: if `turn/start` or the claim is refused (no turn exists
                then; the inbox is unchanged).
        """
        budget = deps.config.session_budget
        if budget is not None:
            spent = budget.reached(deps.session_usage.of(deps.session), "session")
            if spent is not None:
                raise BudgetExceededError(f"session {deps.session.id}: {spent}")
        state.record_policy(deps.session, deps.config.approval_policy)
        number = state.last_turn + 1
        deps.session.append(TURN_START, {"turn": number})
        state.last_turn = number
        turn = cls(deps, state, number, prompt, signal)
        turn.first_claim = deps.inbox.claim(next_turn=prompt is None)
        if prompt is not None:
            turn.first_claim.append(prompt)
        return turn

    async def run(self) -> TurnResult:
        """Run the turn's steps and append its `turn/end`, whatever happens.

        Returns:
            The result; for an `error` turn its `error` is the original exception (the
            caller decides whether to raise it). Cancellation by the turn's signal gives an
            `aborted` result.

        Raises:
            BaseException: a cancellation of the caller's own scope (after `turn/end
                {aborted {parent}}` is appended), or a failure to append `turn/end` when the
                turn itself had not failed.
        """
        error: BaseException | None = None
        signal = self.signal
        try:
            await self._steps()
        except TurnCancelled as exc:
            self.reason = {"kind": REASON_ABORTED, "reason": exc.reason}
        except BaseException as exc:  # noqa: BLE001 - recorded in turn/end, then handed on
            error = exc
            if signal.aborted:
                self.reason = {"kind": REASON_ABORTED, "reason": signal.reason}
            elif not isinstance(exc, Exception):
                # The caller's own cancel scope (or KeyboardInterrupt) stopped the turn.
                self.reason = {"kind": REASON_ABORTED, "reason": {"kind": "parent"}}
            else:
                self.reason = {"kind": REASON_ERROR, "error": turn_failure(exc)}
        session = self.deps.session
        if self.paused is not None and error is None:
            self.deps.durability.flush()
            return TurnResult(
                turn=self.turn,
                reason={"kind": PAUSED, "callId": self.paused.call_id},
                text=self.text,
                steps=self.steps,
                usage=self.spent(),
                approval=self.paused,
            )
        reason = self.reason or {"kind": REASON_ERROR, "error": unknown_failure("no reason")}
        try:
            session.append(TURN_END, {"turn": self.turn, "reason": reason})
            self.deps.durability.flush()
        except Exception as exc:
            if error is None:
                raise
            # One line, not a traceback before the error the caller reports (often the same
            # cause: a full disk, a broken store); the traceback is at DEBUG.
            logger.error(
                "session %s: closing turn %d failed (%s: %s); the log ends inside the turn "
                "and resume repairs it",
                session.id,
                self.turn,
                type(exc).__name__,
                exc,
            )
            logger.debug("session %s: closing turn %d failed", session.id, self.turn, exc_info=True)
        if error is not None and not isinstance(error, Exception):
            raise error
        if signal.aborted:
            error = None
        return TurnResult(
            turn=self.turn,
            reason=reason,
            text=self.text,
            steps=self.steps,
            error=error,
            usage=self.spent(),
        )

    def spent(self) -> Usage:
        """Return what the turn spent so far (folded from its events, docs/loop.md#budgets)."""
        events = self.deps.session.events
        if len(events) > self._fed:
            self._usage.feed(events[self._fed :])
            self._fed = len(events)
        return self._usage.usage

    def _budget_reached(self) -> str | None:
        """Return why a budget stops the next step, or None (checked before each step)."""
        config = self.deps.config
        if config.turn_budget is not None:
            spent = config.turn_budget.reached(self.spent(), "turn")
            if spent is not None:
                return spent
        if config.session_budget is not None:
            usage = self.deps.session_usage.of(self.deps.session)
            return config.session_budget.reached(usage, "session")
        return None

    def _settings(self) -> StepSettings:
        deps = self.deps
        config = deps.config
        return StepSettings(
            turn=self.turn,
            signal=self.signal,
            system=config.system_prompt
            if config.system_prompt is not None
            else default_system_prompt(deps.workspace, [tool.name for tool in deps.registry]),
            tools=[ToolSchema(**schema) for schema in deps.registry.schemas()],
        )

    async def _steps(self) -> None:
        # One set of tool workers serves every step of the turn, so no step spawns worker
        # tasks anew (docs/scheduler.md#running-a-group).
        async with tool_workers() as workers:
            await self._run_steps(replace(self._settings(), workers=workers))

    async def _run_steps(self, settings: StepSettings) -> None:
        deps, signal = self.deps, self.signal
        max_steps = deps.config.max_steps
        turn_ends: str | None = None
        if self.continuing is not None:
            turn_ends = await self._continue(self.continuing, settings)
            if turn_ends == PAUSED:
                return
            if await self._stops(turn_ends):
                self.reason = {"kind": turn_ends}
                return
        first_step = 0
        if self.rerun is not None:  # docs/recovery.md#re-running-outcome-unknown-calls
            self.steps = first_step = 1
            await run_rerun_step(deps, self.rerun, turn=self.turn, step=1, signal=signal)
            signal.throw_if_aborted()
            if not self.rerun.continue_with_model:
                self.reason = {"kind": REASON_COMPLETED}
                return
        while True:
            signal.throw_if_aborted()
            if self.steps >= max_steps:
                self.reason = {
                    "kind": REASON_BLOCKED,
                    "message": f"the turn reached max_steps={max_steps} before the "
                    "model finished; run another turn to continue, or raise max_steps",
                }
                return
            blocked = self._budget_reached()
            if blocked is not None:
                self.reason = {"kind": REASON_BLOCKED, "message": blocked}
                return
            step = self.steps + 1
            first = self.steps == first_step
            if first:
                claimed, self.first_claim = self.first_claim, []
            else:
                claimed = deps.inbox.claim(next_turn=False)
            entering = await self._pre_step(step, claimed)
            if isinstance(entering, Reject):
                self.reason = {"kind": REASON_BLOCKED}
                if entering.message:
                    self.reason["message"] = entering.message
                return
            if turn_ends is not None and not entering:
                break
            if first and not entering and not first_step:
                self.reason = {"kind": REASON_COMPLETED}
                return
            signal.throw_if_aborted()
            step_end = await self._step(step, entering, settings)
            if step_end == PAUSED:
                return
            if turn_ends != REASON_MAX_TOKENS:  # max-tokens is sticky for the turn
                turn_ends = step_end
            if await self._stops(turn_ends):
                break
        self.reason = {"kind": turn_ends}

    async def _stops(self, turn_ends: str | None) -> bool:
        """After a step: whether the turn ends (the `turn_stopping` hook may continue it)."""
        self.signal.throw_if_aborted()
        if turn_ends is None or self.deps.inbox.next_step:
            return False
        await self._turn_stopping()
        self.signal.throw_if_aborted()
        return not self.deps.inbox.next_step

    async def _continue(self, paused: PendingApproval, settings: StepSettings) -> str | None:
        """Run the rest of the paused step (docs/approvals.md#continuing)."""
        session = self.deps.session
        step = Step(self.deps, self.state, settings, paused.step, ())
        events = session.events
        start = next(
            index
            for index in range(len(events) - 1, -1, -1)
            if events[index].seq <= paused.asked_seq and events[index].type == STEP_START
        )
        result = await step.continue_paused(paused, events[start:])
        self.text = _last_assistant_text(session) or self.text
        return self._paused_on(result)

    def _paused_on(self, step_end: str | None) -> str | None:
        if step_end == PAUSED:
            self.paused = pending_approval(self.deps.session.events)
        return step_end

    def _context(self, step: int, messages: Sequence[Message]) -> StepContext:
        return StepContext(
            loop=self.deps.steering,
            turn=self.turn,
            step=step,
            messages=tuple(messages),
            signal=self.signal,
        )

    async def _pre_step(self, step: int, claimed: list[Message]) -> list[Message] | Reject:
        """Run the `pre_step` hook over the claimed messages (docs/loop.md#pre-step)."""
        hook = self.deps.hooks.pre_step
        if hook is None:
            return claimed
        decision = await call_hook(hook(self._context(step, claimed)))
        self.signal.throw_if_aborted()
        return entering_messages(decision, claimed)

    async def _turn_stopping(self) -> None:
        """Run the `turn_stopping` hook; it continues the turn by steering or injecting."""
        hook = self.deps.hooks.turn_stopping
        if hook is not None:
            await call_hook(hook(self._context(self.steps, ())))

    async def _step(
        self, number: int, entering: list[Message], settings: StepSettings
    ) -> str | None:
        compaction = self.deps.compaction
        if compaction is not None:  # pressure: before `step/start` (docs/compaction.md#when)
            await compaction.before_step(turn=self.turn, signal=self.signal)
        step = Step(self.deps, self.state, settings, number, entering)
        try:
            result = await step.run()
        finally:
            if step.started:
                self.steps = number
        self.text = _last_assistant_text(self.deps.session) or self.text
        return self._paused_on(result)


def _last_assistant_text(session: Session) -> str:
    # By index from the end: a restored session's snapshot prefix is not decoded for this.
    messages = session.messages
    for index in range(len(messages) - 1, max(len(messages) - 9, -1), -1):
        message = messages[index]
        if message.get("role") == "assistant":
            return text_of(message)
    return ""
