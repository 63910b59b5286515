"""The log's side of approvals: the paused shape and the turn enclosure (docs/approvals.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from duraloop.errors import InvariantError
from duraloop.llm import ScriptedModel
from duraloop.log import Event, Session, interrupted_turn_closers, pending_approval
from duraloop.loop import AgentLoop, LoopConfig
from duraloop.testing import assert_log_valid
from duraloop.tools import Tool, tool


@tool(requires_approval=True)
def danger(path: str) -> str:
    """Delete a path."""
    return f"deleted {path}"


@tool(parallel=True)
def p(x: int = 0) -> str:
    """Echo."""
    return f"p{x}"


def _paused(tmp_path: Path, tools: list[Tool] | None = None) -> Session:
    script: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {"id": "a", "name": "p", "arguments": {"x": 1}},
                {"id": "b", "name": "danger", "arguments": {"path": "build"}},
                {"id": "c", "name": "p", "arguments": {"x": 2}},
            ]
        },
        {"text": "done"},
    ]
    session = Session("s")
    loop = AgentLoop(
        session,
        model=ScriptedModel(script),
        tools=tools or [p, danger],
        cwd=tmp_path,
        config=LoopConfig(),
    )
    result = anyio.run(loop.run_turn, "go")
    assert result.kind == "paused"
    return session


def test_a_paused_log_is_recognized_and_gets_no_closers(tmp_path: Path) -> None:
    events = list(_paused(tmp_path).events)
    pending = pending_approval(events)
    assert pending is not None
    assert (pending.call_id, pending.tool_name, pending.decided) == ("b", "danger", False)
    assert pending.arguments == '{"path":"build"}'
    assert interrupted_turn_closers(events) == []


def test_dsh_reading_a_paused_log_closes_it_with_not_started_results(tmp_path: Path) -> None:
    events = list(_paused(tmp_path).events)
    closers = interrupted_turn_closers(events, keep_paused=False)
    codes = [c.data.get("error", {}).get("code") for c in closers if c.type == "tool/result"]
    assert codes == ["TOOL_NOT_STARTED", "TOOL_NOT_STARTED"]
    assert [c.type for c in closers][-2:] == ["step/end", "turn/end"]
    Session("s2", seed=[*events, *closers])  # the closed log seeds: it pairs


def test_a_crash_tail_with_a_recorded_unanswered_call_is_not_a_pause(tmp_path: Path) -> None:
    events = list(_paused(tmp_path).events)
    asked = next(i for i, e in enumerate(events) if e.type == "approval/asked")
    result_a = next(i for i, e in enumerate(events) if e.type == "tool/result")
    assert result_a < asked  # the barrier: the earlier call committed before the ask
    crash_tail = [e for i, e in enumerate(events) if i != result_a]
    crash_tail = [
        Event(e.type, n, e.time, e.data, e.source_event_seqs, e.surface_op)
        for n, e in enumerate(crash_tail)
    ]
    assert pending_approval(crash_tail) is None
    assert interrupted_turn_closers(crash_tail) != []


def test_approval_events_outside_an_open_turn_are_refused() -> None:
    session = Session("s")
    with pytest.raises(InvariantError, match="outside any open turn"):
        session.append("approval/asked", {"id": "x", "toolName": "bash", "callId": "c"})
    assert session.events == [] or all(e.type != "approval/asked" for e in session.events)


def test_the_law_checks_accept_a_paused_log_and_its_continuation(tmp_path: Path) -> None:
    session = _paused(tmp_path)
    assert_log_valid(session)  # open, unpaired at its tail, and valid
    loop = AgentLoop(
        session, model=ScriptedModel([{"text": "done"}]), tools=[p, danger], cwd=tmp_path
    )

    async def approve() -> None:
        await loop.decide("b", allow=True)
        result = await loop.continue_turn()
        assert result.kind == "completed"

    anyio.run(approve)
    assert_log_valid(session)


def test_the_law_checks_refuse_a_tool_call_before_its_decision(tmp_path: Path) -> None:
    events = list(_paused(tmp_path).events)
    asked = next(e for e in events if e.type == "approval/asked")
    seq = len(events)
    bad = [
        *events,
        Event(
            "tool/call",
            seq,
            asked.time,
            {"turn": 1, "step": 1, "callId": "b", "name": "danger", "arguments": "{}"},
        ),
    ]
    with pytest.raises(AssertionError, match="before its approval was decided"):
        assert_log_valid(Session("s", seed=bad))
