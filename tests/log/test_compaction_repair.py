"""Crash repair of a torn compaction: compaction-spec 9's table, closed by `compaction/end`.

A compaction the crash left open (after `compaction/start`, no `compaction/end`, no later
`session/end-seed` or turn boundary) is closed first, with `error` unless its summary and
checkpoint landed; the closers of an interrupted turn follow it. Every repair entry point
(`interrupted_turn_closers`, `final_turn_closers`, the load judge behind `check_log` and the
stores) gives the same closers, and the repaired log passes the invariants.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance._builders import ES, SE, SS, TC, TE, TS, A, Spec, U, build, call, fixed_clock, txt
from duraloop.log import (
    Event,
    Session,
    check_log,
    final_turn_closers,
    interrupted_turn_closers,
    torn_compaction,
    validate_log,
)
from duraloop.log.vocabulary import (
    COMPACTION_END,
    COMPACTION_INTERRUPTED_TEXT,
    REASON_INTERRUPTED,
    STEP_END,
    TOOL_OUTCOME_UNKNOWN,
    TOOL_RESULT,
    TURN_END,
)

from ._compaction_builders import CE, CK, CP, CS, CY

CLOSED_TURN = (TS(1), U("a"), SS(1, 1), A(1, 1, txt("hi")), SE(1, 1))
"""Seqs 0-4: turn 1 with one closed step; the user message (seq 1) is what gets compacted."""


def _bracket(owner: int | None, first: int, shape: str) -> tuple[Spec, ...]:
    """The persisted part of one transaction whose `compaction/start` has seq `first`."""
    command = None if owner is not None else "cmd"
    start, summary = CS(owner, command=command), CY([1], command=command)
    checkpoint = CK(1, 1, [first, first + 1, 1], command=command)
    return {
        "CS": (start,),
        "CS CY": (start, summary),
        "CS CY CK": (start, summary, checkpoint),
        "CS CE{error}": (start, CE(owner, command=command, error="summary unavailable")),
        "CS CY CK CE": (start, summary, checkpoint, CE(owner, command=command)),
        "CP without TR'": (CP(1),),
    }[shape]


def _log(owner: int | None, shape: str) -> list[Event]:
    if owner is None:
        return build(*CLOSED_TURN, TE(1), *_bracket(None, len(CLOSED_TURN) + 1, shape))
    return build(*CLOSED_TURN, *_bracket(1, len(CLOSED_TURN), shape))


def _end(seq: int, owner: int | None, *, error: bool) -> Event:
    data: dict[str, Any] = {"compactionId": "test-compaction"}
    if owner is None:
        data["sourceCommandId"] = "cmd"
    data["turn"] = owner
    if error:
        data["error"] = COMPACTION_INTERRUPTED_TEXT
    return Event(COMPACTION_END, seq, seq - 1, data)


TABLE = [
    ("CS", "error"),
    ("CS CY", "error"),
    ("CS CY CK", "success"),
    ("CS CE{error}", None),
    ("CS CY CK CE", None),
    ("CP without TR'", None),
]


@pytest.mark.parametrize("owner", [1, None], ids=["turn-owned", "standalone"])
@pytest.mark.parametrize(("shape", "close"), TABLE, ids=[row[0] for row in TABLE])
def test_spec_9_each_persisted_prefix_gets_its_closers(
    owner: int | None, shape: str, close: str | None
) -> None:
    events = _log(owner, shape)
    seq = len(events)
    expected: list[Event] = []
    if close is not None:
        expected.append(_end(seq, owner, error=close == "error"))
    if owner is not None:
        reason = {"kind": REASON_INTERRUPTED}
        expected.append(
            Event(TURN_END, seq + len(expected), seq - 1, {"turn": 1, "reason": reason})
        )
    closers = interrupted_turn_closers(events)
    assert closers == expected
    assert final_turn_closers(events) == expected
    # The repaired log passes the invariants, and the surface is what the crash left.
    repaired = Session("r", seed=events + closers, clock=fixed_clock())
    before = Session("b", seed=events, clock=fixed_clock())
    assert repaired.derive_messages() == before.derive_messages()
    report, judged = validate_log("s", events)
    assert report.valid and report.closers_needed == len(expected)
    assert judged is not None and list(judged.events[seq : seq + len(expected)]) == expected


def test_a_landed_checkpoint_keeps_the_surface_compacted() -> None:
    events = _log(1, "CS CY CK")
    repaired = Session("r", seed=events + interrupted_turn_closers(events), clock=fixed_clock())
    assert repaired.surface.nodes[0] == 7, "the checkpoint stands where the prompt was"


def test_turn_owned_inside_an_open_step_closes_the_compaction_before_the_turn() -> None:
    events = build(TS(1), U("go"), SS(1, 1), A(1, 1, call("c1")), TC(1, 1, "c1"), CS(1), CY([1]))
    closers = interrupted_turn_closers(events)
    assert [c.type for c in closers] == [COMPACTION_END, TOOL_RESULT, STEP_END, TURN_END]
    assert closers[0] == _end(7, 1, error=True)
    assert closers[1].data["error"]["code"] == TOOL_OUTCOME_UNKNOWN
    assert closers[1].source_event_seqs == [4]
    assert final_turn_closers(events) == closers
    before = Session("b", seed=events, clock=fixed_clock()).derive_messages()
    after = Session("r", seed=events + closers, clock=fixed_clock()).derive_messages()
    assert after == [*before, closers[1].data["message"]]
    assert check_log("s", events).valid


def test_standalone_between_turns_is_closed_by_its_compaction_end_alone() -> None:
    events = build(U("a"), CS(None, command="cmd"), CY([0], command="cmd"))
    assert interrupted_turn_closers(events) == [_end(3, None, error=True)]


@pytest.mark.parametrize(
    ("specs", "closers"),
    [
        ((U("a"), CS(None), ES()), []),
        ((TS(1), CS(1), ES()), [TURN_END]),
        ((TS(1), CS(1), TE(1, "interrupted")), []),
        ((U("a"), CS(None), TS(1)), [TURN_END]),
    ],
    ids=["standalone-then-end-seed", "numbered-then-end-seed", "dsh-repaired", "crossed"],
)
def test_a_stale_orphan_gets_no_compaction_end(specs: tuple[Spec, ...], closers: list[str]) -> None:
    # A turn boundary after the start means an ended lifecycle wrote it (dsh never closes
    # such a bracket); the replay accepts it, as dsh's invariant does (C49).
    events = build(*specs)
    found = interrupted_turn_closers(events)
    assert torn_compaction(events) is None
    assert [closer.type for closer in found] == closers
    Session("r", seed=events + found, clock=fixed_clock())
    assert check_log("s", events).valid


def test_a_bracket_for_another_owner_is_left_to_the_invariants() -> None:
    events = build(U("a"), CS(3))  # a numbered start with no open turn: damage, not a crash
    assert interrupted_turn_closers(events) == []
    assert any("outside any open turn" in problem for problem in check_log("s", events).problems)


def test_a_fork_cut_inside_a_bracket_closes_it_before_the_turn() -> None:
    events = build(TS(1), CS(1))
    assert [c.type for c in interrupted_turn_closers(events, keep_paused=False)] == [
        COMPACTION_END,
        TURN_END,
    ]
