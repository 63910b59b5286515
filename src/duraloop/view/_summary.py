"""The Summary of one session and the rows of the sessions list (docs/view.md#api)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from duraloop.log import Event, Price, SessionHeader, pending_approval
from duraloop.store import SessionSummary

from ._cut import MAX_ARGUMENTS_CHARS, cut
from ._shapes import Turn
from ._timeline import TimelineFold

_OPEN_STATES = {"paused": "paused", "open": "open"}


def header_json(header: SessionHeader) -> dict[str, Any]:
    """Return a session header as the API gives it (snake_case keys)."""
    return {
        "id": header.id,
        "created": header.created_at,
        "cwd": header.cwd,
        "parent": header.parent_session,
        "seed_length": header.seed_length,
        "origin": header.origin,
        "agent_preset": header.agent_preset,
        "version": header.version,
    }


def session_row(summary: SessionSummary) -> dict[str, Any]:
    """Return one Row of `GET /api/sessions` (docs/view.md#sessions) from a `store.list()` line.

    Args:
        summary: the line `SessionStore.list()` gave.

    Returns:
        `{"id", "created", "updated", "events", "turns", "last_reason", "state", "damaged",
        "parent", "size_bytes", "title"}`.
    """
    if summary.damaged is not None:
        state, last_reason = "damaged", None
    elif summary.last_turn_end in _OPEN_STATES:
        state, last_reason = _OPEN_STATES[summary.last_turn_end], None
    else:
        state = "closed"
        last_reason = None if summary.last_turn_end == "none" else summary.last_turn_end
    return {
        "id": summary.id,
        "created": summary.created_at or None,
        "updated": summary.updated_at,
        "events": summary.event_count,
        "turns": summary.turn_count,
        "last_reason": last_reason,
        "state": state,
        "damaged": " ".join(summary.damaged.split()) if summary.damaged is not None else None,
        "parent": summary.parent_session,
        "size_bytes": _size(summary.path),
        "title": summary.title,
    }


def session_rows(summaries: Iterable[SessionSummary]) -> list[dict[str, Any]]:
    """Return the Rows of `GET /api/sessions`, newest first (damaged ones by their header)."""
    rows = [session_row(summary) for summary in summaries]
    rows.sort(key=lambda row: (row["created"] or 0, row["id"]), reverse=True)
    return rows


def _size(path: str | None) -> int | None:
    if path is None:
        return None
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def build_summary(
    header: SessionHeader,
    events: Sequence[Event],
    *,
    children: list[str],
    prices: Mapping[str, Price] | None = None,
) -> dict[str, Any]:
    """Return the Summary of `GET /api/sessions/{id}` (docs/view.md#summary), in one pass.

    Args:
        header: the session's header.
        events: its committed events, as stored (an open final turn stays open).
        children: the ids of the sessions forked from it.
        prices: the price table, for each turn's cost (None: cost is null).

    Returns:
        `{"id", "header", "events", "state", "damaged", "children", "pending", "turns"}`.
    """
    fold = TimelineFold(prices)
    for event in events:
        fold.feed(event)
    fold.close()
    pending = pending_approval(events) if fold.open_turn is not None else None
    asks = []
    if pending is not None and not pending.decided:
        asks.append(
            {
                "call_id": pending.call_id,
                "tool": pending.tool_name,
                "arguments": cut(pending.arguments, MAX_ARGUMENTS_CHARS),
                "reason": pending.reason or None,
                "seq": pending.asked_seq,
                "turn": pending.turn,
                "step": pending.step,
            }
        )
    if fold.open_turn is None:
        state = "closed"
    else:
        state = "paused" if pending is not None else "open"
    if pending is not None and fold.open_turn is not None:
        _mark_paused(fold.open_turn, pending.call_id, decided=pending.decided)
    return {
        "id": header.id,
        "header": header_json(header),
        "events": len(events),
        "state": state,
        "damaged": None,
        "last_reason": fold.last_reason if state == "closed" else None,
        "children": children,
        "pending": asks,
        "turns": fold.turns,
    }


def _mark_paused(turn: Turn, call_id: str, *, decided: bool) -> None:
    """Mark the open turn paused and its waiting call (docs/view.md#summary)."""
    turn.paused = True
    for step in turn.steps:
        for call in step.calls:
            if call.call_id == call_id:
                call.waiting = "resume" if decided else "approval"


def damaged_summary(header: SessionHeader | None, session_id: str, reason: str) -> dict[str, Any]:
    """Return the Summary of a session whose log cannot be read (`state` "damaged")."""
    return {
        "id": session_id,
        "header": header_json(header) if header is not None else None,
        "events": 0,
        "state": "damaged",
        "damaged": " ".join(reason.split()),
        "last_reason": None,
        "children": [],
        "pending": [],
        "turns": [],
    }
