"""Properties of crash repair over random well-formed logs cut at a random point (Laws 4, 5).

Hypothesis draws loop-shaped logs: turns of steps, each step an assistant message with 0-4
tool calls whose `tool/call`s and `tool/result`s are committed prefixes in model order (as the
scheduler guarantees), results possibly not-started recovery results, turns possibly ending
with unanswered calls. The log is cut anywhere, as a crash would. A random generator explores
interleavings and cut points no hand-written case lists; the properties are the laws.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from conformance._builders import (
    CH,
    SE,
    SS,
    TC,
    TE,
    TR,
    TS,
    A,
    Spec,
    U,
    build,
    call,
    fixed_clock,
    txt,
)
from duraloop.log import (
    Event,
    PendingToolCalls,
    Session,
    check_pairing,
    interrupted_turn_closers,
)

NS_ERROR = {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}


@dataclass(frozen=True)
class Case:
    log: list[Event]


@st.composite
def step_specs(draw: st.DrawFn, turn: int, step: int) -> list[Spec]:
    """One step: start, maybe chunks and a steering message, the assistant message, tools."""
    specs: list[Spec] = [SS(turn, step)]
    if draw(st.booleans()):
        specs.append(U(f"steer-{turn}-{step}"))
    specs += [CH(turn, step)] * draw(st.integers(0, 2))
    n_calls = draw(st.integers(0, 4))
    ids = [f"c{turn}-{step}-{i}" for i in range(n_calls)]
    specs.append(A(turn, step, txt("thinking"), *[call(i) for i in ids]))
    started = draw(st.integers(0, n_calls))  # tool/calls: a prefix in model order
    answered = draw(st.integers(0, n_calls))  # tool/results: a prefix in model order
    pending_calls = [TC(turn, step, ids[i]) for i in range(started)]
    results = [
        TR(turn, step, ids[i])
        if i < started
        else TR(turn, step, ids[i], "not started", is_error=True, error=NS_ERROR)
        for i in range(answered)
    ]
    # Interleave: calls in order, results in order, a result never before its own tool/call.
    calls_done = 0
    for index, result in enumerate(results):
        need = index + 1 if index < started else calls_done
        while calls_done < need or (calls_done < started and draw(st.booleans())):
            specs.append(pending_calls[calls_done])
            calls_done += 1
        specs.append(result)
    specs += pending_calls[calls_done:]
    specs.append(SE(turn, step))
    return specs


@st.composite
def cut_logs(draw: st.DrawFn) -> Case:
    specs: list[Spec] = []
    for turn in range(1, draw(st.integers(1, 3)) + 1):
        specs.append(TS(turn))
        if draw(st.booleans()):
            specs.append(U(f"prompt-{turn}"))
        for step in range(1, draw(st.integers(0, 3)) + 1):
            specs += draw(step_specs(turn, step))
        specs.append(TE(turn, draw(st.sampled_from(["completed", "error", "max-tokens"]))))
    cut = draw(st.integers(0, len(specs)))
    times = draw(st.lists(st.integers(0, 2**40), min_size=cut, max_size=cut))
    return Case(build(*[spec.at(time) for spec, time in zip(specs[:cut], times, strict=True)]))


def turn_is_open(log: list[Event]) -> bool:
    bounds = [e.type for e in log if e.type in ("turn/start", "turn/end")]
    return bool(bounds) and bounds[-1] == "turn/start"


def step_is_open(log: list[Event]) -> bool:
    bounds = [e.type for e in log if e.type in ("step/start", "step/end", "turn/end")]
    return bool(bounds) and bounds[-1] == "step/start"


def closed_steps_are_paired(log: list[Event]) -> bool:
    tracker = PendingToolCalls()
    for event in log:
        if event.type == "step/end" and len(tracker):
            return False
        tracker.observe(event)
    return True


def last_step_events(events: list[Event]) -> list[Event]:
    start = max(i for i, e in enumerate(events) if e.type == "step/start")
    end = next(i for i in range(start, len(events)) if events[i].type == "step/end")
    return events[start : end + 1]


def call_ids_requested(step: list[Event]) -> list[str]:
    return [
        block["id"]
        for e in step
        if e.type == "assistant/message"
        for block in e.data["message"]["content"]
        if block["type"] == "tool-call"
    ]


def result_ids(step: list[Event]) -> list[str]:
    return [e.data["message"]["source"]["callId"] for e in step if e.type == "tool/result"]


@settings(max_examples=300, deadline=None)
@given(cut_logs())
def test_repaired_log_is_a_valid_seed_with_invariants_on(case: Case) -> None:
    log = case.log
    closers = interrupted_turn_closers(log)
    session = Session("repaired", seed=log + closers, clock=fixed_clock())
    assert list(session.events[: len(log) + len(closers)]) == log + closers


@settings(max_examples=300, deadline=None)
@given(cut_logs())
def test_repair_answers_every_call_of_the_open_step_in_call_order(case: Case) -> None:
    log = case.log
    had_open_step = step_is_open(log)
    repaired = log + interrupted_turn_closers(log)
    if had_open_step:
        step = last_step_events(repaired)
        assert result_ids(step) == call_ids_requested(step)  # Law 4: one each, in order
        assert step[-1].type == "step/end"


@settings(max_examples=300, deadline=None)
@given(cut_logs())
def test_repaired_history_is_provider_valid_when_closed_steps_were(case: Case) -> None:
    log = case.log
    closers = interrupted_turn_closers(log)
    session = Session("repaired", seed=log + closers, clock=fixed_clock())
    if closed_steps_are_paired(log):
        check_pairing(session.derive_messages())


@settings(max_examples=300, deadline=None)
@given(cut_logs())
def test_closers_exist_iff_a_turn_is_open_and_repair_is_idempotent(case: Case) -> None:
    log = case.log
    closers = interrupted_turn_closers(log)
    assert (closers != []) == turn_is_open(log)
    assert interrupted_turn_closers(log + closers) == []
    if closers:
        assert [c.seq for c in closers] == list(range(len(log), len(log) + len(closers)))
        assert {c.time for c in closers} == {log[-1].time}
        assert closers[-1].type == "turn/end"
        assert closers[-1].data["reason"] == {"kind": "interrupted"}


@settings(max_examples=300, deadline=None)
@given(cut_logs())
def test_recorded_calls_are_never_reported_as_not_started(case: Case) -> None:
    log = case.log
    recorded = {e.data["callId"]: e.seq for e in log if e.type == "tool/call"}
    for closer in interrupted_turn_closers(log):
        if closer.type != "tool/result":
            continue
        call_id = closer.data["message"]["source"]["callId"]
        if call_id in recorded:  # Law 5
            assert closer.data["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
            assert closer.source_event_seqs == [recorded[call_id]]
        else:
            assert closer.data["error"]["code"] == "TOOL_NOT_STARTED"
            assert closer.source_event_seqs is None
        assert closer.data["message"]["id"] == f"interrupted-tool-result-{call_id}-{closer.seq}"
