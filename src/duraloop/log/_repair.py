"""Crash-tail repair: close an interrupted final turn (docs/recovery.md#crash-tail-repair).

Repair preserves every complete event and appends closers: the `compaction/end` of a
compaction the crash left open (`torn_compaction`), then one recovery `tool/result` per
unanswered call of the open step (shared tracker and constructor, `_pending.py`), then
`step/end` if a step is open, then `turn/end {interrupted}`. Closed turns are never touched.
A compaction is closed first, so its bracket never holds a turn boundary (compaction-spec
3.2); one between turns (standalone) is closed by its `compaction/end` alone. It is closed
with `error` (`COMPACTION_INTERRUPTED_TEXT`, the surface unchanged) unless its summary and
checkpoint had landed (the surface is compacted): then as a success. A bracket a later
`session/end-seed` or turn boundary made stale (an ended lifecycle's, which dsh leaves
open) is never closed.

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
from typing import Any

from ._approvals import pending_approval
from ._compaction_invariants import is_checkpoint_event
from ._event import Event
from ._pending import unanswered_tool_result
from ._turns import TurnScan, open_turn_start, scan_turns
from ._validate import check_message_shape
from .vocabulary import (
    COMPACTION_END,
    COMPACTION_INTERRUPTED_TEXT,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    END_SEED,
    REASON_INTERRUPTED,
    STEP_END,
    SURFACE_APPEND,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
)

_STALE = frozenset({COMPACTION_END, END_SEED, TURN_START, TURN_END})
"""What ends the backward walk of `torn_compaction` without an open compaction."""


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
        Events to append: the `compaction/end` of a compaction left open
        (`torn_compaction`), recovery `tool/result`s in assistant call order, `step/end` if
        a step is open, `turn/end {"kind": "interrupted"}`. Only that `compaction/end` when
        no turn is open and the compaction is standalone; empty if neither is open.

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
        The closers, or `[]` when neither a turn nor a standalone compaction is open (or
        the open turn is paused).
    """
    if not events:
        return []
    open_turn, open_step = scan.open_turn, scan.open_step
    torn = torn_compaction(events)
    last = events[-1]
    seq = last.seq + 1
    time = last.time
    closers: list[Event] = []
    if torn is not None and torn[0].get("turn") == open_turn:
        closers.append(Event(COMPACTION_END, seq, time, _compaction_end(torn[0], landed=torn[1])))
        seq += 1
    if open_turn is None:
        return closers
    if keep_paused and pending_approval(events) is not None:
        return []
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


def torn_compaction(events: Sequence[Event]) -> tuple[dict[str, Any], bool] | None:
    """Return the compaction a crash left open, and whether its checkpoint landed, or None.

    The newest `compaction/start` with no later `compaction/end`, `session/end-seed` or turn
    boundary (those make it closed or stale; compaction-spec 3.1, 9), found by a backward
    walk that stops at the last turn boundary. A start without a non-empty string
    `compactionId`, or with an owner that is neither null nor an integer, is left to the
    invariant check to report.

    Args:
        events: a log in seq order.

    Returns:
        The `compaction/start` data and whether both its `compaction/summary` and its
        checkpoint `user/message` came after it (CS CY CK persisted), or None.
    """
    summaries: set[object] = set()
    checkpoints: set[object] = set()
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        kind = event.type
        if kind in _STALE:
            return None
        data = event.data
        if kind == COMPACTION_START:
            compaction_id = data.get("compactionId") if isinstance(data, dict) else None
            if not isinstance(compaction_id, str) or not compaction_id or "turn" not in data:
                return None
            turn = data["turn"]
            if turn is not None and type(turn) is not int:
                return None
            return data, compaction_id in summaries and compaction_id in checkpoints
        if kind == COMPACTION_SUMMARY and isinstance(data, dict):
            summaries.add(data.get("compactionId"))
        elif is_checkpoint_event(event):
            checkpoints.add(data["source"].get("compactionId"))
    return None


def _compaction_end(start: dict[str, Any], *, landed: bool) -> dict[str, Any]:
    """The `compaction/end` closing the bracket `start` opened (compaction-spec 2.4)."""
    data: dict[str, Any] = {"compactionId": start["compactionId"]}
    if "sourceCommandId" in start:
        data["sourceCommandId"] = start["sourceCommandId"]
    data["turn"] = start["turn"]
    if not landed:
        data["error"] = COMPACTION_INTERRUPTED_TEXT
    return data


def final_turn_closers(events: Sequence[Event]) -> list[Event]:
    """Return `interrupted_turn_closers(events)`, looking only at the final turn.

    Repair depends on nothing before the last `turn/start` (it resets every tracker), so a
    backward walk to the open final turn's `turn/start` replaces a pass over the whole log;
    with every turn closed, only a standalone compaction after the last turn can be open
    (`torn_compaction` walks back to the last turn boundary). Closers are written before the
    log is seeded, so the message shapes of the final turn, which they rest on, are checked
    first.

    Args:
        events: the stored, contiguous events.

    Returns:
        The closers of an interrupted final turn or compaction, or `[]`.

    Raises:
        EventRejectedError: if an event of the final turn is malformed (its message shape, or
            a `turn/start` or `step/start` without a positive integer number).
    """
    start = open_turn_start(events)
    if start is None:
        return closers_of(TurnScan(None, None, []), events)
    final_turn = events[start:]
    for event in final_turn:
        check_message_shape(event)
    return interrupted_turn_closers(final_turn)
