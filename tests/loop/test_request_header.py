"""Request headers (docs/log.md#request-headers): one `request/header` per change of the request
envelope, with reason `initial`, `resume` or `change`; the header in force folds from the log.

Model-visible means logged (Law 3): the system prompt and tool schemas a request carries
must be recoverable from the log, so every change of them is a new snapshot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from duraloop.llm import ScriptedModel
from duraloop.log import Session
from duraloop.loop import AgentLoop, LoopConfig
from duraloop.tools import ToolRegistry, tool


@tool(parallel=True)
def alpha() -> str:
    """First tool."""
    return "a"


@tool(parallel=True)
def beta() -> str:
    """Second tool."""
    return "b"


def _headers(session: Session) -> list[dict[str, Any]]:
    return [e.data for e in session.events if e.type == "request/header"]


def _latest_header(session: Session) -> dict[str, Any]:
    header: dict[str, Any] = _headers(session)[-1]["header"]
    return header


@pytest.mark.anyio
async def test_first_request_logs_initial_and_unchanged_steps_log_nothing(tmp_path: Path) -> None:
    model = ScriptedModel([{"tool_calls": [{"name": "alpha", "arguments": {}}]}, {"text": "done"}])
    session = Session("s")
    loop = AgentLoop(
        session,
        model=model,
        tools=[alpha],
        cwd=tmp_path,
        config=LoopConfig(system_prompt="Be brief."),
    )
    await loop.run_turn("go")
    headers = _headers(session)
    assert [h["reason"] for h in headers] == ["initial"]
    header = headers[0]["header"]
    assert header["config"] == {"provider": "scripted", "model": "scripted"}
    assert header["system"] == "Be brief."
    assert [t["name"] for t in header["tools"]] == ["alpha"]
    # Law 3: the logged header is what both requests carried.
    for request in model.requests:
        assert request.system == header["system"]
        assert [t.to_json() for t in request.tools] == header["tools"]
    contexts = [e.data for e in session.events if e.type == "request/context"]
    assert contexts == [{"provider": "scripted", "model": "scripted"}]


@pytest.mark.anyio
async def test_a_changed_envelope_logs_change_and_the_latest_header_is_in_force(
    tmp_path: Path,
) -> None:
    registry = ToolRegistry([alpha])
    model = ScriptedModel([{"text": "one"}, {"text": "two"}])
    session = Session("s")
    loop = AgentLoop(
        session,
        model=model,
        tools=registry,
        cwd=tmp_path,
        config=LoopConfig(system_prompt="Be brief."),
    )
    await loop.run_turn("first")
    registry.register(beta)
    await loop.run_turn("second")
    assert [h["reason"] for h in _headers(session)] == ["initial", "change"]
    assert [t["name"] for t in _latest_header(session)["tools"]] == ["alpha", "beta"]
    assert [t.name for t in model.requests[-1].tools] == ["alpha", "beta"]


@pytest.mark.anyio
async def test_a_new_loop_over_an_existing_log_logs_resume_first(tmp_path: Path) -> None:
    session = Session("s")
    first = AgentLoop(
        session,
        model=ScriptedModel([{"text": "one"}]),
        tools=[alpha],
        cwd=tmp_path,
        config=LoopConfig(system_prompt="Be brief."),
    )
    await first.run_turn("first")
    resumed = Session("s", seed=session.events)
    again = AgentLoop(
        resumed,
        model=ScriptedModel([{"text": "two"}]),
        tools=[alpha],
        cwd=tmp_path,
        config=LoopConfig(system_prompt="Be brief."),
    )
    await again.run_turn("second")
    assert [h["reason"] for h in _headers(resumed)] == ["initial", "resume"]
    # An unchanged route logs no second request/context after resume.
    assert sum(1 for e in resumed.events if e.type == "request/context") == 1


@pytest.mark.anyio
async def test_an_empty_system_prompt_and_no_tools_are_absent_from_the_header(
    tmp_path: Path,
) -> None:
    session = Session("s")
    loop = AgentLoop(
        session,
        model=ScriptedModel([{"text": "hi"}]),
        cwd=tmp_path,
        config=LoopConfig(system_prompt=""),
    )
    await loop.run_turn("go")
    header = _latest_header(session)
    assert "system" not in header
    assert "tools" not in header
