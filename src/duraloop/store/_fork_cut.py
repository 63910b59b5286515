"""Where a fork cuts its source, and when a live writer forbids the cut (docs/recovery.md#fork).

The source is read as stored (no closers) and validated like every load. A default fork cuts
at the last event, or, when the final turn is open, at the end of the last closed turn: a
fork never records a call that may still be running as `TOOL_OUTCOME_UNKNOWN`. An explicit
cut inside a turn is closed with crash repair's closers; inside the open final turn that is
allowed only when no writer holds the session (its lock is taken for the cut), since only
then is the turn really interrupted. A cut whose prefix holds a step closed with calls
unanswered is refused with the rescue cut, since the child could not be continued either.
"""

from __future__ import annotations

from duraloop.errors import SessionForkError, SessionNotFoundError
from duraloop.log import Event, SessionHeader, fork_seed
from duraloop.log._fork import closed_history_boundary
from duraloop.log._turns import open_turn_start, scan_turns

from ._backend import StorageBackend
from ._validation import judge, readable, refuse_unanswered


def fork_cut(
    backend: StorageBackend, source_id: str, *, boundary: int | None
) -> tuple[SessionHeader, list[Event]]:
    """Return the source header and the child's seed for a fork of `source_id`.

    Args:
        backend: the store's backend.
        source_id: the session to fork.
        boundary: the last inherited seq (inclusive), or None for the default cut.

    Returns:
        The source header and the seed: a prefix of the source, plus closers when the cut
        lies inside a turn.

    Raises:
        SessionForkError: `SESSION_NOT_FOUND`, `INVALID_BOUNDARY`, or `OPEN_TURN` (a default
            fork of a session whose only turn is open).
        SessionLockedError: if the cut lies inside the open final turn while a writer holds
            the session.
        UnpairedHistoryError: if the prefix holds a step closed with calls unanswered.
        CorruptLogError: if the source log is damaged.
    """
    header, events = _read(backend, source_id)
    if boundary is None:
        boundary = closed_history_boundary(events, session_id=source_id)
        if boundary is None:
            return header, []
    start = open_turn_start(events)
    if start is not None and isinstance(boundary, int) and start <= boundary < len(events):
        # Inside the open final turn: only a crashed turn may be closed. Holding the lock
        # proves no writer is running it (SessionLockedError otherwise); read it again under
        # the lock, since the writer may have written more before it ended.
        release = backend.lock(source_id, cwd=header.cwd)
        try:
            header, events = _read(backend, source_id)
        finally:
            release()
    seed = fork_seed(events, session_id=source_id, boundary=boundary, close_open_turn=True)
    refuse_unanswered(scan_turns(seed).unanswered, session_id=source_id)
    return header, seed


def _read(backend: StorageBackend, source_id: str) -> tuple[SessionHeader, list[Event]]:
    try:
        stored = backend.read(source_id)
    except SessionNotFoundError as exc:
        raise SessionForkError(
            f'session "{source_id}" not found', code="SESSION_NOT_FOUND"
        ) from exc
    events = readable(stored)
    judge(stored.header, events, path=stored.path)
    return stored.header, events
