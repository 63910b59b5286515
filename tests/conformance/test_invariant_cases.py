"""Conformance: relational invariants, docs/cases.md#invariant-cases cases 16-33 (turn/step/tool
relations).

duraloop's `Session` enforces docs/log.md#invariants on every append and on seeds (it is optional in
dsh). Each rejection asserts the `InvariantError`, the spec's quoted message fragment, and that
the log is unchanged afterwards (Law 9: a bad input loses nothing already committed).
"""

from __future__ import annotations

import pytest

from duraloop.errors import EventRejectedError, InvariantError
from duraloop.log import Event, InvariantChecker, Session

from ._builders import (
    CH,
    RAW,
    SE,
    SS,
    TC,
    TE,
    TR,
    TS,
    A,
    Spec,
    U,
    append,
    build,
    call,
    fixed_clock,
    result_data,
)

NS_ERROR = {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}


def session_with(*specs: Spec) -> Session:
    session = Session("inv", clock=fixed_clock())
    for spec in specs:
        append(session, spec)
    return session


def assert_rejected(session: Session, spec: Spec, fragment: str) -> None:
    before = list(session.events)
    nodes = list(session.surface.nodes)
    with pytest.raises(InvariantError, match=fragment):
        append(session, spec)
    assert list(session.events) == before
    assert session.surface.nodes == nodes


def test_case_16_full_tool_turn_is_accepted() -> None:
    session = session_with(
        TS(1),
        U("go"),
        SS(1, 1),
        CH(1, 1),
        A(1, 1, call("c1")),
        TC(1, 1, "c1"),
        TR(1, 1, "c1"),
        SE(1, 1),
        TE(1, "completed"),
    )
    assert len(session.events) == 9


def test_case_17_repeated_seq_is_rejected() -> None:
    checker = InvariantChecker()
    first, second = Event("turn/start", 0, 0, {"turn": 1}), Event("plugin/x", 0, 0, {})
    checker.check_all([first])
    with pytest.raises(InvariantError, match="seq must strictly increase"):
        checker.check(second)


def test_case_18_turn_start_while_open_and_mismatched_turn_end_are_rejected() -> None:
    session = session_with(TS(1))
    assert_rejected(session, TS(2), "turn 1 is still open")
    assert_rejected(session, TE(2), "does not match open turn 1")


def test_case_19_skipped_turn_number_is_rejected() -> None:
    session = session_with(TS(1), TE(1))
    assert_rejected(session, TS(3), "expected turn 2, got 3")


def test_case_20_step_without_messages_is_accepted() -> None:
    session = session_with(TS(1), SS(1, 1), SE(1, 1), TE(1))
    assert [e.type for e in session.events][-1] == "turn/end"


def test_case_21_turn_scoped_log_events_inside_a_step_are_accepted() -> None:
    header = {"header": {"config": {"provider": "p", "model": "m"}}, "reason": "initial"}
    session = session_with(
        TS(1),
        SS(1, 1),
        RAW("todo/write", {"todos": []}),
        RAW("request/header", header),
        RAW("request/context", {"provider": "p", "model": "m"}),
    )
    assert len(session.events) == 5


def test_case_22_between_turns_only_unconstrained_events_are_accepted() -> None:
    session = session_with(U("context", source={"kind": "plugin", "plugin": "p"}))
    assert_rejected(
        session, RAW("request/context", {"provider": "p", "model": "m"}), "outside any open turn"
    )
    append(session, RAW("plugin/marker", {}))
    append(session, TS(1))
    assert [e.type for e in session.events] == ["user/message", "plugin/marker", "turn/start"]


def test_case_23_step_naming_another_turn_is_rejected() -> None:
    session = session_with(TS(1))
    assert_rejected(session, SS(2, 1), "open turn is 1")


def test_case_24_events_against_an_open_step_are_rejected() -> None:
    session = session_with(TS(1), SS(1, 1))
    assert_rejected(session, SS(1, 2), "while step 1 is still open")
    assert_rejected(session, TE(1), "while step 1 is still open")
    assert_rejected(session, SE(1, 2), "open is turn 1/step 1")
    assert_rejected(session, A(1, 2), "open is turn 1/step 1")


def test_case_25_skipped_step_number_is_rejected() -> None:
    session = session_with(TS(1), SS(1, 1), SE(1, 1))
    assert_rejected(session, SS(1, 3), "expected step 2 in turn 1, got 3")
    append(session, TE(1))
    assert session.events[-1].type == "turn/end"


def test_case_26_chunk_without_step_and_result_without_call_are_rejected() -> None:
    assert_rejected(session_with(TS(1)), CH(1, 1), "open is turn 1/step null")
    assert_rejected(session_with(TS(1), SS(1, 1)), TR(1, 1, "ghost"), "no prior tool/call")


def test_case_27_result_without_step_is_rejected() -> None:
    assert_rejected(session_with(TS(1)), TR(1, 1, "closed"), "open is turn 1/step null")


def _rewrite_of_seq_3() -> Spec:
    data = result_data(1, 1, "rewrite", "shorter")
    return Spec("tool/result", data, {"op": "replace", "start": 3, "end": 3}, [3])


def test_case_28_content_only_result_rewrite_in_a_later_turn_is_accepted() -> None:
    session = session_with(
        TS(1), SS(1, 1), TC(1, 1, "rewrite"), TR(1, 1, "rewrite"), SE(1, 1), TE(1), TS(2)
    )
    rewrite = append(session, _rewrite_of_seq_3())
    assert session.surface.nodes == [rewrite.seq]
    assert session.derive_messages()[0]["content"][0]["content"] == [
        {"type": "text", "text": "shorter"}
    ]


def test_case_29_result_rewrite_outside_any_turn_is_rejected() -> None:
    session = session_with(
        TS(1), SS(1, 1), TC(1, 1, "rewrite"), TR(1, 1, "rewrite"), SE(1, 1), TE(1)
    )
    assert_rejected(session, _rewrite_of_seq_3(), "outside any open turn")


def test_case_30_not_started_result_and_unanswered_call_are_accepted() -> None:
    # duraloop narrows dsh's exemption (issue 9): the not-started result must answer a call
    # its step's assistant message requested; the spec's bare `TS SS TR(NS)` is an orphan.
    crashed = TR(1, 1, "crashed", "not started", is_error=True, error=NS_ERROR)
    session = session_with(
        TS(1), SS(1, 1), A(1, 1, call("crashed")), crashed, SE(1, 1), TE(1, "interrupted")
    )
    assert session.events[3].source_event_seqs is None
    error_reason = {"message": "boom", "code": "UNKNOWN"}
    session = session_with(
        TS(1), SS(1, 1), TC(1, 1, "c1"), SE(1, 1), TE(1, "error", error=error_reason)
    )
    assert session.events[-1].data["reason"] == {"kind": "error", "error": error_reason}


def test_not_started_result_whose_call_id_is_in_no_assistant_message_is_an_orphan() -> None:
    crashed = TR(1, 1, "crashed", "not started", is_error=True, error=NS_ERROR)
    assert_rejected(session_with(TS(1), SS(1, 1)), crashed, "answers no unanswered tool call")
    other = session_with(TS(1), SS(1, 1), A(1, 1, call("asked")))
    assert_rejected(other, crashed, "no prior tool/call in this step")


def test_not_started_result_for_a_call_already_answered_is_an_orphan() -> None:
    crashed = TR(1, 1, "c1", "not started", is_error=True, error=NS_ERROR)
    session = session_with(TS(1), SS(1, 1), A(1, 1, call("c1")), crashed)
    assert_rejected(session, crashed, "answers no unanswered tool call")


def test_not_started_result_for_a_call_of_an_earlier_step_is_an_orphan() -> None:
    crashed = TR(1, 2, "c1", "not started", is_error=True, error=NS_ERROR)
    session = session_with(TS(1), SS(1, 1), A(1, 1, call("c1")), SE(1, 1), SS(1, 2))
    assert_rejected(session, crashed, "answers no unanswered tool call")


def test_case_30_not_started_code_without_is_error_is_rejected() -> None:
    # The exemption needs both isError and the code (docs/log.md#invariants).
    spec = TR(1, 1, "crashed", is_error=False, error=NS_ERROR)
    assert_rejected(session_with(TS(1), SS(1, 1)), spec, "no prior tool/call")


def test_case_31_result_for_a_call_of_an_earlier_step_is_rejected() -> None:
    session = session_with(TS(1), SS(1, 1), TC(1, 1, "c1"), SE(1, 1), SS(1, 2))
    assert_rejected(session, TR(1, 2, "c1"), "no prior tool/call in this step")


def test_case_32_bad_seed_fails_creation_and_sessions_do_not_share_state() -> None:
    with pytest.raises(InvariantError, match="turn 1 is still open"):
        Session("bad", seed=build(TS(1), TS(2)), clock=fixed_clock())
    a, b = Session("a", clock=fixed_clock()), Session("b", clock=fixed_clock())
    assert append(a, TS(1)).seq == 0
    assert append(b, TS(1)).seq == 0


def test_case_33_seed_state_carries_into_live_appends() -> None:
    closed = Session("closed", seed=build(TS(1), TE(1)), clock=fixed_clock())
    assert [e.type for e in closed.events] == ["turn/start", "turn/end", "session/end-seed"]
    session = Session("open", seed=build(TS(1)), clock=fixed_clock(7))
    assert session.events[1] == Event("session/end-seed", 1, 7, {})
    assert_rejected(session, TS(2), "turn 1 is still open")
    append(session, TE(1, "completed"))
    assert session.events[-1].data == {"turn": 1, "reason": {"kind": "completed"}}


def test_invariant_error_is_an_event_rejected_error() -> None:
    assert issubclass(InvariantError, EventRejectedError)
    with pytest.raises(EventRejectedError, match="invariant violated at seq 1"):
        session_with(TS(1), TE(2))
