"""Turn boundaries (`log/_turns.py`): each answer against a plain forward reading of the log."""

from __future__ import annotations

import pytest

from duraloop.log import Event
from duraloop.log import vocabulary as v
from duraloop.log._turns import (
    last_turn_boundary,
    last_turn_end,
    last_turn_start,
    open_turn_number,
    open_turn_start,
    step_start,
    turn_count,
    turn_starts,
)


def _log() -> list[Event]:
    kinds = [
        (v.TURN_START, {"turn": 1}),
        (v.STEP_START, {"turn": 1, "step": 1}),
        (v.STEP_END, {"turn": 1, "step": 1}),
        (v.TURN_END, {"turn": 1, "reason": {"kind": "completed"}}),
        (v.TURN_START, {"turn": 2}),
        (v.STEP_START, {"turn": 2, "step": 1}),
        (v.STEP_END, {"turn": 2, "step": 1}),
        (v.STEP_START, {"turn": 2, "step": 2}),
    ]
    return [Event(kind, seq, 0, data) for seq, (kind, data) in enumerate(kinds)]


@pytest.mark.parametrize("length", range(len(_log()) + 1))
def test_each_boundary_matches_a_forward_reading(length: int) -> None:
    events = _log()[:length]
    starts = [i for i, e in enumerate(events) if e.type == v.TURN_START]
    ends = [i for i, e in enumerate(events) if e.type == v.TURN_END]
    boundaries = sorted(starts + ends)
    is_open = bool(starts) and (not ends or starts[-1] > ends[-1])
    assert turn_starts(events) == starts
    assert turn_count(events) == len(starts)
    assert last_turn_start(events) == (starts[-1] if starts else None)
    assert last_turn_boundary(events) == (boundaries[-1] if boundaries else None)
    assert open_turn_start(events) == (starts[-1] if is_open else None)
    assert open_turn_number(events) == (events[starts[-1]].data["turn"] if is_open else None)
    assert last_turn_end(events, before=length) == (ends[-1] if ends else None)


def test_step_start_finds_the_named_step_of_the_named_turn() -> None:
    events = _log()
    assert step_start(events, turn=2, step=2) == 7
    assert step_start(events, turn=2, step=1) == 5
    assert step_start(events, turn=1, step=1) == 1
    assert step_start(events, turn=3, step=1) is None
