"""Crash-tail repair: close an interrupted final turn (session-spec 4.2).

Repair preserves every complete event and appends closers: one recovery `tool/result` per
unanswered call of the open step (shared tracker and constructor, `_pending.py`), then
`step/end` if a step is open, then `turn/end {interrupted}`. Closed turns are never touched.

The same one pass (`scan_turns`) also finds closed history that repair cannot fix: a step
closed with calls unanswered (`UnansweredStep`), which `check_log` reports and loading refuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import EventRejectedError
from ._event import Event
from ._pending import PendingCall, PendingToolCalls, UnansweredStep, unanswered_tool_result
from ._vocabulary import (
    REASON_INTERRUPTED,
    STEP_END,
    STEP_START,
    SURFACE_APPEND,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
)


@dataclass(frozen=True, slots=True)
class TurnScan:
    """What one pass of the pending-call tracker over a log found.

    Args:
        open_turn: the number of the open final turn, or None.
        open_step: the open step of that turn, or None.
        pending: the open step's unanswered calls, in call order (what closers answer).
        unanswered: every step closed with calls unanswered, in log order.
    """

    open_turn: int | None
    open_step: int | None
    pending: list[PendingCall]
    unanswered: list[UnansweredStep] = field(default_factory=list)


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
    for event in events:
        if tracker.closes_unanswered(event):
            calls = tuple(tracker.pending())
            unanswered.append(UnansweredStep(open_turn, calls[0].step, event.seq, calls))
        tracker.observe(event)
        kind = event.type
        if kind == TURN_START:
            open_turn = _number(event, "turn")
            open_step = None
        elif kind == TURN_END:
            open_turn = None
            open_step = None
        elif kind == STEP_START:
            open_step = _number(event, "step")
        elif kind == STEP_END:
            open_step = None
    return TurnScan(open_turn, open_step, tracker.pending(), unanswered)


def interrupted_turn_closers(events: Sequence[Event]) -> list[Event]:
    """Return the closers that balance an interrupted final turn, or `[]`.

    Closers take consecutive seqs after the last event and reuse its `time`, so repair is
    deterministic and never writes a future timestamp.

    Args:
        events: the loaded, contiguous log (torn fragments already dropped).

    Returns:
        Events to append: recovery `tool/result`s in assistant call order, `step/end` if a
        step is open, `turn/end {"kind": "interrupted"}`. Empty if no turn is open.

    Raises:
        EventRejectedError: if a `turn/start` or `step/start` lacks a positive integer
            `turn`/`step` (closers for it could not be well formed).
    """
    return closers_of(scan_turns(events), events)


def closers_of(scan: TurnScan, events: Sequence[Event]) -> list[Event]:
    """Return the closers of the log `scan` was made of (see `interrupted_turn_closers`).

    Args:
        scan: `scan_turns(events)`.
        events: the same log.

    Returns:
        The closers, or `[]` when no turn is open.
    """
    open_turn, open_step = scan.open_turn, scan.open_step
    if open_turn is None or not events:
        return []
    last = events[-1]
    seq = last.seq + 1
    time = last.time
    closers: list[Event] = []
    for call in scan.pending:
        result = unanswered_tool_result(call, turn=open_turn, seq=seq)
        closers.append(
            Event(TOOL_RESULT, seq, time, result.data, result.source_event_seqs, SURFACE_APPEND)
        )
        seq += 1
    if open_step is not None:
        closers.append(Event(STEP_END, seq, time, {"turn": open_turn, "step": open_step}))
        seq += 1
    closers.append(
        Event(TURN_END, seq, time, {"turn": open_turn, "reason": {"kind": REASON_INTERRUPTED}})
    )
    return closers


def _number(event: Event, key: str) -> int:
    data = event.data
    value = data.get(key) if isinstance(data, dict) else None
    if type(value) is not int or value < 1:
        raise EventRejectedError(
            f"{event.type} at seq {event.seq} has no positive integer {key!r} (data {data!r})"
        )
    return value
