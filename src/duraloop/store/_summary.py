"""One line of `SessionStore.list()`: what a stored session holds, read without repair."""

from __future__ import annotations

from dataclasses import dataclass

from duraloop.log import vocabulary as v

from ._backend import StoredLog


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One line of `SessionStore.list()`.

    Args:
        id: the session id.
        created_at: creation time, epoch milliseconds.
        cwd: the working directory, or None.
        turn_count: the number of `turn/start` events.
        last_turn_end: the last turn's end reason kind, or "open" if it has not ended
            (or "none" if there is no turn).
        event_count: the number of stored events.
        parent_session: the fork parent, or None.
    """

    id: str
    created_at: int
    cwd: str | None
    turn_count: int
    last_turn_end: str
    event_count: int
    parent_session: str | None


def summarize(stored: StoredLog) -> SessionSummary:
    """Summarize one stored log for `SessionStore.list()`.

    Args:
        stored: the log as its backend read it (no repair).

    Returns:
        Its id, creation time, cwd, turn and event counts, last turn end and fork parent.
    """
    turn_count = 0
    last = "none"
    for event in stored.events:
        if event.type == v.TURN_START:
            turn_count += 1
            last = "open"
        elif event.type == v.TURN_END:
            reason = event.data.get("reason") if isinstance(event.data, dict) else None
            last = str(reason.get("kind")) if isinstance(reason, dict) else "unknown"
    header = stored.header
    return SessionSummary(
        id=header.id,
        created_at=header.created_at,
        cwd=header.cwd,
        turn_count=turn_count,
        last_turn_end=last,
        event_count=len(stored.events),
        parent_session=header.parent_session,
    )
