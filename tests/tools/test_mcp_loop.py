"""MCP tools in an `AgentLoop` turn: the scheduler, hooks and the log treat them like any tool.

See docs/mcp.md#parallel-calls. Concurrency is shown by the server itself: each `rendezvous`
call reports how many calls were in flight at once on the server, so no timing is asserted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _mcp_support import stdio_config

from duraloop.llm import ScriptedModel
from duraloop.log import Session
from duraloop.loop import AgentLoop, LoopConfig
from duraloop.testing import assert_log_valid
from duraloop.tools import Deny, ToolCallRequest, ToolHooks
from duraloop.tools.mcp import McpServers

pytestmark = pytest.mark.anyio


def rendezvous(call_id: str, name: str, **extra: Any) -> dict[str, Any]:
    return {"id": call_id, "name": "mcp__t__rendezvous", "arguments": {"name": name, **extra}}


def results(session: Session) -> dict[str, tuple[bool, str]]:
    """`(isError, text)` of each `tool/result`, by call id."""
    found = {}
    for event in session.events:
        if event.type == "tool/result":
            block = event.data["message"]["content"][0]
            text = "".join(part.get("text", "") for part in block["content"])
            found[block["toolCallId"]] = (block["isError"], text)
    return found


async def run(tmp_path: Path, script: list[dict[str, Any]], **options: Any) -> Session:
    hooks = options.pop("hooks", None)
    async with McpServers([stdio_config(tmp_path, **options)]) as servers:
        session = Session("s")
        loop = AgentLoop(
            session,
            model=ScriptedModel(script),
            tools=servers.tools,
            cwd=tmp_path,
            config=LoopConfig(max_steps=5),
            tool_hooks=hooks,
        )
        result = await loop.run_turn("go")
    assert result.reason["kind"] == "completed"
    assert_log_valid(session)
    return session


async def test_two_read_only_mcp_calls_in_one_step_run_concurrently(tmp_path: Path) -> None:
    script: list[dict[str, Any]] = [
        {"tool_calls": [rendezvous("c1", "a"), rendezvous("c2", "b")]},
        {"text": "done"},
    ]
    session = await run(tmp_path, script)
    found = results(session)
    for call_id, name in (("c1", "a"), ("c2", "b")):
        is_error, text = found[call_id]
        assert not is_error
        assert json.loads(text) == {"name": name, "max_in_flight": 2}


async def test_an_mcp_tool_overridden_exclusive_runs_alone(tmp_path: Path) -> None:
    script: list[dict[str, Any]] = [
        {
            "tool_calls": [
                rendezvous("c1", "a", wait_seconds=0.2),
                rendezvous("c2", "b", wait_seconds=0.2),
            ]
        },
        {"text": "done"},
    ]
    session = await run(tmp_path, script, parallel={"rendezvous": False})
    found = results(session)
    assert [json.loads(found[c][1])["max_in_flight"] for c in ("c1", "c2")] == [1, 1]


async def test_a_pre_execute_hook_denies_an_mcp_call_before_the_server_sees_it(
    tmp_path: Path,
) -> None:
    def no_wipe(call: ToolCallRequest) -> Deny | None:
        return Deny("wiping is not allowed here") if call.name == "mcp__t__wipe" else None

    script: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {"id": "c1", "name": "mcp__t__wipe", "arguments": {}},
                {"id": "c2", "name": "mcp__t__echo", "arguments": {"text": "kept"}},
            ]
        },
        {"text": "done"},
    ]
    session = await run(tmp_path, script, hooks=ToolHooks(pre_execute=[no_wipe]))
    found = results(session)
    assert found["c1"] == (True, "Error: wiping is not allowed here")
    assert found["c2"] == (False, "kept")
