"""One step: request the model, commit its message, run its tool calls (docs/loop.md#steps).

A `Step` runs from `step/start` to `step/end`, whatever happens: when it fails after the
assistant message, the unanswered calls get recovery results first (`StepRecovery`) and the
original failure propagates.

The step's durable boundaries: the log is flushed right before each model request (so the
previous step's end, this step's start and any `llm/retry` are durable) and right before the
first tool body runs (so every `tool/call` is durable before its body, Law 5).

A request that fails in-band (an `error` or `aborted` finish) is retried in the same step
when the `request_error` hook answers `"retry"` (at once, docs/loop.md#request-retries) or else
when the loop's `RetryPolicy` allows (docs/loop.md#request-retries): `llm/retry`, a cancellable
wait, `llm/retry-started`, then a new attempt over freshly derived history (`_retry.py`). The failed
attempt's chunks stay in the log; the step's `assistant/message` cites only its own attempt's
chunks.

A step whose next call waits for a person's approval is paused (docs/approvals.md#pausing):
it returns `PAUSED` without `step/end`, and `Step.continue_paused` later runs the rest of its
calls, the recorded decision first, and closes it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from contextlib import aclosing
from typing import Any, Final

import anyio

from ..llm import (
    BlockAssembler,
    ModelRequest,
    StreamChunk,
    stream_chunks,
    unknown_failure,
    watching_stream_activity,
)
from ..log import (
    Event,
    Message,
    PendingApproval,
    ToolCallBlock,
    assistant_message,
    step_start,
    tool_calls_of,
    waiting_calls,
)
from ..log.vocabulary import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    CONTEXT_WINDOW_EXCEEDED,
    FINISH,
    FINISH_ABORTED,
    FINISH_ERROR,
    INBOX_NEXT_STEP,
    REASON_COMPLETED,
    REASON_MAX_TOKENS,
    STEP_END,
    STEP_START,
    SURFACE_APPEND,
    USER_MESSAGE,
)
from ..tools import ApprovalGate, execute_tool_calls
from ._hooks import RequestConfig, StepContext, StepHooks
from ._idle import IdleTimer
from ._recovery import StepRecovery
from ._request import check_route, log_request_header
from ._retry import StepRetries
from ._state import LoopState, StepSettings, TurnDeps

_FAILED_FINISHES = (FINISH_ERROR, FINISH_ABORTED)

PAUSED: Final = "paused"
"""What a step returns when a call waits for a person's approval (never written to the log)."""


class Step:
    """One step of a turn: built by the turn, then `run()` once from `step/start` to `step/end`.

    Args:
        deps: what the turn depends on (session, model, pipeline, config, durability, ...).
        state: the loop's mutable state (request bookkeeping, pairing check).
        settings: the inputs fixed for the turn (its number and signal, system, tools).
        number: this step's number in the turn.
        entering: the user messages entering at this step.
    """

    def __init__(
        self,
        deps: TurnDeps,
        state: LoopState,
        settings: StepSettings,
        number: int,
        entering: Sequence[Message],
    ) -> None:
        self.deps = deps
        self.state = state
        self.settings = settings
        self.turn = settings.turn
        self.number = number
        self.entering = entering
        self.signal = settings.signal
        self.started = False
        """Whether `step/start` is in the log (the turn counts the step from then on)."""
        context = StepContext(
            loop=deps.steering,
            turn=self.turn,
            step=number,
            messages=tuple(entering),
            signal=self.signal,
        )
        self.hooks = StepHooks(deps.hooks, context)

    async def run(self) -> str | None:
        """Append `step/start`, run the step, and append `step/end`, whatever happens.

        Returns:
            `"completed"` (a text answer, or a committed result concluded the turn, B16),
            `"max-tokens"`, `PAUSED` (a call waits for approval: no `step/end`), or None
            when the model must be asked again after tool results.

        Raises:
            TurnCancelled: if the turn was cancelled (an interrupted prefix is kept), including
                during a retry's wait.
            LlmError: if the model request failed and the retry policy does not retry it.
            Exception: any scheduler, hook or append failure, unchanged (after recovery
                results for the unanswered calls and `step/end`).
        """
        session, turn, step = self.deps.session, self.turn, self.number
        durability = self.deps.durability
        durable = durability.durable_through if durability.persisted else None
        with StepRecovery(session, turn=turn, durable_through=durable) as recovery:
            session.append(STEP_START, {"turn": turn, "step": step}, copy=False)
            self.started = True
            return await self._closing(recovery, self._body())

    async def continue_paused(
        self, paused: PendingApproval, step_events: Sequence[Event]
    ) -> str | None:
        """Run the rest of a paused step's calls, from the decided one, and close the step.

        Args:
            paused: the decided ask the step waits on (`paused.decided` is True).
            step_events: the step's events from its `step/start` (the recovery tracker
                learns its pending calls from them).

        Returns:
            As `run()`: `PAUSED` again when a later call waits for approval.

        Raises:
            As `run()`.
        """
        durability = self.deps.durability
        durable = durability.durable_through if durability.persisted else None
        with StepRecovery(
            self.deps.session, turn=self.turn, durable_through=durable, replay=step_events
        ) as recovery:
            self.started = True
            calls = waiting_calls(step_events, paused)
            return await self._closing(recovery, self._run_calls(calls, paused))

    async def _closing(self, recovery: StepRecovery, body: Awaitable[str | None]) -> str | None:
        """Await the step's body; answer unanswered calls on failure; `step/end` unless paused."""
        result: str | None = None
        try:
            result = await body
            return result
        except BaseException:
            recovery.record_recovery_results()
            raise
        finally:
            if result != PAUSED:
                self.deps.session.append(
                    STEP_END, {"turn": self.turn, "step": self.number}, copy=False
                )

    async def _body(self) -> str | None:
        """Enter the messages, request the model (with retries), and run its tool calls."""
        deps, turn, step = self.deps, self.turn, self.number
        session = deps.session
        for message in self.entering:
            session.append(USER_MESSAGE, message, surface_op=SURFACE_APPEND)
        model = deps.model
        retries = StepRetries(deps, self.settings, step)
        overflows = 0
        while True:
            assembler, chunk_seqs = await self._attempt()
            finish = assembler.finish
            if finish["kind"] not in _FAILED_FINISHES:
                break
            failure = dict(finish.get("failure") or unknown_failure("model request failed"))
            if await self._compacted(failure, overflows):
                overflows += 1  # retried at once, over the compacted history
                continue
            await retries.retry_or_raise(failure, self.hooks.request_error)
        message = assembler.message(model.provider, model.model)
        data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
        if assembler.usage is not None:
            data["usage"] = assembler.usage
        session.append(
            ASSISTANT_MESSAGE, data, surface_op=SURFACE_APPEND, source_event_seqs=chunk_seqs
        )
        if finish["kind"] == REASON_MAX_TOKENS:
            return REASON_MAX_TOKENS
        calls = tool_calls_of(message)
        if not calls:
            return REASON_COMPLETED
        return await self._run_calls(calls, None)

    async def _compacted(self, failure: dict[str, Any], overflows: int) -> bool:
        """After `CONTEXT_WINDOW_EXCEEDED`: compact, and whether to retry (compaction-spec 4.3)."""
        compaction = self.deps.compaction
        if (
            compaction is None
            or failure.get("code") != CONTEXT_WINDOW_EXCEEDED
            or overflows >= compaction.config.max_overflow_retries
        ):
            return False
        start = step_start(self.deps.session.events, turn=self.turn, step=self.number)
        return await compaction.after_overflow(
            turn=self.turn, step_start=start if start is not None else 0, signal=self.signal
        )

    async def _run_calls(
        self, calls: list[ToolCallBlock], recorded: PendingApproval | None
    ) -> str | None:
        """Run the tool calls (the recorded decision answers its call without asking)."""
        deps, signal = self.deps, self.signal
        gate = ApprovalGate(
            deps.session,
            policy=self.state.approval_policy,
            auto_approve=deps.config.auto_approve,
            approver=deps.approver,
            recorded=recorded,
        )
        outcome = await execute_tool_calls(
            deps.session,
            calls,
            turn=self.turn,
            step=self.number,
            pipeline=deps.pipeline,
            signal=signal,
            max_parallel_tool_calls=deps.config.max_parallel_tool_calls,
            ensure_durable=deps.durability.ensure_durable,
            accept_context=self._accept_context,
            workers=self.settings.workers,
            approvals=gate,
        )
        signal.throw_if_aborted()
        if outcome.paused:
            return PAUSED
        return REASON_COMPLETED if outcome.concluded else None

    def _accept_context(self, message: Message) -> None:
        """Queue a committed tool result's context in `next-step`.

        See docs/scheduler.md#running-a-group.

        Also after a cancel: the contexts then stay parked for a later turn
        (docs/scheduler.md#cancellation).
        """
        self.deps.inbox.insert(INBOX_NEXT_STEP, message)

    async def _attempt(self) -> tuple[BlockAssembler, list[int]]:
        """Make one model request over freshly derived history and log its chunks.

        Returns the assembler (its finish may be a failure) and the attempt's chunk seqs. A
        cancel keeps the visible prefix as an interrupted assistant message and raises.
        """
        deps, signal, settings = self.deps, self.signal, self.settings
        session, model = deps.session, deps.model
        messages = session.request_history()  # a restored prefix stays undecoded
        max_tokens = deps.config.max_tokens
        max_tokens = (await self.hooks.request(RequestConfig(max_tokens=max_tokens))).max_tokens
        # A cancel before the request (e.g. from a `step/start` observer, B26) logs no header.
        signal.throw_if_aborted()
        check_route(model)
        log_request_header(
            session,
            self.state.request,
            model=model,
            system=settings.system,
            tools=settings.tools,
            max_tokens=max_tokens,
        )
        self.state.pairing.check(messages, generation=session.surface.replace_generation)
        deps.durability.flush()
        signal.throw_if_aborted()
        request = ModelRequest(
            messages=messages,
            system=settings.system or None,
            tools=settings.tools,
            max_tokens=max_tokens,
        )
        assembler = BlockAssembler()
        chunk_seqs: list[int] = []
        idle = IdleTimer(deps.config.stream_idle_timeout_seconds)
        with anyio.CancelScope() as scope:
            remove = signal.add_listener(lambda _reason: scope.cancel())
            try:
                async with aclosing(stream_chunks(model, request)) as stream:
                    with watching_stream_activity(idle.rearm):
                        ended = False
                        while not ended:
                            with idle.scope() as idle_scope:
                                while not ended and not idle.spent(idle_scope):
                                    chunk = await idle.next_chunk(stream, idle_scope)
                                    ended = self._log_chunk(chunk, assembler, chunk_seqs)
                            timeout = idle.timed_out(idle_scope)
                            if timeout is not None:
                                ended = self._log_chunk(timeout, assembler, chunk_seqs) or True
            finally:
                remove()
        if signal.aborted or scope.cancelled_caught:
            self._append_interrupted(assembler, chunk_seqs)
            signal.throw_if_aborted()
        return assembler, chunk_seqs

    def _log_chunk(
        self, chunk: StreamChunk | None, assembler: BlockAssembler, chunk_seqs: list[int]
    ) -> bool:
        """Log one chunk of the attempt; return whether the stream ended (or is cancelled).

        A cancel between chunks (e.g. from a chunk observer) must keep the visible prefix like
        one during an await does: stop, don't raise here.
        """
        if chunk is None or self.signal.aborted:
            return True
        event = self.deps.session.append(
            ASSISTANT_CHUNK, {"turn": self.turn, "step": self.number, "chunk": chunk}
        )
        chunk_seqs.append(event.seq)
        assembler.push(chunk)
        return chunk["type"] == FINISH

    def _append_interrupted(self, assembler: BlockAssembler, chunk_seqs: list[int]) -> None:
        """Keep the visible prefix of a cancelled stream as an interrupted assistant message."""
        blocks = assembler.interrupted_blocks()
        if not blocks:
            return
        model = self.deps.model
        message = assistant_message(blocks, provider=model.provider, model=model.model)
        data: dict[str, Any] = {"turn": self.turn, "step": self.number, "message": message}
        if assembler.usage is not None:
            data["usage"] = assembler.usage
        data["interrupted"] = True
        self.deps.session.append(
            ASSISTANT_MESSAGE, data, surface_op=SURFACE_APPEND, source_event_seqs=chunk_seqs
        )
