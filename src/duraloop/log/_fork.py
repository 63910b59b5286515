"""Fork: a new session seeded with a prefix of another (docs/recovery.md#fork).

dsh forks only at a closed-turn boundary (`fork_seed` keeps that rule). duraloop's stores also
cut inside a turn (`close_open_turn=True`): the child's prefix is then closed with the very
closers crash repair appends (`interrupted_turn_closers`), which is how a session whose
closed history has unanswered calls is rescued. A default fork of a session whose last turn
is open cuts at the end of the last closed turn (`closed_history_boundary`); where turns
begin and end is `_turns.py`'s answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import SessionForkError
from ._event import Event
from ._header import SessionHeader
from ._json import MAX_SAFE_INTEGER
from ._repair import interrupted_turn_closers
from ._turns import last_turn_end, open_turn_start


def closed_history_boundary(events: Sequence[Event], *, session_id: str) -> int | None:
    """Return the default fork boundary: the last event, or the last closed turn's end.

    A fork never invents closers for a turn that may still be running: when the final turn
    is open, the default cut is the `turn/end` before it.

    Args:
        events: the source log.
        session_id: the source id, for messages.

    Returns:
        The boundary, or None for an empty source (an empty child).

    Raises:
        SessionForkError: `OPEN_TURN` if the final turn is open and no turn before it closed.
    """
    start = open_turn_start(events)
    if start is None:
        return len(events) - 1 if events else None
    end = last_turn_end(events, before=start)
    if end is not None:
        return end
    raise SessionForkError(
        f'session "{session_id}" has no closed turn to fork yet: its only turn '
        f"{events[start].data.get('turn')} is open; wait for it to end, or pick a seq inside it "
        f"with --at once no process writes the session (`duraloop show {session_id} --events` "
        "lists each event's seq)",
        code="OPEN_TURN",
    )


def fork_seed(
    events: Sequence[Event],
    *,
    session_id: str,
    boundary: int | None = None,
    close_open_turn: bool = False,
) -> list[Event]:
    """Return the events a fork child inherits: `events[0..boundary]`, inclusive.

    Args:
        events: the source log.
        session_id: the source id, for messages.
        boundary: the last inherited seq; defaults to the last event. An empty source with no
            boundary forks an empty child.
        close_open_turn: accept a prefix that ends inside a turn and append crash repair's
            closers to it (recovery results, `step/end`, `turn/end {interrupted}`), numbered
            right after the boundary.

    Returns:
        The seed (events are immutable, so they are shared, not copied).

    Raises:
        SessionForkError: `INVALID_BOUNDARY` if the boundary is not a non-negative safe integer
            or does not exist; `OPEN_TURN` if the prefix ends inside an open turn and
            `close_open_turn` is False.
    """
    if boundary is None:
        if not events:
            return []
        boundary = len(events) - 1
    if type(boundary) is not int or not 0 <= boundary <= MAX_SAFE_INTEGER:
        raise SessionForkError(
            f"fork boundary must be a non-negative safe integer, got {boundary!r}",
            code="INVALID_BOUNDARY",
        )
    if boundary >= len(events):
        last = str(len(events) - 1) if events else "none"
        raise SessionForkError(
            f'fork boundary {boundary} does not exist in session "{session_id}" (last seq: {last})',
            code="INVALID_BOUNDARY",
        )
    if events[boundary].seq != boundary:
        raise SessionForkError(
            f"fork boundary {boundary} does not match a contiguous event seq",
            code="INVALID_BOUNDARY",
        )
    prefix = list(events[: boundary + 1])
    if close_open_turn:
        return prefix + interrupted_turn_closers(prefix, keep_paused=False)
    start = open_turn_start(prefix)
    if start is not None:
        raise SessionForkError(
            f'fork boundary {boundary} of session "{session_id}" ends inside open turn '
            f"{prefix[start].data.get('turn')}; pick the seq of a turn/end (`duraloop show "
            f"{session_id} --events` lists each event's seq)",
            code="OPEN_TURN",
        )
    return prefix


def fork_header(
    parent: SessionHeader, *, child_id: str, seed_length: int, created_at: int
) -> SessionHeader:
    """Return a fork child's header: fresh id and time, the parent's cwd, lineage fields."""
    return SessionHeader(
        id=child_id,
        created_at=created_at,
        cwd=parent.cwd,
        parent_session=parent.id,
        seed_length=seed_length,
    )
