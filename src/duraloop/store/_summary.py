"""One line of `SessionStore.list()`: what a stored session holds, read without repair."""

from __future__ import annotations

from dataclasses import dataclass, replace

from duraloop.errors import CorruptLogError, SessionFormatUnsupportedError
from duraloop.log import (
    SessionHeader,
    last_turn_boundary,
    pending_approval,
    session_title,
    turn_count,
)
from duraloop.log import vocabulary as v

from ._backend import DamagedLog, StorageBackend, StoredLog
from ._validation import judge, readable


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One line of `SessionStore.list()`.

    Args:
        id: the session id.
        created_at: creation time, epoch milliseconds.
        cwd: the working directory, or None.
        turn_count: the number of `turn/start` events.
        last_turn_end: the last turn's end reason kind, "paused" if it waits for an approval
            (docs/approvals.md#pausing), "open" if it has not ended otherwise, or "none" if
            there is no turn.
        event_count: the number of stored events.
        parent_session: the fork parent, or None.
        damaged: why the log cannot be read (short, no path), or None for a readable log;
            a damaged row keeps what its header told (`created_at` 0 when the header is
            unreadable too) and zero counts.
        updated_at: the last event's time (epoch milliseconds), or None without events.
        title: the first user message's text, cut (`log.session_title`), or None.
        path: the log file (JSONL stores), or None.
    """

    id: str
    created_at: int
    cwd: str | None
    turn_count: int
    last_turn_end: str
    event_count: int
    parent_session: str | None
    damaged: str | None = None
    updated_at: int | None = None
    title: str | None = None
    path: str | None = None

    @property
    def status(self) -> str:
        """`damaged: <reason>` for a damaged log, else the last turn's end (`last_turn_end`)."""
        return self.last_turn_end if self.damaged is None else f"damaged: {self.damaged}"

    def to_json(self) -> dict[str, object]:
        """Return the row as `duraloop ls --json` prints it (camelCase keys).

        Returns:
            `{"id", "createdAt", "cwd", "turns", "lastTurnEnd", "events", "parentSession"}`,
            in that order, plus `"damaged"` for a damaged log.
        """
        row: dict[str, object] = {
            "id": self.id,
            "createdAt": self.created_at,
            "cwd": self.cwd,
            "turns": self.turn_count,
            "lastTurnEnd": self.last_turn_end,
            "events": self.event_count,
            "parentSession": self.parent_session,
        }
        if self.damaged is not None:
            row["damaged"] = self.damaged
        return row


def damaged_summary(
    session_id: str, reason: str, *, header: SessionHeader | None = None, path: str | None = None
) -> SessionSummary:
    """Return the `SessionStore.list()` row of a log that cannot be read.

    Args:
        session_id: the id (from the header, or from where the log is stored).
        reason: what is wrong, short.
        header: the header, when it could still be read.
        path: the raw artifact, when known.

    Returns:
        A summary with zero counts and `damaged` set.
    """
    return SessionSummary(
        id=session_id,
        created_at=header.created_at if header is not None else 0,
        cwd=header.cwd if header is not None else None,
        turn_count=0,
        last_turn_end="unknown",
        event_count=0,
        parent_session=header.parent_session if header is not None else None,
        damaged=reason,
        path=path,
    )


def summarize(stored: StoredLog) -> SessionSummary:
    """Summarize one stored log for `SessionStore.list()`.

    Args:
        stored: the log as its backend read it (no repair).

    Returns:
        Its id, creation time, cwd, turn and event counts, last turn end and fork parent.
    """
    boundary = last_turn_boundary(stored.events)
    if boundary is None:
        last = "none"
    elif stored.events[boundary].type == v.TURN_START:
        last = "paused" if pending_approval(stored.events) is not None else "open"
    else:
        data = stored.events[boundary].data
        reason = data.get("reason") if isinstance(data, dict) else None
        last = str(reason.get("kind")) if isinstance(reason, dict) else "unknown"
    header = stored.header
    return SessionSummary(
        id=header.id,
        created_at=header.created_at,
        cwd=header.cwd,
        turn_count=turn_count(stored.events),
        last_turn_end=last,
        event_count=len(stored.events),
        parent_session=header.parent_session,
        updated_at=stored.events[-1].time if stored.events else None,
        title=session_title(stored.events),
        path=stored.path,
    )


def list_summaries(backend: StorageBackend) -> list[SessionSummary]:
    """Summarize every session a backend stores, as `SessionStore.list()` returns them.

    Each log is read and judged as every read is; one that cannot be read is still a row,
    with `damaged` saying why (one damaged session never hides the others).

    Args:
        backend: the store's backend.

    Returns:
        One summary per stored session: readable ones oldest first, then damaged ones.
    """
    summaries: list[SessionSummary] = []
    for entry in backend.list_headers():
        if isinstance(entry, DamagedLog):
            summaries.append(damaged_summary(entry.session_id, entry.reason, path=entry.path))
            continue
        try:
            stored = backend.read(entry.id)
            events = readable(stored)
            judge(stored.header, events, path=stored.path)
        except (CorruptLogError, SessionFormatUnsupportedError) as exc:
            path = exc.path if isinstance(exc, CorruptLogError) else None
            summaries.append(damaged_summary(entry.id, _short_reason(exc), header=entry, path=path))
        else:
            summaries.append(summarize(replace(stored, events=events)))
    return sorted(
        summaries, key=lambda summary: (summary.damaged is not None, summary.created_at, summary.id)
    )


def _short_reason(exc: CorruptLogError | SessionFormatUnsupportedError) -> str:
    """Return the error's message without the log path (a listing names the session)."""
    text = str(exc)
    path = exc.path if isinstance(exc, CorruptLogError) else None
    return text.replace(f" of {path}", "") if path else text
