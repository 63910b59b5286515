"""Crash-tail repair: close an interrupted final turn (session-spec 4.2).

Repair preserves every complete event and appends closers: one recovery `tool/result` per
unanswered call of the open step (shared tracker and constructor, `_pending.py`), then
`step/end` if a step is open, then `turn/end {interrupted}`. Closed turns are never touched.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import EventRejectedError
from ._event import Event
from ._pending import PendingToolCalls, unanswered_tool_result
from ._vocabulary import (
    REASON_INTERRUPTED,
    STEP_END,
    STEP_START,
    SURFACE_APPEND,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
)


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
    tracker = PendingToolCalls()
    open_turn: int | None = None
    open_step: int | None = None
    for event in events:
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
    if open_turn is None or not events:
        return []
    last = events[-1]
    seq = last.seq + 1
    time = last.time
    closers: list[Event] = []
    for call in tracker.pending():
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
