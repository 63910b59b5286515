"""A paused turn survives the process (docs/approvals.md#pausing, #continuing).

Pause, close, resume from a real store (JSONL, SQLite): the turn is still open and paused,
not repaired; a decision is durable when `decide()` returns, so one process can decide and
another continue. Refused operations append nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from duraloop.errors import ApprovalError
from duraloop.llm import ScriptedModel
from duraloop.loop import AgentLoop, SessionSetup, resume_session, start_session
from duraloop.store import JsonlStore, SessionStore, SqliteStore

from ._approval_support import assert_approval_log_valid, audit, counting_tool, outcomes, types
from ._support import call, result_for, result_text, tools_step

pytestmark = pytest.mark.anyio

DONE = {"text": "done"}


@pytest.fixture(params=["jsonl", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    """A real store in `tmp_path`."""
    if request.param == "jsonl":
        yield JsonlStore(tmp_path / "sessions")
    else:
        with SqliteStore(tmp_path / "sessions.db") as sqlite:
            yield sqlite


def _setup(store: SessionStore, tmp_path: Path, runs: list[str], script: list[Any]) -> SessionSetup:
    tools = [
        counting_tool("p", runs, parallel=True),
        counting_tool("danger", runs, requires_approval=True),
    ]
    return SessionSetup(store=store, model=ScriptedModel(script), tools=tools, cwd=tmp_path)


async def _paused(store: SessionStore, tmp_path: Path, runs: list[str]) -> tuple[str, Any]:
    """Start a session whose first turn pauses on call `d` (after `p1`, before `p2`)."""
    script = [tools_step(call("p1", "p"), call("d", "danger"), call("p2", "p")), DONE]
    loop = start_session(_setup(store, tmp_path, runs, script))
    with loop:
        result = await loop.run_turn("go")
    assert result.kind == "paused"
    return loop.session.id, result.approval


def _stored_types(store: SessionStore, session_id: str) -> list[str]:
    _, events = store.read(session_id)
    return types(events)


async def test_a_resumed_paused_session_is_not_repaired_and_stays_paused(
    store: SessionStore, tmp_path: Path
) -> None:
    runs: list[str] = []
    sid, paused = await _paused(store, tmp_path, runs)
    assert _stored_types(store, sid)[-1] == "approval/asked"  # the ask is durable
    loop, repair = resume_session(sid, _setup(store, tmp_path, runs, []))
    with loop:
        assert repair.closers == [] and not repair.repaired
        assert loop.paused == paused
        assert loop.pending_approvals() == [paused]
        assert_approval_log_valid(loop.session)
    assert "turn/end" not in _stored_types(store, sid)


async def test_decide_in_one_loop_then_continue_in_another(
    store: SessionStore, tmp_path: Path
) -> None:
    runs: list[str] = []
    sid, _ = await _paused(store, tmp_path, runs)
    deciding, _ = resume_session(sid, _setup(store, tmp_path, runs, []))
    with deciding:
        decided = await deciding.decide("d", allow=True)
        assert decided.outcome == "allowed-once"
        assert _stored_types(store, sid)[-1] == "approval/decided"  # durable on return
        assert deciding.pending_approvals() == []
        assert deciding.paused == decided
    continuing, repair = resume_session(sid, _setup(store, tmp_path, runs, [DONE]))
    with continuing:
        assert not repair.repaired
        assert continuing.paused is not None and continuing.paused.decided
        result = await continuing.continue_turn()
        assert (result.kind, result.text) == ("completed", "done")
        assert continuing.paused is None
        assert_approval_log_valid(continuing.session)
        events = list(continuing.session.events)
    assert sorted(runs) == ["danger:d", "p:p1", "p:p2"]
    assert [ask["callId"] for ask, _ in audit(events)] == ["d"]
    assert result_text(result_for(events, "d")) == "danger d ran"


async def test_a_rejection_decided_elsewhere_is_carried_out_with_its_feedback(
    store: SessionStore, tmp_path: Path
) -> None:
    runs: list[str] = []
    sid, _ = await _paused(store, tmp_path, runs)
    deciding, _ = resume_session(sid, _setup(store, tmp_path, runs, []))
    with deciding:
        await deciding.decide("d", allow=False, feedback="keep it")
    continuing, _ = resume_session(sid, _setup(store, tmp_path, runs, [DONE]))
    with continuing:
        assert (await continuing.continue_turn()).kind == "completed"
        events = list(continuing.session.events)
    assert result_text(result_for(events, "d")) == (
        'Error: the user rejected tool "danger" with feedback: keep it'
    )
    assert sorted(runs) == ["p:p1", "p:p2"]
    assert outcomes(events) == ["rejected"]


async def test_run_turn_with_a_prompt_while_paused_is_refused_and_appends_nothing(
    store: SessionStore, tmp_path: Path
) -> None:
    runs: list[str] = []
    sid, _ = await _paused(store, tmp_path, runs)
    loop, _ = resume_session(sid, _setup(store, tmp_path, runs, [DONE]))
    with loop:
        before = list(loop.session.events)
        with pytest.raises(ApprovalError, match="is paused: call 'd' \\(danger\\) waits"):
            await loop.run_turn("something else")
        with pytest.raises(ApprovalError):
            await loop.run_turn()  # undecided: nothing to continue
        assert list(loop.session.events) == before
    _, stored = store.read(sid)
    assert stored == before


async def test_refused_decisions_append_nothing(store: SessionStore, tmp_path: Path) -> None:
    runs: list[str] = []
    fresh = start_session(_setup(store, tmp_path, runs, [DONE]))
    with fresh:
        with pytest.raises(ApprovalError, match="has no call waiting for approval"):
            await fresh.decide("d", allow=True)
        assert list(fresh.session.events) == []
        with pytest.raises(ApprovalError, match="has no paused turn to continue"):
            await fresh.continue_turn()
    sid, _ = await _paused(store, tmp_path, runs)
    loop, _ = resume_session(sid, _setup(store, tmp_path, runs, []))
    with loop:
        before = list(loop.session.events)
        with pytest.raises(ApprovalError, match="the waiting call is 'd'"):
            await loop.decide("p2", allow=True)
        with pytest.raises(ApprovalError, match="waits for approval"):
            await loop.continue_turn()  # undecided
        with pytest.raises(ApprovalError, match="takes True or False"):
            await loop.decide("d", allow="yes")  # type: ignore[arg-type]
        with pytest.raises(ApprovalError, match="takes a str or None"):
            await loop.decide("d", allow=False, feedback=123)  # type: ignore[arg-type]
        assert list(loop.session.events) == before
        await loop.decide("d", allow=True)
        decided = list(loop.session.events)
        with pytest.raises(ApprovalError, match="is already decided \\(allowed-once\\)"):
            await loop.decide("d", allow=False)
        assert list(loop.session.events) == decided
    assert runs == ["p:p1"]


async def test_cancel_while_paused_closes_the_turn_aborted(
    store: SessionStore, tmp_path: Path
) -> None:
    runs: list[str] = []
    sid, _ = await _paused(store, tmp_path, runs)
    loop, _ = resume_session(sid, _setup(store, tmp_path, runs, [DONE]))
    with loop:
        before = len(loop.session.events)
        loop.cancel()
        tail = list(loop.session.events)[before:]
        assert loop.paused is None and loop.pending_approvals() == []
        assert types(tail) == [
            "approval/decided",
            "tool/call",
            "tool/result",
            "tool/call",
            "tool/result",
            "step/end",
            "turn/end",
        ]
        assert tail[0].data["outcome"] == "cancelled"
        assert [e.data["callId"] for e in tail if e.type == "tool/call"] == ["d", "p2"]
        for event in (tail[2], tail[4]):
            assert event.data["error"]["code"] == "ABORTED_BEFORE_DISPATCH"
        assert tail[-1].data["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}
        assert_approval_log_valid(loop.session)
        assert _stored_types(store, sid)[-1] == "turn/end"  # durable at once
        result = await loop.run_turn("a new turn")
        assert (result.kind, result.turn) == ("completed", 2)
        assert_approval_log_valid(loop.session)
    assert runs == ["p:p1"]


async def test_cancel_after_a_decision_records_no_second_decision(
    store: SessionStore, tmp_path: Path
) -> None:
    runs: list[str] = []
    sid, _ = await _paused(store, tmp_path, runs)
    loop, _ = resume_session(sid, _setup(store, tmp_path, runs, []))
    with loop:
        await loop.decide("d", allow=True)
        loop.cancel({"kind": "user", "why": "changed my mind"})
        events = list(loop.session.events)
    assert outcomes(events) == ["allowed-once"]
    assert result_for(events, "d").data["error"]["code"] == "ABORTED_BEFORE_DISPATCH"
    assert events[-1].data["reason"]["reason"] == {"kind": "user", "why": "changed my mind"}
    assert runs == ["p:p1"]  # the allowed call never ran
    assert_approval_log_valid(loop.session)


async def test_cancel_while_paused_in_the_pausing_loop(tmp_path: Path) -> None:
    runs: list[str] = []
    store = JsonlStore(tmp_path / "sessions")
    script = [tools_step(call("d", "danger")), DONE]
    loop = start_session(_setup(store, tmp_path, runs, script))
    with loop:
        assert (await loop.run_turn("go")).kind == "paused"
        loop.cancel()
        assert types(loop.session.events)[-2:] == ["step/end", "turn/end"]
        assert (await loop.run_turn("again")).kind == "completed"
    assert runs == []


def test_a_loop_over_an_in_memory_paused_session_sees_the_pause(tmp_path: Path) -> None:
    import anyio

    from duraloop.log import Session

    runs: list[str] = []
    session = Session("s")
    tools = [counting_tool("danger", runs, requires_approval=True)]
    first = AgentLoop(
        session, model=ScriptedModel([tools_step(call("d", "danger"))]), tools=tools, cwd=tmp_path
    )
    assert anyio.run(first.run_turn, "go").kind == "paused"
    second = AgentLoop(session, model=ScriptedModel([DONE]), tools=tools, cwd=tmp_path)
    assert second.paused == first.paused
