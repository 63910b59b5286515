"""A read-only validity check of a whole log: what `duraloop check` reports."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import EventRejectedError, PairingError
from ._event import Event
from ._pairing import check_pairing
from ._repair import interrupted_turn_closers
from ._session import Session
from ._vocabulary import TURN_END, TURN_START


@dataclass(frozen=True)
class LogCheckReport:
    """The result of `check_log`.

    Args:
        event_count: events in the log.
        turn_count: `turn/start` events.
        open_turn: the number of an open final turn (resume closes it), or None.
        closers_needed: how many closers crash repair would append.
        problems: what is wrong; empty when the log is valid.
    """

    event_count: int
    turn_count: int
    open_turn: int | None
    closers_needed: int
    problems: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        """Whether the log passed every check."""
        return not self.problems


def check_log(session_id: str, events: Sequence[Event]) -> LogCheckReport:
    """Check envelope, message shapes, surface, relational invariants and provider pairing.

    An open final turn is valid: the check runs on the log plus the closers crash repair
    would append, so pairing is judged on what a resumed session would send.

    Args:
        session_id: for messages.
        events: the stored log, without closers.

    Returns:
        A report; `problems` lists each failure found.
    """
    turns = sum(1 for event in events if event.type == TURN_START)
    open_turn: int | None = None
    for event in reversed(events):
        if event.type == TURN_END:
            break
        if event.type == TURN_START:
            # A damaged `"turn": "x"` is reported by the checks below, not raised here.
            turn = event.data.get("turn") if isinstance(event.data, dict) else None
            open_turn = turn if type(turn) is int else None
            break
    problems: list[str] = []
    closers: list[Event] = []
    try:
        closers = interrupted_turn_closers(events)
        session = Session(session_id, seed=[*events, *closers], check_invariants=True)
    except EventRejectedError as exc:
        problems.append(str(exc))
    else:
        try:
            check_pairing(session.derive_messages())
        except PairingError as exc:
            problems.append(f"provider pairing: {exc}")
    return LogCheckReport(
        event_count=len(events),
        turn_count=turns,
        open_turn=open_turn,
        closers_needed=len(closers),
        problems=problems,
    )
