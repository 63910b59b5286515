"""A live feed of a session's committed events (`AgentLoop.events()`, style rule D18).

A session observer copies each committed event into an anyio memory object stream; the
consumer reads it with `async for`. The buffer is unbounded: the observer runs inside
`Session.append` and must never block or drop, so a consumer that stops reading while the
context is open holds every later event in memory. Leaving the context removes the
observer and closes both ends of the stream, dropping unread events; no task is started.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from ..log import Event, Session


@asynccontextmanager
async def session_events(session: Session) -> AsyncIterator[AsyncIterator[Event]]:
    """Yield an async iterator of the events `session` commits from now on.

    The iteration never ends by itself; break out of it to stop. After the context exits
    the iterator is closed (reading raises `anyio.ClosedResourceError`).
    """
    send, receive = anyio.create_memory_object_stream[Event](math.inf)
    remove = session.observe(send.send_nowait)
    try:
        with receive:
            yield receive
    finally:
        remove()
        send.close()
