"""Turn boundaries: which turn of a log is open, which is the last.

See docs/recovery.md#crash-tail-repair.

A turn runs from its `turn/start` to its `turn/end`; only the final turn of a log can be
open. Crash repair, the check, fork, a store's claim and its listing, the loop and the chat
all ask these questions, and this module is where they are answered: the backward walks
(`open_turn_start`, `last_turn_boundary`, `last_turn_start`, `last_turn_and_latest`,
`last_turn_end`, `step_start`), which read only the end of the log; `turn_starts` and
`turn_count`; and the one forward pass of the pending-call tracker (`scan_turns`), which
also finds the open step and the closed steps left with calls unanswered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import EventRejectedError
from ._event import Event
from ._pending import PendingCall, PendingToolCalls, UnansweredStep
from .vocabulary import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
)

_CLOSING = frozenset({STEP_END, TURN_END})
_PLAIN = frozenset({ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT})


def last_turn_boundary(events: Sequence[Event]) -> int | None:
    """Return the index of the last `turn/start` or `turn/end`, or None if there is none.

    Args:
        events: a log in seq order.

    Returns:
        The index; the final turn is open exactly when that event is a `turn/start`.
    """
    for index in range(len(events) - 1, -1, -1):
        kind = events[index].type
        if kind in (TURN_START, TURN_END):
            return index
    return None


def open_turn_start(events: Sequence[Event]) -> int | None:
    """Return the index of the open final turn's `turn/start`, or None if every turn is closed.

    Args:
        events: a log in seq order.

    Returns:
        The index of the `turn/start` that no `turn/end` follows, or None.
    """
    for index in range(len(events) - 1, -1, -1):
        kind = events[index].type
        if kind == TURN_END:
            return None
        if kind == TURN_START:
            return index
    return None


def open_turn_number(events: Sequence[Event]) -> int | None:
    """Return the number (`data.turn`) of the open final turn, or None.

    Args:
        events: a log in seq order.

    Returns:
        The open turn's number, or None when every turn is closed or the `turn/start` has
        no integer `turn`.
    """
    start = open_turn_start(events)
    if start is None:
        return None
    data = events[start].data
    turn = data.get("turn") if isinstance(data, dict) else None
    return turn if type(turn) is int else None


def last_turn_end(events: Sequence[Event], *, before: int) -> int | None:
    """Return the index of the last `turn/end` before index `before`, or None.

    Args:
        events: a log in seq order.
        before: the index to look before (exclusive), e.g. an open turn's `turn/start`.

    Returns:
        The index of the end of the last turn closed before `before`, or None.
    """
    for index in range(before - 1, -1, -1):
        if events[index].type == TURN_END:
            return index
    return None


def last_turn_start(events: Sequence[Event]) -> int | None:
    """Return the index of the last `turn/start`, open or closed, or None.

    Args:
        events: a log in seq order.

    Returns:
        The index of the latest turn's `turn/start`; its `data.turn` is the last turn number.
    """
    for index in range(len(events) - 1, -1, -1):
        if events[index].type == TURN_START:
            return index
    return None


def last_turn_and_latest(
    events: Sequence[Event], kinds: tuple[str, ...]
) -> tuple[int, dict[str, Event]]:
    """Return the last turn's number and the latest event of each of `kinds`, in one walk.

    The loop's resume reads these together (the last turn number and its request
    bookkeeping), so they are found by one backward walk that stops once it has them all.

    Args:
        events: a log in seq order.
        kinds: the event types wanted besides `turn/start` (not `turn/start` itself).

    Returns:
        The last `turn/start`'s number (0 before the first turn), and for each kind found
        its latest event.
    """
    last_turn = 0
    latest: dict[str, Event] = {}
    wanted = len(kinds)
    for event in reversed(events):
        kind = event.type
        if kind == TURN_START:
            if last_turn == 0:
                last_turn = int(event.data.get("turn", 0))
        elif kind in kinds and kind not in latest:
            latest[kind] = event
        if last_turn and len(latest) == wanted:
            break
    return last_turn, latest


def turn_starts(events: Sequence[Event]) -> list[int]:
    """Return the index of every `turn/start`, in log order."""
    return [index for index, event in enumerate(events) if event.type == TURN_START]


def step_start(events: Sequence[Event], *, turn: int, step: int) -> int | None:
    """Return the index of the latest `step/start` of turn `turn`, step `step`, or None.

    Args:
        events: a log in seq order.
        turn: the turn number.
        step: the step number within that turn.

    Returns:
        The index, searched backward from the end (a live step's start is near it).
    """
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event.type == STEP_START:
            data = event.data
            if isinstance(data, dict) and data.get("turn") == turn and data.get("step") == step:
                return index
    return None


def turn_count(events: Sequence[Event]) -> int:
    """Return the number of `turn/start` events of a log."""
    return sum(1 for event in events if event.type == TURN_START)


@dataclass(frozen=True, slots=True)
class TurnScan:
    """What one pass of the pending-call tracker over a log found.

    Args:
        open_turn: the number of the open final turn, or None.
        open_step: the open step of that turn, or None.
        pending: the open step's unanswered calls, in call order (what closers answer).
        unanswered: every step closed with calls unanswered, in log order.
        turn_count: the `turn/start` events (`turn_count`, counted by the same pass).
    """

    open_turn: int | None
    open_step: int | None
    pending: list[PendingCall]
    unanswered: list[UnansweredStep] = field(default_factory=list)
    turn_count: int = 0


def scan_turns(events: Sequence[Event]) -> TurnScan:
    """Run the pending-call tracker once over the whole log.

    Args:
        events: the loaded, contiguous log (torn fragments already dropped).

    Returns:
        The open turn and step, the calls closers must answer, and the closed steps whose
        calls were left unanswered.

    Raises:
        EventRejectedError: if a `turn/start` or `step/start` lacks a positive integer
            `turn`/`step` (closers for it could not be well formed).
    """
    tracker = PendingToolCalls()
    open_turn: int | None = None
    open_step: int | None = None
    unanswered: list[UnansweredStep] = []
    turns = 0
    observe = tracker.observe
    for event in events:
        kind = event.type
        if kind == ASSISTANT_CHUNK:
            continue  # the commonest event: the tracker ignores it, and it opens or closes nothing
        if kind in _CLOSING and tracker.closes_unanswered(event):
            calls = tuple(tracker.pending())
            unanswered.append(UnansweredStep(open_turn, calls[0].step, event.seq, calls))
        observe(event)
        if kind in _PLAIN:
            continue  # neither opens nor closes a turn or step
        if kind == TURN_START:
            open_turn = _number(event, "turn")
            open_step = None
            turns += 1
        elif kind == TURN_END:
            open_turn = None
            open_step = None
        elif kind == STEP_START:
            open_step = _number(event, "step")
        elif kind == STEP_END:
            open_step = None
    return TurnScan(open_turn, open_step, tracker.pending(), unanswered, turns)


def _number(event: Event, key: str) -> int:
    data = event.data
    value = data.get(key) if isinstance(data, dict) else None
    if type(value) is not int or value < 1:
        raise EventRejectedError(
            f"{event.type} at seq {event.seq} has no positive integer {key!r} (data {data!r})"
        )
    return value
