"""The in-memory backend: the reference storage for tests and short-lived sessions.

It keeps each session's header and events in a dict. Writes are atomic by construction;
the writer lock is per session id within this process.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from duraloop.errors import SessionExistsError, SessionLockedError, SessionNotFoundError
from duraloop.log import Event, SessionHeader, encode_events_lines

from ._backend import DamagedLog, StoredLog, WriteReceipt


class MemoryBackend:
    """Session logs held in process memory; nothing survives the process."""

    def __init__(self) -> None:
        self._logs: dict[str, tuple[SessionHeader, list[Event]]] = {}
        self._locked: set[str] = set()

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

    def revision(self, session_id: str) -> Hashable | None:
        """Return None: a memory read is already cheap; see `StorageBackend.revision`."""
        del session_id
        return None

    def materialize(self, header: SessionHeader, batch: Sequence[Event]) -> WriteReceipt:
        """Store header and first batch; see `StorageBackend.materialize`."""
        if header.id in self._logs:
            raise SessionExistsError(f'session "{header.id}" already has a persisted log; resume it instead')
        self._logs[header.id] = (header, list(batch))
        return WriteReceipt(len(encode_events_lines(list(batch))), 0)

    def append(self, session_id: str, batch: Sequence[Event]) -> WriteReceipt:
        """Append one batch; see `StorageBackend.append`."""
        try:
            events = self._logs[session_id][1]
        except KeyError:
            raise SessionNotFoundError(session_id) from None
        events.extend(batch)
        return WriteReceipt(len(encode_events_lines(list(batch))), 0)

    def truncate(self, session_id: str, torn: int) -> int:
        """Drop events from index `torn` on; see `StorageBackend.truncate`."""
        events = self._logs[session_id][1]
        removed = max(len(events) - torn, 0)
        del events[torn:]
        return removed

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
