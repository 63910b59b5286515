"""The AgentLoop driver: turns and steps over a durable session (loop-spec 2, 6, 7).

A turn opens with `turn/start`, runs steps until the model answers without tool calls
and no steering is pending, and always closes with exactly one `turn/end`. Each step's
entering messages come from the inbox claim (all `next-step` messages, then the turn's
prompt or the head of `next-turn`), through the `pre_step` hook (loop-spec 2.2, 2.3).

Size: over 400 lines because the public driver API (run, deliver, cancel, flush, close)
and the turn algorithm it documents share the loop's state; the inbox and hooks are
already their own modules. Splitting the turn algorithm out is the next step if it grows.

A step always closes with `step/end`; when it fails after the assistant message, the
unanswered calls get recovery results first (`StepRecovery`), and the ORIGINAL failure is
recorded in `turn/end` and propagates.

There is no background driver and no wake latch: a send only queues, and a turn runs in
the task that awaits `run_turn()`. So two dsh cases do not apply: B28 (a waking send opens
`turn/start` before it returns; here an idle `cancel()` just discards the queued sends) and
B30 (a send after `cancel(keep_inbox=True)` is latched and replayed; here parked work waits
for the next `run_turn()`, B29). `dispose()` is dsh's disposal (F17) minus the inbox discard.
"""

from __future__ import annotations

import dataclasses
import logging
import traceback
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio

from ..errors import LlmError, UsageError
from ..llm import Model, ToolSchema
from ..log import Event, Message, PairingCheck, Session, user_message
from ..log._vocabulary import (
    INBOX_NEXT_STEP,
    INBOX_NEXT_TURN,
    REASON_ABORTED,
    REASON_BLOCKED,
    REASON_COMPLETED,
    REASON_ERROR,
    REASON_MAX_TOKENS,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TURN_END,
    TURN_START,
)
from ..tools import CancelSignal, Tool, ToolHooks, ToolPipeline, ToolRegistry, TurnCancelled
from ._config import LoopConfig
from ._events import session_events
from ._hooks import (
    LoopHooks,
    Reject,
    StepContext,
    bound_step_hooks,
    call_hook,
    entering_messages,
)
from ._inbox import Inbox
from ._prompt import default_system_prompt
from ._recovery import StepRecovery
from ._step import RequestState, StepSettings, run_step

logger = logging.getLogger(__name__)


class Durability(Protocol):
    """What the loop needs from persistence (`duraloop.store.SessionWriter` satisfies it).

    `flush()` makes every committed event durable (one write + one fsync); the loop may
    call it from a worker thread (never two at once), so it must take one snapshot of the
    session's events. `close()` flushes and releases the session's writer lock. None (no
    store) means in-memory only.
    """

    def flush(self) -> None:
        """Write and fsync every buffered event."""

    def close(self) -> None:
        """Flush, then release the writer."""


@dataclass(frozen=True)
class TurnResult:
    """How a turn ended.

    Args:
        turn: the turn number.
        reason: the `turn/end` reason JSON, e.g. `{"kind": "completed"}`.
        text: the text of the turn's last assistant message ("" if none).
        steps: the number of steps the turn ran.
    """

    turn: int
    reason: dict[str, Any]
    text: str
    steps: int

    @property
    def kind(self) -> str:
        """The reason kind: completed, aborted, blocked, error or max-tokens."""
        return str(self.reason.get("kind"))


@dataclass
class _TurnState:
    turn: int
    steps: int = 0
    reason: dict[str, Any] | None = None
    text: str = ""
    prompt: Message | None = None


def _failure_of(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, LlmError):
        return exc.failure()
    chain = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    cause = exc.__cause__
    while cause is not None:
        chain += " <- " + "".join(traceback.format_exception_only(type(cause), cause)).strip()
        cause = cause.__cause__
    return {"message": chain, "code": "UNKNOWN"}


class AgentLoop:
    """Drive a model through turns and steps over a session, running the tools it calls.

    Args:
        session: the live session (fresh, resumed or forked).
        model: the model to request.
        tools: the tools the model may call (a registry, or tools to register).
        cwd: the workspace directory tools are confined to.
        config: loop options.
        durability: makes the log durable at each boundary (a store writer), or None.
        tool_hooks: pre- and post-execute hooks for every tool call.
        pipeline_factory: builds the tool pipeline; tests use it to inject faults.
        hooks: the loop-level hooks (pre-step, request, turn-stopping).

    The inbox (`self.inbox`) is replayed from the log, so messages pending when the session
    was last written are pending again; nothing runs until `run_turn()` or `run_pending()`.
    There is no background driver: `steer`, `inject` and `followup` only queue, and each
    `run_turn()` without a prompt runs ONE queued follow-up (`run_pending()` drains them).

    Raises:
        UsageError: if `cwd` is not an existing directory.
        EventRejectedError: if the log's inbox splices do not replay.
    """

    def __init__(
        self,
        session: Session,
        *,
        model: Model,
        tools: ToolRegistry | Sequence[Tool] = (),
        cwd: Path | str,
        config: LoopConfig | None = None,
        durability: Durability | None = None,
        tool_hooks: ToolHooks | None = None,
        pipeline_factory: Callable[..., ToolPipeline] = ToolPipeline,
        hooks: LoopHooks | None = None,
    ) -> None:
        self.session = session
        self.model = model
        self.config = config or LoopConfig()
        self.cwd = Path(cwd).resolve()
        if not self.cwd.is_dir():
            raise UsageError(f"workspace {self.cwd} is not a directory; create it or pass another cwd")
        if isinstance(tools, ToolRegistry):
            self.registry = tools
        else:
            self.registry = ToolRegistry()
            for item in tools:
                self.registry.register(item)
        self.durability = durability
        self.pipeline = pipeline_factory(
            self.registry, hooks=tool_hooks, cwd=self.cwd, session_id=session.id
        )
        self._signal: CancelSignal | None = None
        self._turn_done: anyio.Event | None = None
        self._durable_through = session.seq - 1
        self._flushing: anyio.Event | None = None
        self._closed = False
        self._last_turn, header, context = _scan_log(session)
        self._request_state = RequestState(header=header, context=context)
        self._pairing = PairingCheck()
        self.hooks = hooks or LoopHooks()
        self.inbox = Inbox(session)

    @property
    def last_turn(self) -> int:
        """The number of the last turn started in this session (0 if none)."""
        return self._last_turn

    def steer(self, message: str | Message) -> Message:
        """Queue steering: it enters the running turn at its next step boundary.

        Steering goes to `next-step`. A running turn claims it before its next step (it
        follows `step/start` as a `user/message`, B44) and keeps going even if the model
        had finished. While idle it waits for the next `run_turn()`, which enters it in
        its first step. Steering sent after `cancel()` of the running turn goes to
        `next-turn` instead: it cannot join an aborted turn (loop-spec 2.1).

        Args:
            message: the text, or a complete user message (its id must not be pending).

        Returns:
            The queued message as logged.

        Raises:
            UsageError: if the loop is closed or the message is not a user message.
            DuplicateMessageError: if a pending message has the same id.
        """
        aborted = self._signal is not None and self._signal.aborted
        return self._send(INBOX_NEXT_TURN if aborted else INBOX_NEXT_STEP, message)

    def inject(self, message: str | Message) -> Message:
        """Queue context for the next step (`next-step`); it never starts a turn by itself.

        A running turn claims it at its next step boundary; while idle it only records the
        splice and waits (B46), also across persist and resume (B58).

        Args:
            message: the text, or a complete user message (its id must not be pending).

        Returns:
            The queued message as logged.

        Raises:
            UsageError: if the loop is closed or the message is not a user message.
            DuplicateMessageError: if a pending message has the same id.
        """
        return self._send(INBOX_NEXT_STEP, message)

    def followup(self, message: str | Message) -> Message:
        """Queue a follow-up (`next-turn`): the prompt of its own later turn, never merged.

        Nothing runs until `run_turn()` (one follow-up per call) or `run_pending()`.

        Args:
            message: the text, or a complete user message (its id must not be pending).

        Returns:
            The queued message as logged.

        Raises:
            UsageError: if the loop is closed or the message is not a user message.
            DuplicateMessageError: if a pending message has the same id.
        """
        return self._send(INBOX_NEXT_TURN, message)

    def _send(self, target: str, message: str | Message) -> Message:
        self._check_open()
        stored = self.inbox.insert(target, user_message(message) if isinstance(message, str) else message)
        if self._signal is None:
            self.flush()  # idle: nothing else will make the queued message durable soon
        return stored

    def cancel(self, reason: dict[str, Any] | None = None, *, keep_inbox: bool = False) -> None:
        """Cancel the running turn and, unless `keep_inbox`, discard every pending message.

        The running turn stops new tool starts, drains started ones, and closes the log:
        unstarted calls get `ABORTED_BEFORE_DISPATCH` results and the turn ends `aborted`.
        The inbox is cleared even while idle (`next-step`, then `next-turn`, each one
        discard splice, `INBOX_OUTCOME_DISCARDED`). Safe to call from a signal handler on the event
        loop (not from a session observer while messages are pending: that would append).

        Args:
            reason: the cause recorded in `turn/end`, default `{"kind": "user"}`.
            keep_inbox: keep pending messages for a later turn.
        """
        if self._signal is not None:
            self._signal.cancel(reason)
        if not keep_inbox and self.inbox.pending:
            self.inbox.clear()
            if self._signal is None and not self._closed:
                self.flush()

    def flush(self) -> None:
        """Make every committed event durable now (a no-op without a store).

        Raises:
            UsageError: if a background flush is still running (it never is between steps).
        """
        if self._flushing is not None:
            raise UsageError("a durable flush is already running on this AgentLoop")
        if self.durability is not None:
            self.durability.flush()
        self._durable_through = self.session.seq - 1

    def close(self) -> None:
        """Flush and release the session's writer; later `run_turn` calls are refused."""
        self._closed = True
        if self.durability is not None:
            self.durability.close()
            self.durability = None

    async def dispose(self) -> None:
        """Cancel the running turn as `{"kind": "disposed"}`, wait for it to close, then close.

        The turn ends `aborted {disposed}` with its log closed as for any cancel (F17);
        then the loop is closed as by `close()`: the log is flushed, the writer released,
        and later `run_turn()` or sends raise `UsageError`. Sends are refused from the
        moment disposal starts. Unlike dsh's disposal, pending messages are kept (not
        discarded): they are durable and run after a resume, as after `close()`.
        Idempotent. Never call it from inside the running turn (a hook or a tool body):
        it waits for that turn to end; use `cancel()` there.
        """
        self._closed = True
        signal, done = self._signal, self._turn_done
        if signal is not None and done is not None:
            signal.cancel({"kind": "disposed"})
            await done.wait()
        self.close()

    def events(self) -> AbstractAsyncContextManager[AsyncIterator[Event]]:
        """Feed the session's committed events from now on, in commit order.

        Use it as `async with loop.events() as events: async for event in events: ...`,
        e.g. in a task beside `run_turn()`. The buffer is unbounded (`_events.py`); leaving
        the context removes the session observer and closes the iterator.
        """
        return session_events(self.session)

    def __enter__(self) -> AgentLoop:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def _ensure_durable(self, seq: int) -> None:
        """Make the log durable through `seq` before a tool body runs (Law 5).

        Group commit: one flush at a time runs in a worker thread, so the event loop keeps
        committing and starting other calls meanwhile; a caller whose seq the running flush
        does not cover waits for it and then flushes everything appended since.
        """
        while seq > self._durable_through:
            if self._flushing is not None:
                await self._flushing.wait()
                continue
            durability = self.durability
            if durability is None:
                self._durable_through = self.session.seq - 1
                return
            target = self.session.seq - 1
            self._flushing = anyio.Event()
            try:
                await anyio.to_thread.run_sync(durability.flush)
                self._durable_through = target
            finally:
                self._flushing.set()
                self._flushing = None

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(
                f"this AgentLoop for session {self.session.id} is closed (its writer is released, "
                "so nothing would be persisted); open the session again with resume_session()"
            )

    async def run_turn(self, prompt: str | Message | None = None) -> TurnResult:
        """Run one turn and close it durably, whatever happens.

        The first step enters every pending `next-step` message, then the prompt: `prompt`
        when given (queued follow-ups stay queued), else the oldest follow-up. Later steps
        enter steering and context that arrived meanwhile.

        Args:
            prompt: the user's text or a complete user message; None runs the next queued
                follow-up (or, with none queued, the pending `next-step` messages).

        Returns:
            The turn's end: completed, max-tokens, blocked (max_steps reached, or the
            `pre_step` hook rejected) or aborted (after `cancel()`).

        Raises:
            UsageError: if a turn is already running on this loop, it is closed, or
                `prompt` is None and nothing is pending in the inbox.
            Exception: the original failure of an `error` turn (e.g. `LlmError`, or what a
                hook raised), after recovery results, `step/end` and `turn/end {error}`
                are in the log.
        """
        self._check_open()
        if self._signal is not None:
            raise UsageError("a turn is already running on this AgentLoop; await it or cancel it")
        if prompt is None and not self.inbox.pending:
            raise UsageError(
                "run_turn() without a prompt runs the next queued follow-up, and none is "
                "queued; pass a prompt or call followup() first"
            )
        message = user_message(prompt) if isinstance(prompt, str) else prompt
        signal = CancelSignal()
        self._signal = signal
        done = self._turn_done = anyio.Event()
        try:
            return await self._turn(message, signal)
        finally:
            self._signal = None
            self._turn_done = None
            done.set()

    async def run_pending(self) -> list[TurnResult]:
        """Run turns until the inbox is empty: one turn per queued follow-up (B47).

        Draining stops early, like dsh's driver, after a turn that did not end `completed`
        or `max-tokens` (blocked, aborted); the rest stays queued. An `error` turn raises.

        Returns:
            The results of the turns run, in order (empty when nothing was pending).

        Raises:
            UsageError: if a turn is already running on this loop, or it is closed.
            Exception: the original failure of an `error` turn, as from `run_turn()`.
        """
        results: list[TurnResult] = []
        while self.inbox.pending:
            result = await self.run_turn()
            results.append(result)
            if result.kind not in (REASON_COMPLETED, REASON_MAX_TOKENS):
                break
        return results

    async def _turn(self, message: Message | None, signal: CancelSignal) -> TurnResult:
        turn = self._last_turn + 1
        self.session.append(TURN_START, {"turn": turn})
        self._last_turn = turn
        state = _TurnState(turn=turn, prompt=message)
        error: BaseException | None = None
        try:
            await self._steps(state, signal)
        except TurnCancelled as exc:
            state.reason = {"kind": REASON_ABORTED, "reason": exc.reason}
        except BaseException as exc:  # noqa: BLE001 - recorded in turn/end, then re-raised
            error = exc
            if signal.aborted:
                state.reason = {"kind": REASON_ABORTED, "reason": signal.reason}
            elif not isinstance(exc, Exception):
                # The caller's own cancel scope (or KeyboardInterrupt) stopped the turn.
                state.reason = {"kind": REASON_ABORTED, "reason": {"kind": "parent"}}
            else:
                state.reason = {"kind": REASON_ERROR, "error": _failure_of(exc)}
        reason = state.reason or {"kind": REASON_ERROR, "error": {"message": "no reason", "code": "UNKNOWN"}}
        try:
            self.session.append(TURN_END, {"turn": turn, "reason": reason})
            self.flush()
        except Exception:
            if error is None:
                raise
            logger.exception("session %s: closing turn %d failed", self.session.id, turn)
        if error is not None and not signal.aborted:
            raise error
        if error is not None and not isinstance(error, Exception):
            raise error
        return TurnResult(turn=turn, reason=reason, text=state.text, steps=state.steps)

    async def _steps(self, state: _TurnState, signal: CancelSignal) -> None:
        settings = StepSettings(
            model=self.model,
            system=self.config.system_prompt
            if self.config.system_prompt is not None
            else default_system_prompt(self.cwd, [tool.name for tool in self.registry]),
            tools=[ToolSchema(**schema) for schema in self.registry.schemas()],
            max_tokens=self.config.max_tokens,
            max_parallel_tool_calls=self.config.max_parallel_tool_calls,
            flush=self.flush,
            ensure_durable=self._ensure_durable,
            retry=self.config.retry,
            stream_idle_timeout_seconds=self.config.stream_idle_timeout_seconds,
            accept_context=self._accept_context,
        )
        turn_ends: str | None = None
        while True:
            signal.throw_if_aborted()
            if state.steps >= self.config.max_steps:
                state.reason = {
                    "kind": REASON_BLOCKED,
                    "message": f"the turn reached max_steps={self.config.max_steps} before the "
                    "model finished; run another turn to continue, or raise max_steps",
                }
                return
            step = state.steps + 1
            first = state.steps == 0
            claimed = self.inbox.claim(next_turn=first and state.prompt is None)
            if first and state.prompt is not None:
                claimed.append(state.prompt)
            entering = await self._pre_step(state, step, claimed, signal)
            if isinstance(entering, Reject):
                state.reason = {"kind": REASON_BLOCKED}
                if entering.message:
                    state.reason["message"] = entering.message
                return
            if turn_ends is not None and not entering:
                break
            if first and not entering:
                state.reason = {"kind": REASON_COMPLETED}
                return
            signal.throw_if_aborted()
            step_end = await self._step(state, step, entering, settings, signal)
            if turn_ends != REASON_MAX_TOKENS:  # max-tokens is sticky for the turn
                turn_ends = step_end
            signal.throw_if_aborted()
            if turn_ends is not None and not self.inbox.next_step:
                await self._turn_stopping(state, signal)
                signal.throw_if_aborted()
            if turn_ends is not None and not self.inbox.next_step:
                break
        state.reason = {"kind": turn_ends}

    def _accept_context(self, message: Message) -> None:
        """Queue a committed tool result's context in `next-step` (loop-spec 4.2).

        Also after a cancel: the contexts then stay parked for a later turn (loop-spec 4.4).
        """
        self.inbox.insert(INBOX_NEXT_STEP, message)

    def _context(
        self, state: _TurnState, step: int, messages: Sequence[Message], signal: CancelSignal
    ) -> StepContext:
        return StepContext(loop=self, turn=state.turn, step=step, messages=tuple(messages), signal=signal)

    async def _pre_step(
        self, state: _TurnState, step: int, claimed: list[Message], signal: CancelSignal
    ) -> list[Message] | Reject:
        """Run the `pre_step` hook over the claimed messages (loop-spec 2.3)."""
        hook = self.hooks.pre_step
        if hook is None:
            return claimed
        decision = await call_hook(hook(self._context(state, step, claimed, signal)))
        signal.throw_if_aborted()
        return entering_messages(decision, claimed)

    async def _turn_stopping(self, state: _TurnState, signal: CancelSignal) -> None:
        """Run the `turn_stopping` hook; it continues the turn by steering or injecting."""
        hook = self.hooks.turn_stopping
        if hook is not None:
            await call_hook(hook(self._context(state, state.steps, (), signal)))

    async def _step(
        self,
        state: _TurnState,
        step: int,
        entering: list[Message],
        settings: StepSettings,
        signal: CancelSignal,
    ) -> str | None:
        turn = state.turn
        bound = bound_step_hooks(self.hooks, self._context(state, step, entering, signal))
        settings = dataclasses.replace(settings, **bound) if bound else settings
        with StepRecovery(self.session, turn=turn) as recovery:
            self.session.append(STEP_START, {"turn": turn, "step": step}, copy=False)
            state.steps = step
            try:
                result = await run_step(
                    self.session, turn=turn, step=step, entering=entering, settings=settings,
                    pipeline=self.pipeline, signal=signal, state=self._request_state,
                    pairing=self._pairing,
                )
            except BaseException:
                recovery.record_recovery_results()
                raise
            finally:
                self.session.append(STEP_END, {"turn": turn, "step": step}, copy=False)
            state.text = _last_assistant_text(self.session) or state.text
            return result


def _last_assistant_text(session: Session) -> str:
    messages = session.messages
    for message in reversed(messages[-8:]):
        if message.get("role") == "assistant":
            return "".join(
                block.get("text", "") for block in message["content"] if block.get("type") == "text"
            )
    return ""


def _scan_log(session: Session) -> tuple[int, dict[str, Any] | None, dict[str, Any] | None]:
    """Return the last `turn/start` number and the latest request header and context."""
    last_turn = 0
    header: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    for event in reversed(session.events):
        if event.type == TURN_START and last_turn == 0:
            last_turn = int(event.data.get("turn", 0))
        elif event.type == REQUEST_HEADER and header is None:
            header = event.data.get("header")
        elif event.type == REQUEST_CONTEXT and context is None:
            context = event.data
        if last_turn and header is not None and context is not None:
            break
    return last_turn, header, context
