"""The tool bodies running now, settled together when their turn's signal fires.

See docs/scheduler.md#cancellation. A body that does not watch the signal is cancelled at
its next await, so cancelling a turn never waits on a tool that would not notice it; one
that watches it gets the grace period to settle itself first (`postpone_cancel`).

One listener per signal serves every body of the turn: registering and removing a listener
(and building its closure) for each body cost more than the body of a no-op tool.
"""

from __future__ import annotations

import weakref

import anyio

from ._blocking import LoopCaller, postpone_cancel
from ._signal import CancelSignal


class RunningBodies:
    """The cancel scopes of the running bodies, with what each gets on cancellation.

    Listeners run wherever `CancelSignal.cancel()` is called (maybe a tool body's thread);
    the scopes are settled on the event loop, through the turn's `LoopCaller`.
    """

    def __init__(self) -> None:
        self._listening: weakref.WeakSet[CancelSignal] = weakref.WeakSet()
        # scope -> (its signal, whether the body watches it, its grace period in seconds)
        self._running: dict[anyio.CancelScope, tuple[CancelSignal, bool, float]] = {}
        # One `LoopCaller` per turn signal (a turn runs on one event loop), not one per call.
        self._caller: tuple[CancelSignal, LoopCaller] | None = None

    def add(
        self, scope: anyio.CancelScope, signal: CancelSignal, *, watches: bool, grace_seconds: float
    ) -> None:
        """Register a body's entered scope; settle it at once if `signal` already fired.

        Args:
            scope: the cancel scope the body runs in (entered, on the event loop).
            signal: the turn's cancellation signal.
            watches: whether the body watches the signal (`Tool.watches_signal`).
            grace_seconds: how long a watching body gets after the cancel, in seconds.
        """
        self._listen(signal)
        running = (signal, watches, grace_seconds)
        self._running[scope] = running
        if signal.aborted:  # fired before this body was registered
            _settle(scope, running)

    def discard(self, scope: anyio.CancelScope) -> None:
        """Forget a body's scope once the body settled."""
        self._running.pop(scope, None)

    def _listen(self, signal: CancelSignal) -> None:
        cached = self._caller
        if (cached is not None and cached[0] is signal) or signal in self._listening:
            return  # the turn's signal (the usual case) is checked without the weak set
        self._listening.add(signal)
        caller = self._loop_caller(signal)

        def settle_running() -> None:  # on the event loop
            for scope, running in list(self._running.items()):
                if running[0] is signal:
                    _settle(scope, running)

        def on_cancel(_reason: object) -> None:
            # No body running, nothing to settle: no hop to the loop from another thread (a
            # body registering meanwhile sees `signal.aborted` and settles itself).
            if self._running:
                caller(settle_running)

        signal.add_listener(on_cancel)

    def _loop_caller(self, signal: CancelSignal) -> LoopCaller:
        cached = self._caller
        if cached is not None and cached[0] is signal:
            return cached[1]
        caller = LoopCaller()
        self._caller = (signal, caller)
        return caller


def _settle(scope: anyio.CancelScope, running: tuple[CancelSignal, bool, float]) -> None:
    """Cancel a running body's scope now, or bound it by its grace period if it watches."""
    _signal, watches, grace_seconds = running
    if watches:
        postpone_cancel(scope, grace_seconds)
    else:
        scope.cancel()
