"""The stream idle timeout: wait for a model stream's next chunk, or fail it `TIMEOUT`."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import anyio

from ..llm import StreamChunk, finish_chunk, watching_stream_activity
from ..log.vocabulary import FINISH_ERROR, TIMEOUT


async def next_chunk(
    stream: AsyncGenerator[StreamChunk, None], idle_timeout_seconds: float | None
) -> StreamChunk | None:
    """Return the stream's next chunk, None at its end, or a `TIMEOUT` finish when idle.

    Only the wait for this chunk is timed (docs/providers.md#adapter-guarantees): the loop's own
    work between chunks does not count, and transport activity without a chunk (an adapter's
    `note_stream_activity()`, e.g. for SSE keep-alive comments) re-arms the timer. On expiry the
    adapter's pending read is cancelled (closing the adapter), and the attempt ends with an in-band
    `TIMEOUT` failure like any other.
    """
    if idle_timeout_seconds is None:
        return await anext(stream, None)
    with anyio.CancelScope(deadline=anyio.current_time() + idle_timeout_seconds) as scope:

        def rearm() -> None:
            scope.deadline = anyio.current_time() + idle_timeout_seconds

        with watching_stream_activity(rearm):
            return await anext(stream, None)
    failure = {
        "message": f"the model stream sent no chunk for {idle_timeout_seconds:g} seconds "
        "(LoopConfig.stream_idle_timeout_seconds)",
        "code": TIMEOUT,
    }
    return finish_chunk(FINISH_ERROR, failure=failure)
