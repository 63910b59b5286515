"""Where a fork cuts its source, when a live writer forbids the cut, and the child's one write.

See docs/recovery.md#fork.

The source is read as stored (no closers) and validated like every load. A default fork cuts
at the last event, or, when the final turn is open, at the end of the last closed turn: a
fork never records a call that may still be running as `TOOL_OUTCOME_UNKNOWN`. An explicit
cut inside a turn is closed with crash repair's closers; inside the open final turn that is
allowed only when no writer holds the session (its lock is taken for the cut), since only
then is the turn really interrupted. A cut whose prefix holds a step closed with calls
unanswered is refused with the rescue cut, since the child could not be continued either.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager

from duraloop.errors import SessionExistsError, SessionForkError, SessionNotFoundError
from duraloop.log import (
    Event,
    Session,
    SessionHeader,
    closed_history_boundary,
    fork_header,
    fork_seed,
    now_ms,
    open_turn_start,
    scan_turns,
)

from ._backend import StorageBackend
from ._validation import judge, readable, refuse_unanswered

logger = logging.getLogger(__name__)


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


def fork_session(
    backend: StorageBackend,
    open_writer: Callable[[Session], AbstractContextManager[object]],
    source_id: str,
    *,
    boundary: int | None,
    child_id: str | None,
) -> str:
    """Persist a new session seeded with the cut of `source_id`; see `SessionStore.fork`.

    Args:
        backend: the store's backend.
        open_writer: the store's `open_writer`; the child is written by opening and closing
            one writer (its seed plus `session/end-seed`, once).
        source_id: the session to fork.
        boundary: the last inherited seq (inclusive), or None for the default cut.
        child_id: the child id; a UUID4 is minted when None.

    Returns:
        The child id.

    Raises:
        SessionForkError, SessionLockedError, UnpairedHistoryError, CorruptLogError: as
            `SessionStore.fork`.
    """
    if child_id is not None and backend.exists(child_id):
        raise SessionForkError(
            f'session "{child_id}" already exists', code="SESSION_ALREADY_EXISTS"
        )
    source, seed = fork_cut(backend, source_id, boundary=boundary)
    child = child_id if child_id is not None else str(uuid.uuid4())
    header = fork_header(source, child_id=child, seed_length=len(seed), created_at=now_ms())
    session = Session(child, seed=seed, header=header)
    try:
        with open_writer(session):
            pass
    except SessionExistsError as exc:
        raise SessionForkError(
            f'session "{child}" already exists', code="SESSION_ALREADY_EXISTS"
        ) from exc
    logger.info("forked session %s from %s at %d events", child, source_id, len(seed))
    return child


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
