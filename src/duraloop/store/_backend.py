"""The storage primitives a backend provides; coordination lives in `SessionStore`.

A backend only stores and reads bytes or rows. Seq checks, repair on load, the collision
check and buffering are shared by every backend (docs/architecture.md#layers, "Backends
differ only in storage"), so each backend stays small and one contract suite runs on all of
them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from duraloop.log import Event, SessionHeader

from ._tail import TornTail

if TYPE_CHECKING:
    from ._snapshot import SnapshotRead


@dataclass(frozen=True, slots=True)
class StoredLog:
    """What a backend read for one session.

    Args:
        header: the stored header.
        events: the contiguous committed events, seq 0..n-1.
        torn: a backend-specific marker to truncate a torn tail to (JSONL: byte offset),
            or None when the stored log ends cleanly.
        path: the raw artifact for messages (JSONL file), or None.
        torn_bytes: the size of the torn tail (0 when `torn` is None).
        recovered_events: how many of the final `events` lie inside the torn tail (a torn
            zstd frame still decodes in part): cutting at `torn` removes them from storage,
            so whoever truncates writes them again with its next batch.
        cut: what the torn tail holds (None when `torn` is None).
    """

    header: SessionHeader
    events: list[Event]
    torn: int | None = None
    path: str | None = None
    torn_bytes: int = 0
    recovered_events: int = 0
    cut: TornTail | None = None

    def recovered(self) -> list[Event]:
        """Return the events decoded from a torn zstd frame: cutting the tail removes them."""
        count = self.recovered_events
        return self.events[len(self.events) - count :] if count else []


@dataclass(frozen=True, slots=True)
class DamagedLog:
    """A stored log whose header cannot be read, as `list_headers` reports it.

    Args:
        session_id: the id its location encodes (the header is unreadable).
        reason: what is wrong, short (no path).
        path: the raw artifact, or None.
    """

    session_id: str
    reason: str
    path: str | None = None


@dataclass(frozen=True, slots=True)
class WriteReceipt:
    """What one durable write cost.

    Args:
        bytes_written: bytes (or encoded bytes) stored.
        fsync_count: fsync calls made (0 for memory).
        torn_copy: where a repair kept the torn tail it cut (`<log>.torn-<time>`), or None.
        measure: when not None, `bytes_written` is 0 and `measure()` returns the bytes
            written, computed only when asked: the memory backend encodes a batch only to
            count it, so it defers that until `SessionWriter.statistics()` (off the tool
            path, docs/scheduler.md#durability-before-a-body).
    """

    bytes_written: int
    fsync_count: int
    torn_copy: str | None = None
    measure: Callable[[], int] | None = None


class StorageBackend(Protocol):
    """Storage primitives for session logs; every method is synchronous and durable."""

    def read(self, session_id: str) -> StoredLog:
        """Read a session's header, committed events and torn marker.

        Raises:
            SessionNotFoundError: if nothing is stored under `session_id`.
            CorruptLogError: if the committed region is damaged.
            SessionFormatUnsupportedError: if the header's format version is not 0.
        """
        ...

    def exists(self, session_id: str) -> bool:
        """Return whether a materialized log exists for `session_id`."""
        ...

    def revision(self, session_id: str) -> str | None:
        """Return a cheap token that stays equal while the stored log is unchanged.

        It changes after every append, materialization and committed repair, and differs
        between stores. JSONL: one `stat` of the log file (device, inode, size, mtime and
        ctime in nanoseconds, docs/store.md#durability-and-locks); SQLite: the session row's
        incarnation and revision; memory: a per-store id and a write counter. None when nothing is
        stored.
        """
        ...

    def materialize(self, header: SessionHeader, batch: Sequence[Event]) -> WriteReceipt:
        """Store header and first batch atomically, never overwriting.

        Raises:
            SessionExistsError: if a log for the id already exists.
            StoreError: if the write fails (nothing is published).
        """
        ...

    def append(self, session_id: str, batch: Sequence[Event]) -> WriteReceipt:
        """Append one batch durably (one write, one fsync); roll back fully on failure.

        Raises:
            StoreError: if the write fails; the stored log is unchanged.
        """
        ...

    def repair(self, session_id: str, torn: int | None, events: Sequence[Event]) -> WriteReceipt:
        """Cut a torn tail at `torn` (if not None), then append `events`: one durable repair.

        What is cut is kept first, durably, beside the log (`<log>.torn-<UTC time>`, mode
        0600; SQLite: the deleted rows as JSON lines beside the database), and the receipt
        names that file (D12: nothing a repair removes is lost).

        The marker is the one `StoredLog.torn` reported; `events` start at the seq the cut
        log ends at (recovered events of a torn zstd frame, then closers or a batch). SQLite
        does both in one transaction after re-checking that the marker is still current;
        JSONL truncates and fsyncs, then appends the events as one write and one fsync (a
        crash between leaves a truncated log, which the next load repairs again); memory
        does both in one step. Both empty (`torn` None, no events) is a no-op.

        Raises:
            AppendConflictError: if `events` do not continue the cut log.
            SessionNotFoundError: if nothing is stored under `session_id`.
            StoreError: if the torn tail changed since it was read, or the write fails.
        """
        ...

    def read_snapshot(self, session_id: str) -> SnapshotRead | None:
        """Read a session through its snapshot (docs/store.md#snapshots), or return None.

        None when the backend keeps no snapshots or the session has none. The snapshot is
        verified against the log as read now; then only the events after its covered prefix
        are decoded (the prefix loads on demand).

        Raises:
            SnapshotIgnoredError: if a snapshot exists but cannot be used (damaged, another
                session's, or stale); the caller reads the log alone and reports why.
            CorruptLogError: if the tail after the prefix is damaged (read the log alone to
                get the full scan's verdict).
            SessionNotFoundError: if nothing is stored under `session_id`.
        """
        ...

    def merge_frames(self, session_id: str) -> int:
        """Merge the batch frames written since the last merge into one (zstd JSONL only).

        Called between turns, with every event stored: the frames hold nothing a crash could
        tear, and one frame compresses far better than many (docs/store.md#zstd-framing).
        The log is replaced atomically (temporary file, fsync, rename, directory fsync).

        Returns:
            The bytes saved (0: nothing to merge, or the backend has no frames).

        Raises:
            StoreError: if the merged file cannot be written (the log is unchanged).
        """
        ...

    def write_snapshot(self, session_id: str, events: int, body: bytes) -> bool:
        """Bind an encoded checkpoint to the log prefix of `events` events and store it.

        The prefix must be exactly what this backend stored last for the session (the
        writer calls this right after a flush). Not durable: a lost snapshot is ignored.

        Returns:
            Whether a snapshot was written (False: this backend keeps none, or it does not
            know the log's end).

        Raises:
            StoreError: if the snapshot cannot be written (the log is untouched).
        """
        ...

    def list_headers(self) -> list[SessionHeader | DamagedLog]:
        """Return the headers of every materialized session.

        A log whose header cannot be read (damaged, missing, an id stored twice) is a
        `DamagedLog` entry in its place, so one damaged session never hides the others.
        """
        ...

    def lock(self, session_id: str, *, cwd: str | None) -> Callable[[], None]:
        """Take the single-writer lock of a session; return the function that releases it.

        Args:
            session_id: the session.
            cwd: where a not-yet-stored session will live (JSONL); ignored if it exists.

        Raises:
            SessionLockedError: if another writer holds it.
        """
        ...
