"""The compaction bracket invariants: compaction-spec 3.2, cases C46-C49.

Every case runs through a `Session` with invariants on (the default), so it pins the wiring
into `InvariantChecker` as well as the rules; a rejected append leaves the log unchanged.
"""

from __future__ import annotations

import pytest

from conformance._builders import ES, RAW, TE, TS, Spec, U, append, build, fixed_clock
from duraloop.errors import InvariantError
from duraloop.log import Session
from duraloop.log.vocabulary import COMPACTION_START, END_SEED, REQUEST_HEADER, TURN_START

from ._compaction_builders import CE, CK, CS, CY


def live(*specs: Spec) -> Session:
    session = Session("s", clock=fixed_clock())
    for spec in specs:
        append(session, spec)
    return session


NUMBERED_SUCCESS = (TS(1), U("a"), CS(1), CY([1]), CK(1, 1, [2, 3, 1]), CE(1))
STANDALONE_SUCCESS = (U("a"), CS(None), CY([0]), CK(0, 0, [1, 2, 0]), CE(None))


@pytest.mark.parametrize(
    "specs",
    [
        NUMBERED_SUCCESS,
        (TS(1), CS(1), CE(1, error="provider failed")),
        STANDALONE_SUCCESS,
        (U("a"), CS(None), CE(None, error="provider failed")),
        (U("a"), CS(None, command="cmd"), CY([0], command="cmd"), CE(None, command="cmd")),
        (
            TS(1),
            U("a"),
            CS(1),
            RAW(REQUEST_HEADER, {"header": {"config": {"provider": "p", "model": "m"}}}),
            CY([1]),
            CE(1),
        ),
    ],
    ids=["numbered", "numbered-failed", "standalone", "standalone-failed", "command", "log-only"],
)
def test_c46_compaction_lifecycles_are_accepted(specs: tuple[Spec, ...]) -> None:
    session = live(*specs)
    assert session._invariants is not None and session._invariants.compaction.open is None
    Session("r", seed=build(*specs), clock=fixed_clock())  # a replay accepts them too


REJECTED = [
    ((U("a"),), CS(1), "compaction/start for turn 1 appended outside any open turn"),
    ((TS(1),), CS(2), "compaction/start names turn 2 but open turn is 1"),
    ((TS(1),), CS(None), "compaction/start is standalone but turn 1 is open"),
    ((TS(1), CS(1)), CS(1, cid="next"), "compaction/start while turn 1 is still compacting"),
    (
        (CS(None),),
        CS(None, cid="next"),
        "compaction/start while standalone compaction is still compacting",
    ),
    ((TS(1), U("a")), CY([1]), "compaction/summary has no matching compaction/start"),
    ((TS(1), U("a"), CS(1), CY([1])), CY([1]), "compaction/summary repeated within one compaction"),
    (
        (TS(1), U("a"), CS(1)),
        CY([1], cid="other"),
        "compaction/summary id other does not match compaction/start id test-compaction",
    ),
    (
        (U("a"), CS(None, command="cmd")),
        CY([0]),
        "compaction/summary sourceCommandId undefined does not match compaction/start "
        "sourceCommandId cmd",
    ),
    (
        (CS(None, command="cmd"),),
        CE(None, command="other", error="x"),
        "compaction/end sourceCommandId other does not match compaction/start sourceCommandId cmd",
    ),
    ((TS(1), U("a"), CS(1)), CY([]), "compaction/summary shadowedSeqs must be non-empty"),
    (
        (TS(1), U("a"), CS(1)),
        CY([1], shadowedRange={"start": 1, "end": 2}),
        "compaction/summary shadowedRange must match the first and last shadowedSeqs",
    ),
    (
        (TS(1), U("a"), CS(1)),
        CY([1], shadowedTokenCount=-1),
        "compaction/summary shadowedTokenCount must be a non-negative safe integer",
    ),
    (
        (TS(1), CS(1)),
        CE(None, error="x"),
        "compaction/end owner null does not match compaction/start owner 1",
    ),
    ((TS(1), CS(1)), CE(1), "successful compaction/end requires one compaction/summary"),
    (
        (TS(1), U("a"), CS(1), CY([1])),
        CK(1, 1, [2, 3, 1], cid="other"),
        "compaction checkpoint id other does not match compaction/start id test-compaction",
    ),
    ((TS(1), U("a")), CK(1, 1, [1]), "compaction checkpoint has no matching compaction/start"),
    ((TS(1),), CS(1, cid=""), "compaction/start compactionId must be a non-empty string"),
    ((TS(1),), CS(1, command=""), "compaction/start sourceCommandId must be a non-empty string"),
    (
        (TS(1), CS(1)),
        CE(1, cid="", error="x"),
        "compaction/end compactionId must be a non-empty string",
    ),
    (
        (TS(1),),
        RAW(COMPACTION_START, {"compactionId": "x"}),
        "compaction/start names turn undefined but open turn is 1",
    ),
]


@pytest.mark.parametrize(("prefix", "bad", "message"), REJECTED, ids=[r[2] for r in REJECTED])
def test_c47_a_broken_bracket_is_rejected_and_the_log_is_unchanged(
    prefix: tuple[Spec, ...], bad: Spec, message: str
) -> None:
    session = live(*prefix)
    events = list(session.events)
    with pytest.raises(InvariantError, match=f"^invariant violated at seq {len(events)}: "):
        append(session, bad)
    with pytest.raises(InvariantError) as raised:
        append(session, bad)
    assert message in str(raised.value)
    assert list(session.events) == events


@pytest.mark.parametrize(("prefix", "bad", "message"), REJECTED, ids=[r[2] for r in REJECTED])
def test_c47_a_replayed_broken_bracket_is_rejected(
    prefix: tuple[Spec, ...], bad: Spec, message: str
) -> None:
    if "checkpoint has no matching" in message:
        # A replayed checkpoint outside any bracket is accepted (compaction-spec 11.1).
        Session("r", seed=build(*prefix, bad), clock=fixed_clock())
        return
    with pytest.raises(InvariantError, match=message):
        Session("r", seed=build(*prefix, bad), clock=fixed_clock())


@pytest.mark.parametrize(
    ("prefix", "boundary", "message"),
    [
        ((CS(None),), TS(1), "turn/start cannot cross an open standalone compaction"),
        ((TS(1), CS(1)), TE(1), "turn/end cannot cross an open compaction for turn 1"),
    ],
)
def test_c48_a_turn_boundary_cannot_cross_an_open_bracket(
    prefix: tuple[Spec, ...], boundary: Spec, message: str
) -> None:
    session = live(*prefix)
    with pytest.raises(InvariantError, match=message):
        append(session, boundary)
    owner = None if prefix[0].type == COMPACTION_START else 1
    append(session, CE(owner, error="cancelled"))
    append(session, boundary)  # after the bracket closed, the same boundary is fine


def test_c49_end_seed_forgets_a_standalone_orphan() -> None:
    session = Session("r", seed=build(CS(None)), clock=fixed_clock())
    assert [event.type for event in session.events] == [COMPACTION_START, END_SEED]
    append(session, CS(None, cid="next"))
    append(session, CE(None, cid="next", error="new attempt failed"))


def test_c49_after_end_seed_the_orphans_turn_can_be_closed() -> None:
    session = Session("r", seed=build(TS(1), CS(1)), clock=fixed_clock())
    append(session, TE(1, "interrupted"))
    with pytest.raises(InvariantError, match="has no matching compaction/start"):
        append(session, CE(1, error="late"))  # a previous lifecycle's bracket is never closed


def test_c49_a_closed_bracket_containing_a_turn_is_rejected_on_replay() -> None:
    seed = build(CS(None), TS(1), TE(1, "interrupted"), CE(None, error="failed after crossing"))
    with pytest.raises(InvariantError, match="turn/start cannot cross an open standalone"):
        Session("r", seed=seed, clock=fixed_clock())


@pytest.mark.parametrize(
    "specs",
    [
        (CS(None), TS(1), TE(1, "interrupted")),
        (CS(None), TS(1), TE(1, "interrupted"), ES(), TS(2), TE(2)),
        (TS(1), CS(1), TE(1, "interrupted")),
    ],
    ids=["inherited-boundaries", "then-a-turn", "dsh-repaired-numbered"],
)
def test_c49_inherited_repair_boundaries_before_the_end_seed_are_accepted(
    specs: tuple[Spec, ...],
) -> None:
    session = Session("r", seed=build(*specs), clock=fixed_clock())
    append(session, TS(len([s for s in specs if s.type == TURN_START]) + 1))


def test_live_boundaries_get_no_seed_tolerance_after_a_replay() -> None:
    session = Session("r", seed=build(U("a")), clock=fixed_clock())
    append(session, CS(None))
    with pytest.raises(InvariantError, match="cannot cross an open standalone compaction"):
        append(session, TS(1))


def test_no_snapshot_checkpoint_while_a_standalone_bracket_is_open() -> None:
    session = live(U("a"), CS(None))
    assert session.checkpoint() is None
    append(session, CE(None, error="x"))
    assert session.checkpoint() is not None
