"""The stream idle timeout: wait for a model stream's next chunk, or fail it `TIMEOUT`.

Only the wait for a chunk is timed (docs/providers.md#adapter-guarantees): the loop's own work
between chunks does not count, and transport activity without a chunk (an adapter's
`note_stream_activity()`, e.g. for SSE keep-alive comments) re-arms the timer. On expiry the
adapter's pending read is cancelled (closing the adapter), and the attempt ends with an in-band
`TIMEOUT` failure like any other.

One cancel scope serves many waits (`IdleTimer.scope()`): its deadline is set before each wait
and lifted after it, which costs far less than entering a fresh scope for every chunk. A scope
whose deadline fired just as a chunk arrived is left for a fresh one (`spent`), so a late
expiry never cancels a later wait.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator

import anyio

from ..llm import StreamChunk, finish_chunk
from ..log.vocabulary import FINISH_ERROR, TIMEOUT


class IdleTimer:
    """Times each wait for one stream's next chunk against `idle_timeout_seconds`.

    Use: `with timer.scope() as scope:` around a run of `await timer.next_chunk(stream, scope)`
    calls, leaving the block when `timer.spent(scope)`; after the block, `timer.timed_out(scope)`
    gives the `TIMEOUT` failure chunk when the deadline ended it. `rearm` goes to
    `watching_stream_activity`.

    Args:
        idle_timeout_seconds: the idle limit in seconds; None waits forever.
    """

    def __init__(self, idle_timeout_seconds: float | None) -> None:
        self.idle_timeout_seconds = idle_timeout_seconds
        self._waiting: anyio.CancelScope | None = None

    def scope(self) -> anyio.CancelScope:
        """Return a fresh scope with no deadline (one is set only while a wait runs)."""
        return anyio.CancelScope()

    async def next_chunk(
        self, stream: AsyncGenerator[StreamChunk, None], scope: anyio.CancelScope
    ) -> StreamChunk | None:
        """Return the stream's next chunk (None at its end); `scope` expires if it is idle.

        Args:
            stream: the model stream.
            scope: the entered scope from `scope()`, not `spent`.
        """
        timeout = self.idle_timeout_seconds
        if timeout is None:
            return await anext(stream, None)
        scope.deadline = anyio.current_time() + timeout
        self._waiting = scope
        try:
            return await anext(stream, None)
        finally:
            self._waiting = None
            if not scope.cancel_called:
                scope.deadline = math.inf

    def rearm(self) -> None:
        """Push the running wait's deadline `idle_timeout_seconds` from now (activity seen)."""
        scope, timeout = self._waiting, self.idle_timeout_seconds
        if scope is not None and timeout is not None and not scope.cancel_called:
            scope.deadline = anyio.current_time() + timeout

    @staticmethod
    def spent(scope: anyio.CancelScope) -> bool:
        """Whether `scope`'s deadline fired (just as the wait's chunk arrived): use a fresh one."""
        return scope.cancel_called

    def timed_out(self, scope: anyio.CancelScope) -> StreamChunk | None:
        """The `TIMEOUT` failure chunk if the deadline ended a wait in `scope`, else None."""
        if not scope.cancelled_caught:
            return None
        failure = {
            "message": f"the model stream sent no chunk for {self.idle_timeout_seconds:g} "
            "seconds (LoopConfig.stream_idle_timeout_seconds)",
            "code": TIMEOUT,
        }
        return finish_chunk(FINISH_ERROR, failure=failure)
