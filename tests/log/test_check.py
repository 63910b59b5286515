"""`check_log` and the fork rescue of a closed turn with unanswered tool calls (issue 9, A1).

A step closed (`step/end`) while a call of its assistant message has no `tool/result` is
closed history crash repair never touches, so no provider accepts the session again. The one
pending-call tracker finds every such step in one pass; the report names the step, its call
ids and the fork cut that rescues the history; the cut's closers are crash repair's own.
Pure log tests on the smallest logs that show each rule.
"""

from __future__ import annotations

import pytest

from conformance._builders import SE, SS, TC, TE, TR, TS, A, U, build, call, txt
from duraloop.errors import SessionForkError
from duraloop.log import Event, check_log, fork_seed, interrupted_turn_closers, rescue_command
from duraloop.log._turns import scan_turns


def closed_unanswered() -> list[Event]:
    """The smallest wedged log: turn 1's step 1 asked for c1 and was closed without it."""
    return build(TS(1), U("go"), SS(1, 1), A(1, 1, call("c1")), SE(1, 1), TE(1, "error"))


def test_check_log_reports_a_closed_step_with_an_unanswered_call_and_its_rescue() -> None:
    report = check_log("s", closed_unanswered())
    assert not report.valid
    assert [(u.turn, u.step, u.closed_at, u.call_ids) for u in report.unanswered] == [
        (1, 1, 4, ("c1",))
    ]
    assert report.rescue_seq == 3
    assert report.damage == []
    assert len(report.problems) == 1
    assert (
        "turn 1 step 1 was closed at seq 4 with tool call(s) 'c1' unanswered" in report.problems[0]
    )
    assert "`duraloop fork s --at 3`" in report.problems[0]


def test_scan_finds_every_unanswered_closed_step_in_one_pass_even_inside_the_open_turn() -> None:
    log = build(
        TS(1),
        SS(1, 1),
        A(1, 1, call("a"), call("b")),
        TC(1, 1, "a"),
        SE(1, 1),
        TE(1),
        TS(2),
        SS(2, 1),
        A(2, 1, call("c")),
        SE(2, 1),
        SS(2, 2),
    )
    scan = scan_turns(log)
    assert [(u.turn, u.step, u.closed_at, u.call_ids) for u in scan.unanswered] == [
        (1, 1, 4, ("a", "b")),
        (2, 1, 9, ("c",)),
    ]
    assert (scan.open_turn, scan.open_step, scan.pending) == (2, 2, [])
    report = check_log("s", log)
    assert report.rescue_seq == 3
    assert len(report.problems) == 2 and "duraloop fork" not in report.problems[1]


def test_an_answered_log_has_no_unanswered_steps() -> None:
    log = build(
        TS(1), SS(1, 1), A(1, 1, call("c1")), TC(1, 1, "c1"), TR(1, 1, "c1"), SE(1, 1), TE(1)
    )
    report = check_log("s", log)
    assert report.valid and report.unanswered == [] and report.rescue_seq is None


def test_fork_at_the_rescue_seq_closes_the_cut_with_crash_repair_closers() -> None:
    log = build(
        TS(1),
        SS(1, 1),
        A(1, 1, call("ran"), call("never")),
        TC(1, 1, "ran"),
        SE(1, 1),
        TE(1, "error"),
    )
    rescue = check_log("s", log).rescue_seq
    assert rescue == 3
    seed = fork_seed(log, session_id="s", boundary=rescue, close_open_turn=True)
    prefix = log[: rescue + 1]
    assert seed[: rescue + 1] == prefix
    assert seed[rescue + 1 :] == interrupted_turn_closers(prefix)  # the very closers of repair
    codes = [e.data["error"]["code"] for e in seed if e.type == "tool/result"]
    assert codes == ["TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED"]
    assert [e.type for e in seed[-2:]] == ["step/end", "turn/end"]
    assert seed[-1].data["reason"] == {"kind": "interrupted"}
    assert check_log("child", seed).valid


def test_fork_inside_a_turn_without_closing_is_still_refused_as_dsh_refuses_it() -> None:
    with pytest.raises(SessionForkError) as caught:
        fork_seed(closed_unanswered(), session_id="s", boundary=3)
    assert caught.value.code == "OPEN_TURN"


def test_check_log_reports_a_tool_call_block_without_an_id_instead_of_crashing() -> None:
    # Two flipped bytes ("id" -> "ie") in an answered log: a KeyError escaped `check` before.
    block = {"type": "tool-call", "ie": "c1", "name": "bash", "arguments": "{}"}
    log = build(TS(1), SS(1, 1), A(1, 1, block), TC(1, 1, "c1"), TR(1, 1, "c1"), SE(1, 1), TE(1))
    report = check_log("s", log)
    assert not report.valid
    assert report.damage == [
        "assistant/message at seq 2: tool-call block content[0] needs 'id' as a non-empty string"
    ]


def test_rescue_command_quotes_an_id_a_shell_would_split() -> None:
    assert rescue_command("a b", 3) == "duraloop fork 'a b' --at 3"
    assert rescue_command("plain-id", 0) == "duraloop fork plain-id --at 0"


def test_unanswered_call_ids_in_messages_are_bounded() -> None:
    long_id = "x" * 5000
    log = build(TS(1), SS(1, 1), A(1, 1, call(long_id), txt("t")), SE(1, 1), TE(1))
    problem = check_log("s", log).problems[0]
    assert len(problem) < 400
