"""Durability: how far the log is on disk, and making it so at the loop's boundaries (Law 5).

`Durability` is what the loop needs from persistence (a store writer). `LogDurability` is
what a turn and a step need from the loop: flush now, make the log durable through a seq
before a tool body runs (group commit), and how far it is durable. `GroupCommit` is the
loop's implementation over a `Durability`, or over nothing (an in-memory session).
"""

from __future__ import annotations

from typing import Protocol

from ..log import Session


class Durability(Protocol):
    """What the loop needs from persistence (`duraloop.store.SessionWriter` satisfies it).

    `flush()` makes every committed event durable (one write + one fsync); the loop calls
    it on the event loop's thread, never two at once. `close()` flushes and releases the
    session's writer lock. None (no store) means in-memory only.
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
        """Make every committed event durable now (a no-op without a store)."""

    async def ensure_durable(self, seq: int) -> None:
        """Return once the log is durable through `seq` (Law 5: before a tool body runs)."""


class GroupCommit:
    """The loop's `LogDurability`: flushes on the event loop, group-committed per batch.

    Every flush, including the one before a tool body (`ensure_durable`), runs inline on
    the event loop: one write and one fsync of everything appended so far, with no thread
    round trip. Calls started together share it (group commit): the first body's flush
    covers every `tool/call` appended before it, the others find their seq covered. The
    figures that chose this over a worker-thread hop per flush and over a long-lived writer
    thread are in docs/scheduler.md#durability-before-a-body.

    Args:
        session: the live session whose events are made durable.
        writer: the store writer, or None (in-memory only).
    """

    def __init__(self, session: Session, writer: Durability | None) -> None:
        self._session = session
        self.writer = writer
        self._durable_through = session.seq - 1

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
            Exception: whatever the writer's flush raises (the log is then durable only
                through the last successful flush).
        """
        target = self._session.seq - 1
        if self.writer is not None:
            self.writer.flush()
        self._durable_through = target

    def close(self) -> None:
        """Flush and release the writer; later flushes are no-ops."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    async def ensure_durable(self, seq: int) -> None:
        """Make the log durable through `seq` before a tool body runs (Law 5).

        Returns at once, without a flush, when `seq` is already durable; otherwise flushes
        inline (every event appended so far, so the calls started with this one are covered
        too). Never yields to the event loop.

        Raises:
            Exception: whatever the writer's flush raises.
        """
        if seq > self._durable_through:
            self.flush()
