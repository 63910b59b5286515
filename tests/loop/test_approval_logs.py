"""Paused logs as readers see them (docs/approvals.md#pausing).

duraloop keeps a paused turn open; dsh's reader (and a fork cut) closes it as interrupted,
the waiting calls answered `TOOL_NOT_STARTED`, which pairs. `check_log` reports no damage.
Any other tail inside a turn is a crash, repaired as before: a log cut after the decided
call's `tool/call` is not paused, and repair answers that call `TOOL_OUTCOME_UNKNOWN`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from duraloop.llm import ScriptedModel
from duraloop.log import (
    Event,
    Session,
    check_log,
    check_pairing,
    interrupted_turn_closers,
    pending_approval,
)
from duraloop.loop import AgentLoop, SessionSetup, resume_session, start_session
from duraloop.store import JsonlStore, read_log_file

from ._approval_support import assert_approval_log_valid, counting_tool, types
from ._support import call, make_loop, result_for, tools_step

pytestmark = pytest.mark.anyio

DONE = {"text": "done"}
SCRIPT = [tools_step(call("p1", "p"), call("d", "danger"), call("p2", "p")), DONE]


def _tools(runs: list[str]) -> list[Any]:
    return [
        counting_tool("p", runs, parallel=True),
        counting_tool("danger", runs, requires_approval=True),
    ]


async def _paused_session(tmp_path: Path, *, decide: bool = False) -> Session:
    session, _, loop = make_loop(tmp_path, SCRIPT, _tools([]))
    assert (await loop.run_turn("go")).kind == "paused"
    if decide:
        await loop.decide("d", allow=True)
    return session


@pytest.mark.parametrize("decide", [False, True], ids=["waiting", "decided"])
async def test_dsh_reader_closes_a_paused_log_with_tool_not_started(
    tmp_path: Path, decide: bool
) -> None:
    session = await _paused_session(tmp_path, decide=decide)
    events = list(session.events)
    closers = interrupted_turn_closers(events, keep_paused=False)
    assert types(closers) == ["tool/result", "tool/result", "step/end", "turn/end"]
    assert [c.data["message"]["source"]["callId"] for c in closers[:2]] == ["d", "p2"]
    assert [c.data["error"]["code"] for c in closers[:2]] == ["TOOL_NOT_STARTED"] * 2
    assert closers[-1].data["reason"] == {"kind": "interrupted"}
    assert [c.seq for c in closers] == list(range(events[-1].seq + 1, events[-1].seq + 5))
    closed = Session("s", seed=[*events, *closers])
    check_pairing(closed.derive_messages())
    assert interrupted_turn_closers(events) == []  # duraloop's own load keeps it open


@pytest.mark.parametrize("decide", [False, True], ids=["waiting", "decided"])
async def test_check_log_of_a_paused_log_reports_no_damage(tmp_path: Path, decide: bool) -> None:
    session = await _paused_session(tmp_path, decide=decide)
    report = check_log("s", list(session.events))
    assert report.problems == []
    assert (report.closers_needed, report.open_turn) == (0, 1)


async def test_a_stored_paused_log_reads_as_dsh_reads_it(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    setup = SessionSetup(store=store, model=ScriptedModel(SCRIPT), tools=_tools([]), cwd=tmp_path)
    loop = start_session(setup)
    with loop:
        assert (await loop.run_turn("go")).kind == "paused"
    (log,) = (tmp_path / "sessions").rglob("session.jsonl")
    _, as_dsh_reads_it = read_log_file(log)  # the file alone, no repair
    assert types(as_dsh_reads_it)[-1] == "approval/asked"
    assert pending_approval(as_dsh_reads_it) is not None
    closers = interrupted_turn_closers(as_dsh_reads_it, keep_paused=False)
    check_pairing(Session("x", seed=[*as_dsh_reads_it, *closers]).derive_messages())


async def test_a_fork_of_a_paused_session_closes_the_paused_turn(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    setup = SessionSetup(store=store, model=ScriptedModel(SCRIPT), tools=_tools([]), cwd=tmp_path)
    loop = start_session(setup)
    with loop:
        assert (await loop.run_turn("go")).kind == "paused"
        asked = max(e.seq for e in loop.session.events)
        source = loop.session.id
    child = store.fork(source, boundary=asked)
    forked, repair = resume_session(
        child, SessionSetup(store=store, model=ScriptedModel([DONE]), tools=_tools([]))
    )
    with forked:
        assert forked.paused is None
        events = list(forked.session.events)
        codes = [result_for(events, c).data["error"]["code"] for c in ("d", "p2")]
        assert codes == ["TOOL_NOT_STARTED", "TOOL_NOT_STARTED"]
        assert (await forked.run_turn("instead")).kind == "completed"
        assert_approval_log_valid(forked.session)


def _cut_after(events: list[Event], kind: str, call_id: str | None = None) -> list[Event]:
    """The log up to and including the first `kind` event (of `call_id`, for a tool/call)."""
    for index, event in enumerate(events):
        if event.type == kind and (call_id is None or event.data.get("callId") == call_id):
            return events[: index + 1]
    raise AssertionError(f"no {kind}")


async def _continued_log(tmp_path: Path) -> list[Event]:
    session, _, loop = make_loop(tmp_path, SCRIPT, _tools([]))
    await loop.run_turn("go")
    await loop.decide("d", allow=True)
    await loop.continue_turn()
    return list(session.events)


async def test_a_log_cut_after_the_decided_call_started_is_a_crash(tmp_path: Path) -> None:
    prefix = _cut_after(await _continued_log(tmp_path), "tool/call", "d")
    assert pending_approval(prefix) is None
    closers = interrupted_turn_closers(prefix)
    codes = [c.data["error"]["code"] for c in closers if c.type == "tool/result"]
    assert codes == ["TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED"]


async def test_a_log_cut_right_after_a_decision_keeps_the_decision(tmp_path: Path) -> None:
    runs: list[str] = []
    prefix = _cut_after(await _continued_log(tmp_path), "approval/decided")
    pending = pending_approval(prefix)
    assert pending is not None and pending.outcome == "allowed-once"
    assert interrupted_turn_closers(prefix) == []
    session = Session("s", seed=prefix)
    loop = AgentLoop(session, model=ScriptedModel([DONE]), tools=_tools(runs), cwd=tmp_path)
    assert loop.paused == pending
    assert (await loop.continue_turn()).kind == "completed"
    assert sorted(runs) == ["danger:d", "p:p2"]  # p1 had run in the first process
    assert_approval_log_valid(session)


async def test_a_log_cut_after_a_cancelled_decision_is_a_crash(tmp_path: Path) -> None:
    session = await _paused_session(tmp_path)
    session.append("approval/decided", {"id": pending_id(session), "outcome": "cancelled"})
    events = list(session.events)
    assert pending_approval(events) is None
    closers = interrupted_turn_closers(events)
    assert types(closers)[-1] == "turn/end"


def pending_id(session: Session) -> str:
    """The id of the session's waiting ask."""
    pending = pending_approval(session.events)
    assert pending is not None
    return pending.ask_id


async def test_an_ask_of_an_earlier_step_does_not_pause_a_later_crash(tmp_path: Path) -> None:
    events = await _continued_log(tmp_path)
    # Cut inside step 2 (the answer's step): its step/start is the last event.
    starts = [i for i, e in enumerate(events) if e.type == "step/start"]
    prefix = events[: starts[1] + 1]
    assert pending_approval(prefix) is None
    assert types(interrupted_turn_closers(prefix)) == ["step/end", "turn/end"]
