"""Fork: a new session seeded with a closed-turn prefix of another (session-spec 5.2)."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import SessionForkError
from ._event import Event
from ._header import SessionHeader
from ._json import MAX_SAFE_INTEGER
from ._vocabulary import TURN_END, TURN_START


def fork_seed(events: Sequence[Event], *, session_id: str, boundary: int | None = None) -> list[Event]:
    """Return the events a fork child inherits: `events[0..boundary]`, inclusive.

    Args:
        events: the source log.
        session_id: the source id, for messages.
        boundary: the last inherited seq; defaults to the last event. An empty source with no
            boundary forks an empty child.

    Returns:
        The seed (events are immutable, so they are shared, not copied).

    Raises:
        SessionForkError: `INVALID_BOUNDARY` if the boundary is not a non-negative safe integer
            or does not exist; `OPEN_TURN` if the prefix ends inside an open turn.
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
    for event in reversed(events[: boundary + 1]):
        if event.type == TURN_END:
            break
        if event.type == TURN_START:
            raise SessionForkError(
                f'fork boundary {boundary} of session "{session_id}" ends inside open turn '
                f"{event.data.get('turn')}; pick the seq of a turn/end (`duraloop show {session_id} "
                "--events` lists each event's seq)",
                code="OPEN_TURN",
            )
    return list(events[: boundary + 1])


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
