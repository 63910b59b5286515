"""The AgentLoop: a long-lived agent over a durable session.

See docs/loop.md#vocabulary, #send-and-cancel, #the-agent-loop, docs/recovery.md#resume, #fork.

The public surface: `send` (and `followup`, `steer`, `inject`), `cancel`, `dispose`,
`run_turn`/`run_pending`, `wait_idle`, `events`, `usage`, `flush`, `close`, the approval methods
(`pending_approvals`, `decide`, `continue_turn`, docs/approvals.md) and `retry_unknown_calls`
(docs/recovery.md#re-running-outcome-unknown-calls). The loop owns the state its turns share
(`LoopState`) and builds what each turn depends on (`TurnDeps`); the turn algorithm is
`_turn.Turn`, who runs turns `_driver.TurnDriver`, durable flushes `_durability.GroupCommit`.
Turns run awaited (`await loop.run_turn(prompt)`, in the caller's task; sends only queue) or in
the background inside `async with loop:`: a waking send from idle opens the turn before it
returns (docs/loop.md#send-and-cancel), the driver drains queued follow-ups while turns end
`completed`/`max-tokens`, a waking send after `cancel()` is latched until the aborted turn has
closed (B30; `cancel()` without `keep_inbox` clears the latch, disposal is never latched), and
`wait_idle()` returns the turns finished since. `dispose()` is dsh's disposal (F17) minus the
inbox discard: pending messages stay durable.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from types import TracebackType
from typing import Any

from ..errors import UsageError
from ..llm import Model
from ..log import Event, Message, Session, Usage, user_message
from ..log.vocabulary import INBOX_NEXT_STEP, INBOX_NEXT_TURN, REASON_COMPLETED, REASON_MAX_TOKENS
from ..tools import Approver, CancelSignal, Tool, ToolHooks, ToolPipeline, ToolRegistry
from ._approval_methods import ApprovalMethods
from ._approvals import PausedTurn
from ._budget import SessionUsage
from ._compaction import Compactor
from ._compaction_methods import CompactionMethods
from ._config import LoopConfig
from ._driver import TurnDriver
from ._durability import Durability, GroupCommit
from ._events import session_events
from ._hooks import LoopHooks
from ._inbox import Inbox
from ._rerun_methods import RerunMethods
from ._result import TurnResult
from ._sends import NamedSends, SendTarget
from ._snapshot import Snapshots
from ._state import LoopState, TurnDeps
from ._turn import Turn


class AgentLoop(NamedSends, ApprovalMethods, CompactionMethods, RerunMethods):
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
        approver: answers approval asks in this process (e.g. a prompt); None pauses the
            turn on each ask until `decide()` (docs/approvals.md).

    The inbox (`self.inbox`) is replayed from the log: messages pending when the session was
    last written are pending again. Outside `async with loop:` sends only queue, and each
    `run_turn()` without a prompt runs ONE queued follow-up; inside it, waking sends start
    turns in the loop's background driver (see the module docstring).

    Example:
        async with AgentLoop(session, model=model, cwd=".") as loop:
            loop.followup("list the files")
            (result,) = await loop.wait_idle()

    Raises:
        UsageError: if `cwd` is not an existing directory (`ConfigError`: a cost budget
            without the model's price).
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
        approver: Approver | None = None,
    ) -> None:
        self.session = session
        self.model = model
        self.config = config = config or LoopConfig()
        self._usage = SessionUsage.of_loop(config, model)
        self.cwd = Path(cwd).resolve()
        if not self.cwd.is_dir():
            raise UsageError(
                f"workspace {self.cwd} is not a directory; create it or pass another cwd"
            )
        if isinstance(tools, ToolRegistry):
            self.registry = tools
        else:
            self.registry = ToolRegistry()
            for item in tools:
                self.registry.register(item)
        self.pipeline = pipeline_factory(
            self.registry,
            hooks=tool_hooks,
            cwd=self.cwd,
            session_id=session.id,
            max_output_bytes=self.config.max_tool_output_bytes,
            cancel_grace_seconds=self.config.tool_cancel_grace_seconds,
        )
        self._durability = GroupCommit(session, durability)
        self._closed = False
        self._state = LoopState.of_log(session)
        self.hooks = hooks or LoopHooks()
        self.inbox = Inbox(session)
        self._snapshots = Snapshots(session, self.config.snapshot_every)
        self._paused = PausedTurn(session, self._durability)
        self._compaction = Compactor.of_loop(session, model, config, self._durability.flush)
        self.approver = approver
        self._driver = TurnDriver(
            self._open_turn,
            inbox=self.inbox,
            session_id=session.id,
            closed=lambda: self._closed,
            after_turn=self._after_turn,
        )

    @property
    def last_turn(self) -> int:
        """The number of the last turn started in this session (0 if none)."""
        return self._state.last_turn

    @property
    def usage(self) -> Usage:
        """What the session spent so far, folded from its log (docs/loop.md#budgets)."""
        return self._usage.of(self.session)

    @property
    def durability(self) -> Durability | None:
        """The store writer that makes the log durable (None without a store, or once closed)."""
        return self._durability.writer

    def send(
        self, message: str | Message, *, target: SendTarget = INBOX_NEXT_TURN, wakeup: bool = True
    ) -> Message:
        """Queue a user message and, if `wakeup`, wake the driver (docs/loop.md#send-and-cancel).

        `followup`, `steer` and `inject` are this with fixed arguments. A waking send while
        the running turn is being cancelled goes to `next-turn` and is latched: it runs once
        the turn has closed. Inside `async with loop:`, a waking send from idle opens the
        turn before it returns; outside it, sends only queue for `run_turn()`. While a call
        waits for an undecided approval a send only queues. An idle loop flushes it at once.

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
        signal = self._driver.signal
        waking_after_abort = wakeup and signal is not None and signal.aborted
        effective = INBOX_NEXT_TURN if waking_after_abort else target
        stored = self.inbox.insert(
            effective, user_message(message) if isinstance(message, str) else message
        )
        wakeup = wakeup and not self.pending_approvals()  # paused: wait for the decision
        if wakeup and self._driver.wake(after_abort=waking_after_abort):
            return stored
        if self._driver.signal is None:
            self.flush()  # idle: nothing else will make the queued message durable soon
        return stored

    def cancel(self, reason: dict[str, Any] | None = None, *, keep_inbox: bool = False) -> None:
        """Cancel the running turn and, unless `keep_inbox`, discard every pending message.

        The running turn stops new tool starts, drains started ones, and closes the log:
        unstarted calls get `ABORTED_BEFORE_DISPATCH` results and the turn ends `aborted`; a
        paused turn is closed so too (docs/approvals.md#cancel-while-paused). The inbox is
        cleared even while idle (one discard splice per list). Safe from a signal handler on
        the event loop (not from a session observer while messages are pending).

        Args:
            reason: the cause recorded in `turn/end`, default `{"kind": "user"}`.
            keep_inbox: keep pending messages for a later turn.
        """
        self._driver.cancel(reason, keep_inbox=keep_inbox)
        if self._driver.signal is None and not self._closed:
            self._paused.cancel(reason or {"kind": "user"})  # a paused turn closes aborted
        if not keep_inbox and self.inbox.pending:
            self.inbox.clear()
            if self._driver.signal is None and not self._closed:
                self.flush()

    def flush(self) -> None:
        """Make every committed event durable now (a no-op without a store).

        Raises:
            UsageError: if a background flush is still running (it never is between steps).
        """
        self._durability.flush()

    def close(self) -> None:
        """Flush and release the session's writer; later `run_turn` calls are refused.

        Between turns, with events new since the last snapshot, one is written first.
        """
        self._closed = True
        try:
            if not self.paused and self._driver.signal is None and self._snapshots.pending():
                self._durability.flush()
                self._write_snapshot()
        finally:
            self._durability.close()

    def _after_turn(self) -> None:
        self._paused.refresh()
        if not self.paused and self._snapshots.due():
            self._write_snapshot()

    def _write_snapshot(self) -> None:
        compaction = None if self._compaction is None else self._compaction.fold_json()
        fold = self._state.fold(self.inbox, self._usage.state(self.session), compaction)
        self._snapshots.write(self._durability.writer, fold, self._state.pairing, self.model)

    async def dispose(self) -> None:
        """Cancel the running turn as `{"kind": "disposed"}`, wait for it to close, then close.

        The turn ends `aborted {disposed}` with its log closed as for any cancel (F17); then
        the loop closes as by `close()`, and sends are refused from the moment disposal
        starts. Unlike dsh's disposal, pending messages are kept (durable, they run after a
        resume). Idempotent. Never call it from inside the running turn (a hook or a tool
        body): it waits for that turn to end; use `cancel()` there.
        """
        self._closed = True
        await self._driver.dispose()
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

    async def run_turn(self, prompt: str | Message | None = None) -> TurnResult:
        """Run one turn in this task and close it durably, whatever happens.

        The first step enters every pending `next-step` message, then the prompt: `prompt`
        when given (queued follow-ups stay queued), else the oldest follow-up. Later steps
        enter steering and context that arrived meanwhile.

        Args:
            prompt: the user's text or a complete user message; None runs the next queued
                follow-up (or, with none queued, the pending `next-step` messages; or, while
                paused with the ask decided, continues the paused turn).

        Returns:
            The turn's end: completed, max-tokens, blocked (max_steps reached, or the
            `pre_step` hook rejected), aborted (after `cancel()`) or paused (a call waits
            for approval: docs/approvals.md#pausing).

        Raises:
            UsageError: if a turn is already running on this loop, it is closed, or `prompt`
                is None and nothing is pending; `ApprovalError` while paused (but see above).
            Exception: the original failure of an `error` turn (e.g. `LlmError`), after
                recovery results, `step/end` and `turn/end {error}` are in the log.
        """
        self._check_idle()
        if prompt is None and not self.inbox.pending and self.paused is None:
            raise UsageError(
                "run_turn() without a prompt runs the next queued follow-up, and none is "
                "queued; pass a prompt or call followup() first"
            )
        message = user_message(prompt) if isinstance(prompt, str) else prompt
        result = await self._driver.run(message)
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
        return await self._driver.wait_idle()

    async def __aenter__(self) -> AgentLoop:
        """Start the background driver: waking sends now start turns.

        See docs/loop.md#send-and-cancel.
        """
        self._check_open()
        await self._driver.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Wait for queued work to finish (or, on an error, dispose), then close the loop.

        An exception raised in the body propagates as it is (not wrapped in an exception
        group); a cancellation of the body's scope cancels the running turn durably
        (`aborted {parent}`) before it continues outward.
        """
        try:
            if exc is None:
                await self.wait_idle()
            else:
                await self.dispose()
        finally:
            try:
                await self._driver.stop()
            finally:
                self.close()

    def _open_turn(self, prompt: Message | None, signal: CancelSignal) -> Turn:
        """Open a turn over what it depends on now (`turn/start` and the first claim)."""
        deps = TurnDeps(
            session=self.session,
            model=self.model,
            registry=self.registry,
            pipeline=self.pipeline,
            config=self.config,
            hooks=self.hooks,
            inbox=self.inbox,
            workspace=self.cwd,
            durability=self._durability,
            steering=self,
            session_usage=self._usage,
            approver=self.approver,
            compaction=self._compaction,
        )
        if self._paused.pending is None:
            turn = Turn.open(deps, self._state, prompt, signal)
            turn.rerun, self._rerun_next = self._rerun_next, None
            return turn
        pending = self._paused.check_can_continue(prompt, answerable=self._answers_itself())
        return Turn.continue_paused(deps, self._state, pending, signal)
