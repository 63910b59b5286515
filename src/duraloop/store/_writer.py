"""The session writer: persists a live Session's committed events in durable batches.

`flush()` writes every event committed since the last successful flush as ONE batch (one
write, one fsync for JSONL). The first flush of a new session materializes header and batch
atomically. A failed flush changes nothing stored and keeps the batch for the next flush.
The writer holds the session's single-writer lock until `close()` (Law 8).

If an append finds the log changed under the lock (`AppendConflictError`) and the change is
only a torn tail after exactly what this writer stored (a failed append whose rollback failed,
or a process ignoring the lock), the flush cuts the tail and writes the batch as one repair,
with no closers: the live session writes its own (docs/recovery.md#when-repair-runs, hot-reload
adoption).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from duraloop.errors import AppendConflictError
from duraloop.log import EncodedPrefix, Event, Session, encode_checkpoint

from ._backend import StorageBackend, WriteReceipt

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WriterStatistics:
    """Counters of one `SessionWriter` since it was opened.

    Args:
        fsync_count: fsync calls made by durable writes (0 for the memory backend).
        bytes_written: bytes stored (header included on materialization).
        batches_written: successful flushes that wrote a batch.
        events_written: logical events stored.
        pending_events: events committed to the session but not yet stored.
    """

    fsync_count: int
    bytes_written: int
    batches_written: int
    events_written: int
    pending_events: int


def check_batch(session_id: str, batch: Sequence[Event], cursor: int) -> None:
    """Check a batch continues the stored log exactly: first seq == cursor, no gaps.

    Args:
        session_id: the session, for the message.
        batch: the events to append.
        cursor: the stored log's length (the next seq).

    Raises:
        AppendConflictError: "append seq mismatch for "<id>": expected X at index i, got Y".
    """
    for index, event in enumerate(batch):
        if event.seq != cursor + index:
            raise AppendConflictError(
                f'append seq mismatch for "{session_id}": expected {cursor + index} at index '
                f"{index}, got {event.seq}"
            )


class SessionWriter:
    """Persist one live Session; obtain it from `SessionStore.open_writer`.

    Use it as a context manager, or call `close()`: both flush, then release the lock.

    Args:
        session: the live session.
        backend: where to write.
        cursor: how many of the session's events are already stored.
        release: releases the single-writer lock.
        on_close: called once when the writer closes.
    """

    def __init__(
        self,
        session: Session,
        *,
        backend: StorageBackend,
        cursor: int,
        release: Callable[[], None],
        on_close: Callable[[SessionWriter], None],
    ) -> None:
        self.session = session
        self._backend = backend
        self._cursor = cursor
        self._materialized = cursor > 0 or backend.exists(session.id)
        self._release = release
        self._on_close = on_close
        self._closed = False
        self._fsync_count = 0
        self._bytes_written = 0
        self._batches_written = 0
        self._events_written = 0
        # Receipts whose bytes are counted only when `statistics()` asks (`WriteReceipt.measure`).
        self._unmeasured: list[Callable[[], int]] = []
        # The loop flushes on its event loop's thread, and `SessionStore.load` of a live
        # session flushes from the caller's (maybe another thread): one flush at a time.
        self._flush_lock = threading.Lock()

    @property
    def stored_seq(self) -> int:
        """The number of the session's events that are durably stored."""
        return self._cursor

    @property
    def closed(self) -> bool:
        """Whether `close()` has run."""
        return self._closed

    def flush(self) -> None:
        """Store every event committed since the last flush as one durable batch.

        A no-op (no fsync) when nothing is pending. On failure the batch stays pending and
        the next flush retries it with the same seqs.

        Safe to call from several threads: flushes are serialized.

        Raises:
            StoreError: if the write fails or was refused (the stored log is unchanged).
            AppendConflictError: if the stored log no longer ends where this writer left it.
        """
        with self._flush_lock:
            self._flush()

    def _flush(self) -> None:
        batch = list(self.session.events[self._cursor :])
        if not batch:
            return
        check_batch(self.session.id, batch, self._cursor)
        receipt: WriteReceipt
        if self._materialized:
            try:
                receipt = self._backend.append(self.session.id, batch)
            except AppendConflictError as conflict:
                receipt = self._cut_torn_tail(batch, conflict)
        else:
            receipt = self._backend.materialize(self.session.header, batch)
            self._materialized = True
        self._cursor += len(batch)
        self._fsync_count += receipt.fsync_count
        if receipt.measure is not None:
            self._unmeasured.append(receipt.measure)
        else:
            self._bytes_written += receipt.bytes_written
        self._batches_written += 1
        self._events_written += len(batch)
        logger.debug(
            "session %s: stored %d events up to seq %d",
            self.session.id,
            len(batch),
            self._cursor - 1,
        )

    def write_snapshot(
        self, loop: dict[str, Any] | None = None, *, encoded: Sequence[EncodedPrefix] = ()
    ) -> bool:
        """Store a snapshot of the session's derived state, bound to what is flushed.

        See docs/store.md#snapshots. Taken only when every event is stored and the session
        is between turns (`Session.checkpoint`); not durable (a cache the next load checks).
        A zstd log's batch frames since the last snapshot are merged into one first
        (`StorageBackend.merge_frames`, docs/store.md#zstd-framing), so the snapshot binds the
        merged bytes.

        Args:
            loop: the loop's own fold, stored with the checkpoint.
            encoded: the model's encoded forms of the derived messages, stored with them
                (`Session.checkpoint` keeps those that cover exactly its messages).

        Returns:
            Whether a snapshot was written (False: events are pending, a turn is open, the
            writer is closed, or the backend keeps no snapshots).

        Raises:
            StoreError: if the frames cannot be merged or the snapshot file cannot be written
                (the log is unchanged).
        """
        with self._flush_lock:
            session = self.session
            if self._closed or self._cursor != session.seq:
                return False
            checkpoint = session.checkpoint(loop, encoded=encoded)
            if checkpoint is None:
                return False
            body = encode_checkpoint(checkpoint)
            self._backend.merge_frames(session.id)
            return self._backend.write_snapshot(session.id, checkpoint.count, body)

    def _cut_torn_tail(self, batch: list[Event], conflict: AppendConflictError) -> WriteReceipt:
        """Repair a torn tail after this writer's stored prefix and write `batch`, or re-raise."""
        stored = self._backend.read(self.session.id)
        if (
            stored.torn is None
            or len(stored.events) - stored.recovered_events != self._cursor
            or stored.events[: self._cursor] != list(self.session.events[: self._cursor])
        ):
            raise conflict
        logger.warning("session %s: cutting a torn tail found at flush", self.session.id)
        return self._backend.repair(self.session.id, stored.torn, batch)

    def close(self) -> None:
        """Flush, then release the writer lock; idempotent.

        Raises:
            StoreError: if the final flush fails (the lock is released anyway).
        """
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self._release()
            self._on_close(self)

    def statistics(self) -> WriterStatistics:
        """Return the writer's counters.

        Returns:
            A frozen snapshot of fsyncs, bytes, batches and events written, and pending events.
        """
        with self._flush_lock:
            unmeasured, self._unmeasured = self._unmeasured, []
            self._bytes_written += sum(measure() for measure in unmeasured)
        return WriterStatistics(
            fsync_count=self._fsync_count,
            bytes_written=self._bytes_written,
            batches_written=self._batches_written,
            events_written=self._events_written,
            pending_events=len(self.session.events) - self._cursor,
        )

    def __enter__(self) -> SessionWriter:
        """Return the writer itself."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close the writer (flush and release)."""
        self.close()
