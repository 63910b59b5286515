"""Crash-tail repair: close an interrupted final turn (docs/recovery.md#crash-tail-repair).

Repair preserves every complete event and appends closers: one recovery `tool/result` per
unanswered call of the open step (shared tracker and constructor, `_pending.py`), then
`step/end` if a step is open, then `turn/end {interrupted}`. Closed turns are never touched.

This module is the one home of repair: `interrupted_turn_closers` is its entry point;
`closers_of` builds the closers from a scan the caller already made (`check_log` scans once),
and `final_turn_closers` is the same repair reading only the final turn, for a writer that
must not pay a pass over the whole log. The stores call these and only translate errors.

The same one pass (`scan_turns`, `_turns.py`) also finds closed history that repair cannot
fix: a step closed with calls unanswered (`UnansweredStep`), which `check_log` reports and
loading refuses.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._approvals import pending_approval
from ._event import Event
from ._pending import unanswered_tool_result
from ._turns import TurnScan, open_turn_start, scan_turns
from ._validate import check_message_shape
from .vocabulary import REASON_INTERRUPTED, STEP_END, SURFACE_APPEND, TOOL_RESULT, TURN_END


def interrupted_turn_closers(events: Sequence[Event], *, keep_paused: bool = True) -> list[Event]:
    """Return the closers that balance an interrupted final turn, or `[]`.

    A turn paused on an approval (`pending_approval`, docs/approvals.md#pausing) is not
    interrupted: it gets no closers unless `keep_paused` is False (a fork cut closes it).

    Closers take consecutive seqs after the last event and reuse its `time`, so repair is
    deterministic and never writes a future timestamp.

    Args:
        events: the loaded, contiguous log (torn fragments already dropped).
        keep_paused: whether a paused final turn stays open (True) or is closed.

    Returns:
        Events to append: recovery `tool/result`s in assistant call order, `step/end` if a
        step is open, `turn/end {"kind": "interrupted"}`. Empty if no turn is open.

    Raises:
        EventRejectedError: if a `turn/start` or `step/start` lacks a positive integer
            `turn`/`step` (closers for it could not be well formed).
    """
    return closers_of(scan_turns(events), events, keep_paused=keep_paused)


def closers_of(scan: TurnScan, events: Sequence[Event], *, keep_paused: bool = True) -> list[Event]:
    """Return the closers of the log `scan` was made of (see `interrupted_turn_closers`).

    Args:
        scan: `scan_turns(events)`.
        events: the same log.
        keep_paused: whether a turn paused on an approval stays open (no closers).

    Returns:
        The closers, or `[]` when no turn is open (or the open turn is paused).
    """
    open_turn, open_step = scan.open_turn, scan.open_step
    if open_turn is None or not events:
        return []
    if keep_paused and pending_approval(events) is not None:
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


def final_turn_closers(events: Sequence[Event]) -> list[Event]:
    """Return `interrupted_turn_closers(events)`, looking only at the final turn.

    Repair depends on nothing before the last `turn/start` (it resets every tracker), so a
    backward walk to the open final turn's `turn/start` replaces a pass over the whole log.
    Closers are written before the log is seeded, so the message shapes of the final turn,
    which they rest on, are checked first.

    Args:
        events: the stored, contiguous events.

    Returns:
        The closers of an interrupted final turn, or `[]`.

    Raises:
        EventRejectedError: if an event of the final turn is malformed (its message shape, or
            a `turn/start` or `step/start` without a positive integer number).
    """
    start = open_turn_start(events)
    if start is None:
        return []
    final_turn = events[start:]
    for event in final_turn:
        check_message_shape(event)
    return interrupted_turn_closers(final_turn)
