"""Claiming a stored log for a writer (docs/store.md#coordination, live write path (b)).

A live session may write a persisted id only if it resumes it: its seed reproduces the
stored log exactly and its cwd matches. The full check reads the log back and compares every
event. `RememberedLoads` makes the common case cheap: `SessionStore.load` remembers what it
returned with the backend's revision token; if the token is unchanged at `open_writer`
(JSONL: one `stat`), the remembered events ARE the stored log, and comparing against them is
the same check without the read. List equality tries identity first, so a session seeded from
the loaded events costs a walk over pointers.

A JSONL token is (device, inode, size, mtime, ctime), as good as the filesystem's clock: a
same-size rewrite by a process that ignores the session lock, within one timestamp tick, would
go unnoticed. Every duraloop writer takes the lock and appends (the size changes).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from duraloop.errors import CorruptLogError, EventRejectedError, SessionExistsError
from duraloop.log import Event, LazyEvents, Session, same_events
from duraloop.log import final_turn_closers as repair_final_turn
from duraloop.log import vocabulary as v

from ._backend import StorageBackend
from ._validation import readable

MAX_REMEMBERED_LOADS = 4
"""Loads a store remembers for a read-free claim; the oldest is dropped first."""


@dataclass(frozen=True, slots=True)
class RememberedLoad:
    """What a load returned, tied to the revision of the stored log it came from.

    Args:
        revision: the backend's token right after the load's repair.
        cwd: the stored header's cwd.
        events: the stored events (repair included): the very objects the load returned.
    """

    revision: Hashable
    cwd: str | None
    events: Sequence[Event]


class RememberedLoads:
    """The last `MAX_REMEMBERED_LOADS` loads of one store, by session id."""

    def __init__(self) -> None:
        self._loads: dict[str, RememberedLoad] = {}

    def remember(self, session_id: str, load: RememberedLoad) -> None:
        """Remember `load` for the id, replacing an older one and evicting the oldest."""
        self._loads.pop(session_id, None)
        while len(self._loads) >= MAX_REMEMBERED_LOADS:
            del self._loads[next(iter(self._loads))]
        self._loads[session_id] = load

    def take(self, session_id: str) -> RememberedLoad | None:
        """Return and forget the remembered load of the id, if any."""
        return self._loads.pop(session_id, None)


def check_claim(session: Session, *, cwd: str | None, stored: Sequence[Event]) -> None:
    """Check that a live session may write over the stored log `stored`.

    Args:
        session: the live session.
        cwd: the stored header's cwd.
        stored: the stored events, in seq order.

    Raises:
        SessionExistsError: if the session is not a resume of the stored log: it is not
            seeded, its seed is shorter or differs, or its cwd differs.
    """
    events = session.events
    count = len(stored)
    seeded = session.first_live_seq > 0 or (bool(events) and events[0].type == v.END_SEED)
    if (
        not seeded
        or session.first_live_seq < count
        or cwd != session.header.cwd
        or not same_events(events, count, stored)
    ):
        raise SessionExistsError(
            f'session "{session.id}" already has a persisted log; continue it with '
            f'resume_session("{session.id}", ...) or open_session("{session.id}", ...) from '
            "duraloop.loop, which load, repair and claim it"
        )


def claim(backend: StorageBackend, loads: RememberedLoads, session: Session) -> int:
    """Claim the stored log of `session` for a new writer; return where the writer starts.

    A remembered load whose revision is unchanged is compared without a read; otherwise the
    stored log is read and compared, and a torn tail is cut.

    Args:
        backend: the store's backend (the session's lock is held).
        loads: the store's remembered loads (the session's entry is taken).
        session: the live session.

    Returns:
        The number of stored events the writer must not write again (0 if none is stored).

    Raises:
        SessionExistsError: if the session is not a resume of the stored log (`check_claim`).
        CorruptLogError: if the stored log is damaged.
    """
    loaded = loads.take(session.id)
    if loaded is not None and backend.revision(session.id) == loaded.revision:
        check_claim(session, cwd=loaded.cwd, stored=loaded.events)
        return len(loaded.events)
    if not backend.exists(session.id):
        return 0
    stored = backend.read(session.id)
    check_claim(session, cwd=stored.header.cwd, stored=readable(stored))
    # Only the torn tail is cut (no closers: the live session writes its own). Events
    # recovered from a torn zstd frame go with it; the writer's first batch stores them again.
    if stored.torn is not None:
        backend.repair(session.id, stored.torn, [])
    return len(stored.events) - stored.recovered_events


def remember_load(
    backend: StorageBackend,
    loads: RememberedLoads,
    session_id: str,
    cwd: str | None,
    events: Sequence[Event],
) -> None:
    """Remember what a load returned, with the backend's revision right after its repair.

    Args:
        backend: the store's backend.
        loads: the store's remembered loads.
        session_id: the loaded session.
        cwd: the stored header's cwd.
        events: the events the load returned (copied: the list, not the events).
    """
    revision = backend.revision(session_id)
    if revision is not None:
        kept = events.copy() if isinstance(events, LazyEvents) else list(events)
        loads.remember(session_id, RememberedLoad(revision, cwd, kept))


def final_turn_closers(events: list[Event], *, path: str | None = None) -> list[Event]:
    """Return the closers of an interrupted final turn (`log` repair's `final_turn_closers`).

    Args:
        events: the stored, contiguous events.
        path: the log file, for error messages.

    Returns:
        The closers of an interrupted final turn, or `[]`.

    Raises:
        CorruptLogError: if the final turn's events are malformed (so no closer is written).
    """
    try:
        return repair_final_turn(events)
    except EventRejectedError as exc:
        raise CorruptLogError(
            f"the interrupted final turn cannot be repaired: {exc}", path=path
        ) from exc
