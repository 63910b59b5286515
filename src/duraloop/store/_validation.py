"""What every store read refuses: the one validation `duraloop check` reports (`check_log`).

Every path that loads a log for use (read, inspect, list, load, fork) judges it once with
`validate_log` and refuses damage with a `CorruptLogError` naming the first problem, so
`show`, `ls`, `resume`, `run` and `check` agree on a corrupt-but-parseable log. A log whose
closed history has unanswered tool calls is readable (`show`, `check`, `ls`), but it cannot be
continued: `refuse_unanswered` raises `UnpairedHistoryError` with the rescue command, before
anything is written. `refuse_closing_unanswered` keeps `SessionStore.append` from writing such
history.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from duraloop.errors import CorruptLogError, InvariantError, UnpairedHistoryError
from duraloop.log import (
    Event,
    LogCheckReport,
    PendingToolCalls,
    Session,
    SessionHeader,
    UnansweredStep,
    readable_events,
    rescue_command,
    validate_log,
)

from ._backend import StoredLog

_MAX_PROBLEM_CHARS = 500
"""A problem quotes log data; a message carries at most this much of it."""


def readable(stored: StoredLog) -> list[Event]:
    """Return the stored events as every read sees them: legacy imported, vocabulary checked.

    Raises:
        SessionFormatUnsupportedError: for rejected legacy vocabulary or an unknown type.
        CorruptLogError: if a legacy shape is malformed.
    """
    return readable_events(stored.events, session_id=stored.header.id, path=stored.path)


def judge(
    header: SessionHeader, events: list[Event], *, path: str | None
) -> tuple[LogCheckReport, Session]:
    """Validate a stored log as `check_log` does; refuse damage.

    Args:
        header: the stored header.
        events: the readable stored events (legacy imported, vocabulary checked).
        path: the log file, for messages.

    Returns:
        The report, and the session seeded with the events plus repair's closers (what a
        resume continues).

    Raises:
        CorruptLogError: if the log breaks a rule `check` enforces (the message names the
            first problem and how to list them all).
    """
    report, session = validate_log(header.id, events, header=header)
    if report.damage or session is None:
        problem = report.damage[0] if report.damage else "the log does not validate"
        if len(problem) > _MAX_PROBLEM_CHARS:
            problem = problem[:_MAX_PROBLEM_CHARS] + "…"
        more = len(report.damage) - 1
        raise CorruptLogError(
            f'session "{header.id}" is damaged: {problem}'
            + (f" (and {more} more problem(s))" if more > 0 else "")
            + f"; `duraloop check {shlex.quote(header.id)}` reports it; nothing was changed",
            path=path,
        )
    return report, session


def refuse_unanswered(unanswered: Sequence[UnansweredStep], *, session_id: str) -> None:
    """Refuse to continue a log whose closed history has unanswered tool calls.

    Args:
        unanswered: the log's closed steps with unanswered calls (`LogCheckReport.unanswered`).
        session_id: the session.

    Raises:
        UnpairedHistoryError: naming the first damaged step, its call ids and the rescue.
    """
    if not unanswered:
        return
    first = unanswered[0]
    raise UnpairedHistoryError(
        session_id=session_id,
        turn=first.turn,
        step=first.step,
        call_ids=first.call_ids,
        rescue_seq=first.rescue_seq,
        rescue=rescue_command(session_id, first.rescue_seq),
        damaged_steps=len(unanswered),
    )


def refuse_closing_unanswered(
    session_id: str, stored: Sequence[Event], batch: Sequence[Event]
) -> None:
    """Refuse a batch with a `step/end` or `turn/end` that closes calls left unanswered.

    The stored events feed the shared pending-call tracker, then each batch event is checked
    before it is fed.

    Args:
        session_id: for messages.
        stored: the stored events, in seq order.
        batch: the events to append.

    Raises:
        InvariantError: naming the closing event and the unanswered call ids.
    """
    tracker = PendingToolCalls()
    for event in stored:
        tracker.observe(event)
    for event in batch:
        if tracker.closes_unanswered(event):
            ids = ", ".join(repr(call.call_id[:80]) for call in tracker.pending()[:5])
            raise InvariantError(
                f'session "{session_id}": {event.type} at seq {event.seq} would close its step '
                f"with tool call(s) {ids} unanswered; append a tool/result for each first (a "
                "recovery result: TOOL_OUTCOME_UNKNOWN if its tool/call was recorded, else "
                "TOOL_NOT_STARTED); nothing was appended"
            )
        tracker.observe(event)
