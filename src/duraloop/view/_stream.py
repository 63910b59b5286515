"""`GET /api/sessions/{id}/stream`: a session's events as server-sent events, live.

See docs/view.md#live. Each event with a seq past the client's last one is sent as
`id: SEQ`, `event: event`, `data: JSON`; then the store is polled for new commits (another
process may be writing). The `id` is the seq, so a browser's reconnect (`Last-Event-ID`)
continues right after the last event it received: none missed, none repeated.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import AsyncIterator
from typing import Final

import anyio
from starlette.responses import StreamingResponse

from duraloop.errors import CorruptLogError, SessionFormatUnsupportedError, SessionNotFoundError

from ._cut import event_json
from ._json import encode
from ._reader import StoreReader

KEEPALIVE_SECONDS: Final = 15.0
"""How often an idle stream sends a `: keepalive` comment (proxies and browsers keep it)."""
_BATCH = 500  # events per chunk written (a 100k-event backlog is sent in pieces)


def event_stream(
    reader: StoreReader,
    session_id: str,
    *,
    after: int,
    poll_seconds: float,
    stopping: threading.Event,
) -> StreamingResponse:
    """Return the streaming response of a session's events with seq > `after`, then live ones.

    Args:
        reader: the store's reader.
        session_id: the session.
        after: the last seq the client has (-1: from the start).
        poll_seconds: how often the store is asked whether the log changed.
        stopping: set when the server stops: the stream ends at its next poll.

    Returns:
        A `text/event-stream` response that ends when the client disconnects or the
        server stops (or the session disappears or becomes unreadable: then an
        `event: error` says why).
    """
    return StreamingResponse(
        _events(reader, session_id, after, poll_seconds, stopping),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


async def _events(
    reader: StoreReader,
    session_id: str,
    after: int,
    poll_seconds: float,
    stopping: threading.Event,
) -> AsyncIterator[str]:
    revision: str | None = None
    idle = 0.0
    yield "retry: 1000\n\n"
    while not stopping.is_set():
        try:
            current = await reader.revision(session_id)
            if current != revision:
                log = await reader.load(session_id)
                revision = log.revision
                start = bisect.bisect_right(log.events, after, key=lambda event: event.seq)
                for index in range(start, len(log.events), _BATCH):
                    batch = log.events[index : index + _BATCH]
                    yield "".join(
                        f"id: {event.seq}\nevent: event\ndata: {_data(event_json(event))}\n\n"
                        for event in batch
                    )
                    after = batch[-1].seq
                    idle = 0.0
        except (SessionNotFoundError, CorruptLogError, SessionFormatUnsupportedError) as exc:
            yield f"event: error\ndata: {_data({'error': str(exc)})}\n\n"
            return
        await anyio.sleep(poll_seconds)
        idle += poll_seconds
        if idle >= KEEPALIVE_SECONDS:
            idle = 0.0
            yield ": keepalive\n\n"


def _data(value: object) -> str:
    """One `data:` line: compact JSON (JSON escapes every line break inside a string)."""
    return encode(value).decode()
