"""The whole-log load's shortcuts give exactly the verdicts of the passes they replace.

A load judges every event once (docs/store.md#validation-on-read); the shortcuts taken for
speed (issue 11) must not change any verdict or message: the source citations checked in C
first, the legacy import's pass telling whether every type is readable, the turn count
taken by the pending-call scan, and the judge's pairing verdict handed to the loop.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from conformance._builders import SE, SS, TC, TE, TR, TS, A, U, build, call, txt
from duraloop.errors import EventRejectedError, SessionFormatUnsupportedError
from duraloop.llm import ScriptedModel
from duraloop.log import (
    Event,
    Session,
    _check,
    check_log,
    interrupted_turn_closers,
    last_turn_and_latest,
    readable_events,
    validate_log,
)
from duraloop.log._surface import _check_sources, _valid_sources
from duraloop.log.vocabulary import REQUEST_CONTEXT, REQUEST_HEADER
from duraloop.loop import AgentLoop, _state
from log.test_repair_properties import Case, cut_logs

_values = st.one_of(
    st.integers(-3, 40),
    st.booleans(),
    st.none(),
    st.floats(0, 5),
    st.just(2**53),
    st.just(2**53 - 1),
)


def _loop_verdict(sources: list[Any], seq: int) -> str | None:
    """What the checking loop alone says (the fast path disabled)."""
    event = Event("assistant/message", seq, 0, {}, sources, "append")
    seen: set[int] = set()
    try:
        for value in sources:  # the loop of `_check_sources`, as it was before the fast path
            if type(value) is not int or not 0 <= value <= 2**53 - 1:
                raise EventRejectedError("bad value")
            if value in seen:
                raise EventRejectedError("duplicate")
            if value >= event.seq:
                raise EventRejectedError("later")
            seen.add(value)
    except EventRejectedError as exc:
        return str(exc)
    return None


@given(sources=st.lists(_values, max_size=8), seq=st.integers(0, 2**53 + 2))
def test_sources_checked_in_c_accept_exactly_what_the_loop_accepts(
    sources: list[Any], seq: int
) -> None:
    accepted = _valid_sources(sources, seq)
    assert accepted == (_loop_verdict(sources, seq) is None)
    if not accepted:  # the loop then names the first value that breaks a rule
        with pytest.raises(EventRejectedError, match=f"sourceEventSeqs on seq {seq}"):
            _check_sources(Event("assistant/message", seq, 0, {}, sources, "append"))


def _paired_log() -> list[Event]:
    return build(
        TS(1),
        U("go"),
        SS(1, 1),
        A(1, 1, call("c1"), call("c2")),
        TC(1, 1, "c1"),
        TR(1, 1, "c1"),
        TC(1, 1, "c2"),
        TR(1, 1, "c2"),
        SE(1, 1),
        SS(1, 2),
        A(1, 2, txt("done")),
        SE(1, 2),
        TE(1),
    )


def test_the_judges_pairing_verdict_starts_the_loops_incremental_check() -> None:
    report, session = validate_log("s", _paired_log())
    assert report.valid and session is not None
    assert session.paired_messages == (len(session.messages), 0)
    loop = AgentLoop(session, model=ScriptedModel([]), tools=[], cwd=".")
    pairing = loop._state.pairing
    assert (pairing._checked, pairing._generation) == (len(session.messages), 0)
    # The check still judges what comes after: an answer to no pending call is refused.
    pairing.check(session.messages, generation=0)
    loop.close()


def test_a_session_not_judged_has_no_pairing_verdict() -> None:
    session = Session("s", seed=_paired_log())
    assert session.paired_messages is None
    loop = AgentLoop(session, model=ScriptedModel([]), tools=[], cwd=".")
    assert loop._state.pairing._checked == 0
    loop.close()


def test_a_log_whose_pairing_fails_hands_no_verdict() -> None:
    log = build(TS(1), U("go"), SS(1, 1), A(1, 1, call("c1")), TC(1, 1, "c1"))
    log.append(Event("user/message", len(log), 0, log[1].data, None, "append"))
    report, session = validate_log("s", log)
    assert session is None or session.paired_messages is None
    assert not report.valid


def test_an_unknown_type_is_refused_after_the_legacy_import_in_one_pass() -> None:
    log = build(TS(1), U("go"), TE(1))
    unknown = Event("future/thing", 1, 0, {}, None, None)
    events = [
        log[0],
        unknown,
        *(
            Event(e.type, e.seq + 1, e.time, e.data, e.source_event_seqs, e.surface_op)
            for e in log[1:]
        ),
    ]
    with pytest.raises(
        SessionFormatUnsupportedError, match='event type "future/thing" \\(seq 1\\)'
    ):
        readable_events(events, session_id="s", path=None)
    ignorable = Event("future/thing", 1, 0, {}, None, None, True)
    events[1] = ignorable
    assert readable_events(events, session_id="s", path=None) is events


def test_turn_count_is_reported_when_the_scan_refuses_a_turn_number() -> None:
    log = build(TS(1), U("go"), TE(1))
    bad = Event("turn/start", 3, 0, {"turn": "two"}, None, None)
    report = check_log("s", [*log, bad])
    assert not report.valid
    assert report.turn_count == 2
    assert check_log("s", log).turn_count == 1


def _judged(log: list[Event]) -> tuple[Any, ...]:
    report, session = validate_log("s", log)
    if session is None:
        return report, None
    events = list(session.events)
    return report, (
        [*events[:-1], events[-1].type],  # the end-seed's time is the clock's
        session.derive_messages(),
        list(session.surface.nodes),
        session.first_live_seq,
        session.paired_messages,
    )


def _mutated(log: list[Event], how: str, where: int) -> list[Event]:
    """A log a crash cannot leave: a number of another JSON type, an event dropped or moved."""
    if not log:
        return log
    index = where % len(log)
    event = log[index]
    if how == "float-number" and isinstance(event.data, dict):
        key = "step" if event.type == "step/start" else "turn"
        if key in event.data:
            data = {**event.data, key: float(event.data[key])}
            return [*log[:index], msgspec.structs.replace(event, data=data), *log[index + 1 :]]
    if how == "true-number" and event.type == "turn/start" and event.data.get("turn") == 1:
        data = {**event.data, "turn": True}
        return [*log[:index], msgspec.structs.replace(event, data=data), *log[index + 1 :]]
    if how == "drop":
        rest = [*log[:index], *log[index + 1 :]]
        return [msgspec.structs.replace(e, seq=n) for n, e in enumerate(rest)]
    if how == "swap" and index + 1 < len(log):
        moved = [*log[:index], log[index + 1], log[index], *log[index + 2 :]]
        return [msgspec.structs.replace(e, seq=n) for n, e in enumerate(moved)]
    return log


@settings(max_examples=150, deadline=None)
@given(
    case=cut_logs(),
    how=st.sampled_from([None, "float-number", "true-number", "drop", "swap"]),
    where=st.integers(0, 200),
)
def test_property_the_one_pass_judge_equals_the_two_pass_judge(
    case: Case, how: str | None, where: int
) -> None:
    """The seed's checker as the turn scan (one pass) gives exactly the verdicts, messages,
    closers and session of `scan_turns` followed by the seed (two passes)."""
    log = case.log if how is None else _mutated(case.log, how, where)
    taken = _check._judge_in_one_pass("s", log, None) is not None
    event(f"{how}: {'one pass' if taken else 'two passes'}")
    one_pass = _judged(log)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_check, "_judge_in_one_pass", lambda *args: None)
        two_pass = _judged(log)
    assert one_pass == two_pass


@settings(max_examples=60, deadline=None)
@given(case=cut_logs(), headers=st.lists(st.integers(0, 400), max_size=3))
def test_property_the_latest_seq_index_answers_as_the_backward_walk(
    case: Case, headers: list[int]
) -> None:
    """The loop's resume reads the last turn and the latest request events from the
    session's index (`Session.latest_seq`), exactly what walking the log back finds."""
    closers = interrupted_turn_closers(case.log)
    session = Session("s", seed=[*case.log, *closers])
    for at in headers:  # later turns with the request events the loop logs in them
        turn = session._invariants.next_turn if session._invariants else 1
        session.append("turn/start", {"turn": turn})
        header = {"config": {"provider": "p", "model": f"m{at}"}}
        session.append(REQUEST_HEADER, {"turn": turn, "header": header})
        if at % 2:
            session.append(REQUEST_CONTEXT, {"turn": turn, "context": {"n": at}})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    kinds = (REQUEST_HEADER, REQUEST_CONTEXT)
    walked = last_turn_and_latest(session.events, kinds)
    assert _state._last_turn_and_latest(session) == walked
    for kind in {e.type for e in session.events} - {"assistant/chunk"}:
        assert session.latest_seq(kind) == max(e.seq for e in session.events if e.type == kind)
