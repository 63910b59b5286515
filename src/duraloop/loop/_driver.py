"""Who runs the loop's turns, one at a time: the caller's task, or a background driver.

`TurnDriver` holds what is running (the turn's cancel signal and its done event), the
background task group of `async with loop:`, the wake latch (B30) and the results of the
background turns since the last `wait_idle()`. `AgentLoop` owns one and builds each turn
for it (`open_turn`); the driver never sees the loop itself.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import anyio.abc

from ..errors import UsageError
from ..log import Message
from ..log.vocabulary import DISPOSED, REASON_COMPLETED, REASON_MAX_TOKENS
from ..tools import CancelSignal
from ._guarded import run_guarded
from ._inbox import Inbox
from ._result import TurnResult
from ._turn import Turn

logger = logging.getLogger(__name__)

OpenTurn = Callable[[Message | None, CancelSignal], Turn]
"""Opens a turn (`turn/start` and the first claim) with a prompt (or None) and a signal."""


class TurnDriver:
    """Run one turn at a time, awaited or in a background task group.

    See docs/loop.md#send-and-cancel, #turns.

    Args:
        open_turn: opens a turn; it may raise (nothing then runs).
        inbox: the loop's inbox (a drain runs while follow-ups are queued).
        session_id: the session's id, for log messages.
        closed: whether the loop is closed (a closed loop replays no latched wake).
        after_turn: called after each turn has closed (its `turn/end` flushed), e.g. to
            write a snapshot; it must not raise.
    """

    def __init__(
        self,
        open_turn: OpenTurn,
        *,
        inbox: Inbox,
        session_id: str,
        closed: Callable[[], bool],
        after_turn: Callable[[], None] = lambda: None,
    ) -> None:
        self._open_turn = open_turn
        self._after_turn = after_turn
        self._inbox = inbox
        self._session_id = session_id
        self._closed = closed
        self.signal: CancelSignal | None = None
        """The running turn's cancel signal (None while idle)."""
        self.turn_done: anyio.Event | None = None
        """Set when the running turn (or drain) ends (None while idle)."""
        self._group: anyio.abc.TaskGroup | None = None
        self._exit_stack: AsyncExitStack | None = None
        self._wake_requested = False
        self._results: list[TurnResult] = []
        self._maintaining = False

    async def run(self, message: Message | None) -> TurnResult:
        """Open and run one turn in this task (`AgentLoop.run_turn`); a turn must not be running."""
        signal = CancelSignal()
        self.signal = signal
        done = self.turn_done = anyio.Event()
        try:
            result = await run_guarded(self._open_turn(message, signal))
        finally:
            self.signal = None
            self.turn_done = None
            done.set()
        self._after_turn()
        return result

    def wake(self, *, after_abort: bool) -> bool:
        """Wake the background driver; return whether a turn is (or will be) running.

        Running: latch the wake when the turn is being aborted (not for disposal); a live
        turn claims queued work itself. Idle with a driver: open the next turn now, then run
        it in the driver task. Idle without one (no `async with`): nothing to wake.
        """
        signal = self.signal
        if self._maintaining:
            self._wake_requested = True  # runs once the maintenance is over
            return True
        if signal is not None:
            if after_abort and (signal.reason or {}).get("kind") != DISPOSED:
                self._wake_requested = True
            return True
        if self._group is None:
            return False
        self._start_drain()
        return True

    @asynccontextmanager
    async def maintenance(self) -> AsyncIterator[CancelSignal]:
        """Hold the driver idle for work between turns (a compaction), with its own signal.

        While it runs no turn opens: `run_turn()` is refused as for a running turn, and a
        waking send is latched; the latch starts the drain when it ends (compaction-spec 4.4).
        """
        signal = CancelSignal()
        self.signal = signal
        self._maintaining = True
        done = self.turn_done = anyio.Event()
        try:
            yield signal
        finally:
            self._maintaining = False
            latched = self._wake_requested and not self._closed()
            self.signal = None
            self.turn_done = None
            self._wake_requested = False
            done.set()
            if latched and self._inbox.pending and self._group is not None:
                self._start_drain()

    def cancel(self, reason: dict[str, Any] | None, *, keep_inbox: bool) -> None:
        """Cancel the running turn with `reason`; unless `keep_inbox`, drop a latched wake."""
        if self.signal is not None:
            self.signal.cancel(reason)
        if not keep_inbox:
            self._wake_requested = False

    async def dispose(self) -> None:
        """Cancel the running turn as `{"kind": "disposed"}` and wait for it to close."""
        signal, done = self.signal, self.turn_done
        if signal is not None and done is not None:
            signal.cancel({"kind": DISPOSED})
            await done.wait()

    async def wait_idle(self) -> list[TurnResult]:
        """Wait until the background driver is idle; return the turns finished since."""
        while self._group is not None and self.turn_done is not None:
            await self.turn_done.wait()
        results, self._results = self._results, []
        return results

    async def start(self) -> None:
        """Start the background task group (`async with loop:`).

        Raises:
            UsageError: if it is already running.
        """
        if self._group is not None:
            raise UsageError("this AgentLoop is already running its driver (nested `async with`)")
        stack = AsyncExitStack()
        self._group = await stack.enter_async_context(anyio.create_task_group())
        self._exit_stack = stack

    async def stop(self) -> None:
        """Stop the background task group: no more wakes; wait for its tasks to end."""
        stack, self._exit_stack = self._exit_stack, None
        self._group = None
        if stack is not None:
            # The body's exception is the caller's, not the driver's: don't hand it to the
            # task group, which would wrap it in an ExceptionGroup.
            await stack.__aexit__(None, None, None)

    def _start_drain(self) -> None:
        """Open the next turn now and run the drain in the driver task.

        See docs/loop.md#send-and-cancel.
        """
        group = self._group
        if group is None:
            raise UsageError(
                "no background driver: use `async with loop:` to run turns in the background"
            )
        self.turn_done = anyio.Event()
        try:
            turn = self._open_next_turn()
        except BaseException:
            self._idle()
            raise
        group.start_soon(self._drain, turn)

    def _open_next_turn(self) -> Turn:
        """Open a drain's next turn with a fresh cancel signal (docs/loop.md#turns)."""
        self.signal = CancelSignal()
        self._wake_requested = False
        return self._open_turn(None, self.signal)

    async def _drain(self, turn: Turn) -> None:
        """Run turns while each ends completed/max-tokens and work is queued.

        See docs/loop.md#turns.
        """
        try:
            while True:
                result = await run_guarded(turn)
                self._results.append(result)
                self._after_turn()
                if result.error is not None:
                    logger.warning(
                        "session %s: turn %d failed: %s",
                        self._session_id,
                        result.turn,
                        result.reason,
                    )
                if (
                    result.kind not in (REASON_COMPLETED, REASON_MAX_TOKENS)
                    or not self._inbox.pending
                ):
                    break
                turn = self._open_next_turn()
        except Exception:
            logger.exception("session %s: the background driver stopped", self._session_id)
        finally:
            latched = self._wake_requested and not self._closed()
            self._idle()
            if latched and self._inbox.pending and self._group is not None:
                self._start_drain()  # the wake latch replays (B30)

    def _idle(self) -> None:
        done = self.turn_done
        self.signal = None
        self.turn_done = None
        self._wake_requested = False
        if done is not None:
            done.set()
