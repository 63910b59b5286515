"""The AgentLoop: a long-lived agent over a durable session (loop-spec 1, 2.1, 7, 10).

The public surface: `send` (and its three named forms `followup`, `steer`, `inject`),
`cancel`, `dispose`, `run_turn`/`run_pending`, `wait_idle`, `events`, `flush`, `close`. The
turn algorithm itself is `_turn.Turn`.

Two ways to drive turns:

- Awaited: `await loop.run_turn(prompt)` runs one turn in the caller's task and returns
  its result (raising the original failure of an `error` turn). Sends only queue.
- Background: inside `async with loop:` the loop owns a driver task. A waking send
  (`followup`, `steer`) from idle opens the turn before it returns: `turn/start` and the
  claim are in the log when `send` returns (loop-spec 10.1); the driver then drains queued
  follow-ups while turns end `completed`/`max-tokens`. A waking send that arrives after
  `cancel()` of the running turn is latched and runs once the aborted turn has closed
  (the wake latch, B30); `cancel()` without `keep_inbox` clears the latch, and disposal is
  never latched. `await loop.wait_idle()` returns the results of the turns finished since.

`dispose()` is dsh's disposal (F17) minus the inbox discard: pending messages stay durable.

Size: over 400 lines because the public API of a long-lived agent (the send forms, cancel,
dispose, both ways of driving turns, flush, close) shares the driver's state and is
documented here in full; the turn algorithm is `_turn.py`, the inbox and hooks are their
own modules.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol

import anyio
import anyio.abc

from ..errors import UsageError
from ..llm import Model
from ..log import Event, Message, PairingCheck, Session, user_message
from ..log._vocabulary import (
    INBOX_NEXT_STEP,
    INBOX_NEXT_TURN,
    REASON_COMPLETED,
    REASON_MAX_TOKENS,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    TURN_START,
)
from ..tools import CancelSignal, Tool, ToolHooks, ToolPipeline, ToolRegistry
from ._config import LoopConfig
from ._events import session_events
from ._hooks import LoopHooks
from ._inbox import Inbox
from ._step import RequestState
from ._turn import Turn, TurnResult, run_guarded

SendTarget = Literal["next-turn", "next-step"]
"""Where `send` queues a message: the next turn's prompt queue, or the next step."""

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
    was last written are pending again. Outside `async with loop:` nothing runs until
    `run_turn()` or `run_pending()`: sends only queue, and each `run_turn()` without a
    prompt runs ONE queued follow-up. Inside it, waking sends start turns in the loop's
    background driver (see the module docstring).

    Example:
        async with AgentLoop(session, model=model, cwd=".") as loop:
            loop.followup("list the files")
            (result,) = await loop.wait_idle()

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
            self.registry,
            hooks=tool_hooks,
            cwd=self.cwd,
            session_id=session.id,
            max_output_bytes=self.config.max_tool_output_bytes,
            cancel_grace_seconds=self.config.tool_cancel_grace_seconds,
        )
        self._signal: CancelSignal | None = None
        self._turn_done: anyio.Event | None = None
        self._durable_through = session.seq - 1
        self._flushing: anyio.Event | None = None
        self._closed = False
        self._driver: anyio.abc.TaskGroup | None = None
        self._exit_stack: AsyncExitStack | None = None
        self._wake_requested = False
        self._results: list[TurnResult] = []
        self._last_turn, header, context = _scan_log(session)
        self._request_state = RequestState(header=header, context=context)
        self._pairing = PairingCheck()
        self.hooks = hooks or LoopHooks()
        self.inbox = Inbox(session)

    @property
    def last_turn(self) -> int:
        """The number of the last turn started in this session (0 if none)."""
        return self._last_turn

    def send(
        self, message: str | Message, *, target: SendTarget = "next-turn", wakeup: bool = True
    ) -> Message:
        """Queue a user message and, if `wakeup`, wake the driver (loop-spec 2.1 `send`).

        `followup`, `steer` and `inject` are this with fixed arguments. A waking send
        that arrives while the running turn is being cancelled goes to `next-turn` (it
        cannot join an aborted turn) and is latched: it runs once the turn has closed.
        Inside `async with loop:`, a waking send from idle opens the turn before it
        returns (`turn/start` and the claim are in the log); outside it, sends only queue
        for `run_turn()`. An idle loop flushes the queued message at once.

        Args:
            message: the text, or a complete user message (its id must not be pending).
            target: `"next-turn"` (a turn's prompt, one per turn) or `"next-step"` (enters
                the running turn at its next step boundary, or the next turn's first step).
            wakeup: whether the message should start work when the loop is idle.

        Returns:
            The queued message as logged.

        Raises:
            UsageError: if the loop is closed, `target` is unknown, or the message is not a
                user message.
            DuplicateMessageError: if a pending message has the same id.
            EventRejectedError: if the insert (or, on waking, `turn/start`) is refused; the
                inbox is unchanged by a refused insert.
        """
        self._check_open()
        if target not in (INBOX_NEXT_TURN, INBOX_NEXT_STEP):
            raise UsageError(f"unknown send target {target!r}; use 'next-turn' or 'next-step'")
        signal = self._signal
        waking_after_abort = wakeup and signal is not None and signal.aborted
        effective = INBOX_NEXT_TURN if waking_after_abort else target
        stored = self.inbox.insert(effective, user_message(message) if isinstance(message, str) else message)
        if wakeup and self._wake(after_abort=waking_after_abort):
            return stored
        if self._signal is None:
            self.flush()  # idle: nothing else will make the queued message durable soon
        return stored

    def followup(self, message: str | Message) -> Message:
        """Queue a follow-up (`next-turn`, waking): the prompt of its own later turn.

        Same as `send(message, target="next-turn", wakeup=True)`; never merged into the
        running turn.

        Args:
            message: the text, or a complete user message (its id must not be pending).

        Returns:
            The queued message as logged.

        Raises:
            UsageError, DuplicateMessageError, EventRejectedError: as `send`.
        """
        return self.send(message, target=INBOX_NEXT_TURN, wakeup=True)

    def steer(self, message: str | Message) -> Message:
        """Queue steering (`next-step`, waking): it enters the running turn at its next step.

        Same as `send(message, target="next-step", wakeup=True)`. A running turn claims it
        before its next step (it follows `step/start` as a `user/message`, B44) and keeps
        going even if the model had finished. While idle it starts a turn (background) or
        waits for the next `run_turn()`. After `cancel()` of the running turn it goes to
        `next-turn` instead (loop-spec 2.1).

        Args:
            message: the text, or a complete user message (its id must not be pending).

        Returns:
            The queued message as logged.

        Raises:
            UsageError, DuplicateMessageError, EventRejectedError: as `send`.
        """
        return self.send(message, target=INBOX_NEXT_STEP, wakeup=True)

    def inject(self, message: str | Message) -> Message:
        """Queue context for the next step (`next-step`, not waking).

        Same as `send(message, target="next-step", wakeup=False)`. A running turn claims it
        at its next step boundary; while idle it only records the splice and waits (B46),
        also across persist and resume (B58).

        Args:
            message: the text, or a complete user message (its id must not be pending).

        Returns:
            The queued message as logged.

        Raises:
            UsageError, DuplicateMessageError, EventRejectedError: as `send`.
        """
        return self.send(message, target=INBOX_NEXT_STEP, wakeup=False)

    def _wake(self, *, after_abort: bool) -> bool:
        """Wake the background driver; return whether a turn is (or will be) running.

        Running: latch the wake when the turn is being aborted (not for disposal); a live
        turn claims queued work itself. Idle with a driver: open the next turn now, then run
        it in the driver task. Idle without one (no `async with`): nothing to wake.
        """
        signal = self._signal
        if signal is not None:
            if after_abort and (signal.reason or {}).get("kind") != "disposed":
                self._wake_requested = True
            return True
        if self._driver is None:
            return False
        self._start_drain()
        return True

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
        if not keep_inbox:
            self._wake_requested = False
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
        """Run one turn in this task and close it durably, whatever happens.

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
            UsageError: if a turn is already running on this loop (also a background one),
                it is closed, or `prompt` is None and nothing is pending in the inbox.
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
            result = await run_guarded(Turn.open(self, message, signal))
        finally:
            self._signal = None
            self._turn_done = None
            done.set()
        if result.error is not None:
            raise result.error
        return result

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

    async def wait_idle(self) -> list[TurnResult]:
        """Wait until the background driver is idle; return the turns finished since.

        Returns:
            The results of the background turns that ended since the last `wait_idle()`,
            in order; an `error` turn's original exception is its `error` (not raised).
            Turns run by `run_turn()` are not included (their caller has them).
        """
        while self._driver is not None and self._turn_done is not None:
            await self._turn_done.wait()
        results, self._results = self._results, []
        return results

    async def __aenter__(self) -> AgentLoop:
        """Start the background driver: waking sends now start turns (loop-spec 2.1)."""
        self._check_open()
        if self._driver is not None:
            raise UsageError("this AgentLoop is already running its driver (nested `async with`)")
        stack = AsyncExitStack()
        self._driver = await stack.enter_async_context(anyio.create_task_group())
        self._exit_stack = stack
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Wait for queued work to finish (or, on an error, dispose), then close the loop.

        An exception raised in the body propagates as it is (not wrapped in an exception
        group); a cancellation of the body's scope cancels the running turn durably
        (`aborted {parent}`) before it continues outward.
        """
        stack, self._exit_stack = self._exit_stack, None
        try:
            if exc is None:
                await self.wait_idle()
            else:
                await self.dispose()
        finally:
            self._driver = None
            try:
                if stack is not None:
                    # The body's exception is the caller's, not the driver's: don't hand it
                    # to the task group, which would wrap it in an ExceptionGroup.
                    await stack.__aexit__(None, None, None)
            finally:
                self.close()

    def _start_drain(self) -> None:
        """Open the next turn now and run the drain in the driver task (loop-spec 2.1 wake)."""
        driver = self._driver
        if driver is None:
            raise UsageError("no background driver: use `async with loop:` to run turns in the background")
        self._turn_done = anyio.Event()
        try:
            turn = self._open_next_turn()
        except BaseException:
            self._idle()
            raise
        driver.start_soon(self._drain, turn)

    def _open_next_turn(self) -> Turn:
        """Open a drain's next turn with a fresh cancel signal (loop-spec 2.2 step 8)."""
        self._signal = CancelSignal()
        self._wake_requested = False
        return Turn.open(self, None, self._signal)

    async def _drain(self, turn: Turn) -> None:
        """Run turns while each ends completed/max-tokens and work is queued (loop-spec 2.2.8)."""
        try:
            while True:
                result = await run_guarded(turn)
                self._results.append(result)
                if result.error is not None:
                    logger.warning(
                        "session %s: turn %d failed: %s", self.session.id, result.turn, result.reason
                    )
                if result.kind not in (REASON_COMPLETED, REASON_MAX_TOKENS) or not self.inbox.pending:
                    break
                turn = self._open_next_turn()
        except Exception:
            logger.exception("session %s: the background driver stopped", self.session.id)
        finally:
            latched = self._wake_requested and not self._closed
            self._idle()
            if latched and self.inbox.pending and self._driver is not None:
                self._start_drain()  # the wake latch replays (B30)

    def _idle(self) -> None:
        done = self._turn_done
        self._signal = None
        self._turn_done = None
        self._wake_requested = False
        if done is not None:
            done.set()

    def _accept_context(self, message: Message) -> None:
        """Queue a committed tool result's context in `next-step` (loop-spec 4.2).

        Also after a cancel: the contexts then stay parked for a later turn (loop-spec 4.4).
        """
        self.inbox.insert(INBOX_NEXT_STEP, message)

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
