"""Durability: how far the log is on disk, and making it so at the loop's boundaries (Law 5).

`Durability` is what the loop needs from persistence (a store writer). `LogDurability` is
what a turn and a step need from the loop: flush now, make the log durable through a seq
before a tool body runs (group commit), and how far it is durable. `GroupCommit` is the
loop's implementation over a `Durability`, or over nothing (an in-memory session).
"""

from __future__ import annotations

from typing import Protocol

import anyio

from ..errors import UsageError
from ..log import Session


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


class LogDurability(Protocol):
    """What a turn and its steps need to make the log durable (`GroupCommit` is one).

    `persisted` is False when nothing is written anywhere (no store, or the loop closed);
    `durable_through()` is then meaningless to recovery, which counts every recorded
    `tool/call` as recorded.
    """

    @property
    def persisted(self) -> bool:
        """Whether a store writer makes the log durable."""

    def durable_through(self) -> int:
        """Return the last seq known durable (-1 when none)."""

    def flush(self) -> None:
        """Make every committed event durable now (a no-op without a store).

        Raises:
            UsageError: if a background flush is still running.
        """

    async def ensure_durable(self, seq: int) -> None:
        """Return once the log is durable through `seq` (Law 5: before a tool body runs)."""


class GroupCommit:
    """The loop's `LogDurability`: synchronous flushes plus group-committed background ones.

    Args:
        session: the live session whose events are made durable.
        writer: the store writer, or None (in-memory only).
    """

    def __init__(self, session: Session, writer: Durability | None) -> None:
        self._session = session
        self.writer = writer
        self._durable_through = session.seq - 1
        self._flushing: anyio.Event | None = None

    @property
    def persisted(self) -> bool:
        """Whether a store writer makes the log durable (False once closed)."""
        return self.writer is not None

    def durable_through(self) -> int:
        """Return the last seq known durable (-1 before the first flush)."""
        return self._durable_through

    def flush(self) -> None:
        """Make every committed event durable now (a no-op without a store).

        Raises:
            UsageError: if a background flush is still running (it never is between steps).
        """
        if self._flushing is not None:
            raise UsageError("a durable flush is already running on this AgentLoop")
        if self.writer is not None:
            self.writer.flush()
        self._durable_through = self._session.seq - 1

    def close(self) -> None:
        """Flush and release the writer; later flushes are no-ops."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    async def ensure_durable(self, seq: int) -> None:
        """Make the log durable through `seq` before a tool body runs (Law 5).

        Group commit: one flush at a time runs in a worker thread, so the event loop keeps
        committing and starting other calls meanwhile; a caller whose seq the running flush
        does not cover waits for it and then flushes everything appended since.
        """
        while seq > self._durable_through:
            if self._flushing is not None:
                await self._flushing.wait()
                continue
            writer = self.writer
            if writer is None:
                self._durable_through = self._session.seq - 1
                return
            target = self._session.seq - 1
            self._flushing = anyio.Event()
            try:
                await anyio.to_thread.run_sync(writer.flush)
                self._durable_through = target
            finally:
                self._flushing.set()
                self._flushing = None
