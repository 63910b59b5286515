"""The in-memory backend: the reference storage for tests and short-lived sessions.

It keeps each session's header and events in a dict. Writes are atomic by construction (a
repair is one step); the writer lock is per session id within this process.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from duraloop.errors import SessionExistsError, SessionLockedError, SessionNotFoundError, StoreError
from duraloop.log import Event, SessionHeader, encode_events_lines

from ._backend import DamagedLog, StoredLog, WriteReceipt
from ._writer import check_batch


def _deferred_receipt(batch: Sequence[Event]) -> WriteReceipt:
    """A receipt whose byte count (the batch's JSONL encoding) is computed only when asked.

    Nothing is encoded to store a batch in memory; counting its bytes would be the only
    encoding on the tool path, so `SessionWriter.statistics()` does it instead.
    """
    kept = list(batch)
    return WriteReceipt(0, 0, measure=lambda: len(encode_events_lines(kept)))


class MemoryBackend:
    """Session logs held in process memory; nothing survives the process."""

    def __init__(self) -> None:
        self._logs: dict[str, tuple[SessionHeader, list[Event]]] = {}
        self._locked: set[str] = set()
        self._store_id = uuid.uuid4().hex
        self._writes: dict[str, int] = {}

    def read(self, session_id: str) -> StoredLog:
        """Return a copy of the stored log; see `StorageBackend.read`."""
        try:
            header, events = self._logs[session_id]
        except KeyError:
            raise SessionNotFoundError(session_id) from None
        return StoredLog(header, list(events))

    def exists(self, session_id: str) -> bool:
        """Return whether the id has a stored log."""
        return session_id in self._logs

    def revision(self, session_id: str) -> str | None:
        """Return `memory:<store id>:<id>:<writes to the id>`; see `StorageBackend.revision`."""
        if session_id not in self._logs:
            return None
        return f"memory:{self._store_id}:{session_id}:{self._writes[session_id]}"

    def materialize(self, header: SessionHeader, batch: Sequence[Event]) -> WriteReceipt:
        """Store header and first batch; see `StorageBackend.materialize`."""
        if header.id in self._logs:
            raise SessionExistsError(
                f'session "{header.id}" already has a persisted log; resume it instead'
            )
        self._logs[header.id] = (header, list(batch))
        self._writes[header.id] = 1
        return _deferred_receipt(batch)

    def append(self, session_id: str, batch: Sequence[Event]) -> WriteReceipt:
        """Append one batch; see `StorageBackend.append`."""
        try:
            events = self._logs[session_id][1]
        except KeyError:
            raise SessionNotFoundError(session_id) from None
        events.extend(batch)
        self._writes[session_id] += 1
        return _deferred_receipt(batch)

    def repair(self, session_id: str, torn: int | None, events: Sequence[Event]) -> WriteReceipt:
        """Drop events from index `torn` on and append `events` in one step.

        See `StorageBackend.repair`.
        """
        try:
            stored = self._logs[session_id][1]
        except KeyError:
            raise SessionNotFoundError(session_id) from None
        if torn is not None and torn > len(stored):
            raise StoreError(f'the torn tail of session "{session_id}" changed since it was read')
        kept = len(stored) if torn is None else torn
        check_batch(session_id, events, kept)
        if torn is None and not events:
            return WriteReceipt(0, 0)
        del stored[kept:]
        stored.extend(events)
        self._writes[session_id] += 1
        return _deferred_receipt(events)

    def read_snapshot(self, session_id: str) -> None:
        """Keep no snapshots (see `StorageBackend.read_snapshot`): always None."""
        return None

    def merge_frames(self, session_id: str) -> int:
        """Store no frames (see `StorageBackend.merge_frames`): always 0."""
        return 0

    def write_snapshot(self, session_id: str, events: int, body: bytes) -> bool:
        """Keep no snapshots (see `StorageBackend.write_snapshot`): always False."""
        return False

    def list_headers(self) -> list[SessionHeader | DamagedLog]:
        """Return every stored header, in creation order."""
        return [header for header, _ in self._logs.values()]

    def lock(self, session_id: str, *, cwd: str | None) -> Callable[[], None]:
        """Take the per-id lock of this process; see `StorageBackend.lock`."""
        del cwd
        if session_id in self._locked:
            raise SessionLockedError(session_id, path=f"memory:{session_id}")
        self._locked.add(session_id)
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._locked.discard(session_id)

        return release
