"""MCP calls that are cancelled, time out, or lose their server (docs/mcp.md#failures).

The servers are real (`_mcp_server.py` over stdio or HTTP); what a server observed (a start, a
cancellation) is read from the markers it writes, never from timings.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from _mcp_support import (
    dispatch,
    free_port,
    http_subprocess,
    pid_alive,
    starts,
    stdio_config,
    wait_for_file,
)

import duraloop.tools.mcp._link as link_module
from duraloop.llm import ScriptedModel
from duraloop.log import Session
from duraloop.log.vocabulary import ABORTED, MCP_SERVER_UNAVAILABLE, TOOL_TIMEOUT
from duraloop.loop import AgentLoop, LoopConfig
from duraloop.testing import assert_log_valid
from duraloop.tools.mcp import McpServerConfig, McpServers

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def connected(transport: str, state: Path, **options: Any) -> AsyncIterator[McpServers]:
    """`McpServers` with one server `t` over stdio or an HTTP subprocess."""
    if transport == "stdio":
        async with McpServers([stdio_config(state, **options)]) as servers:
            yield servers
        return
    async with (
        http_subprocess(state) as url,
        McpServers([McpServerConfig(name="t", url=url, **options)]) as servers,
    ):
        yield servers


def tool_results(session: Session) -> dict[str, dict[str, Any]]:
    """Each `tool/result`'s data, by call id."""
    return {
        event.data["message"]["source"]["callId"]: event.data
        for event in session.events
        if event.type == "tool/result"
    }


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_cancelled_turn_cancels_the_mcp_call_on_the_server(
    transport: str, tmp_path: Path
) -> None:
    script = [{"tool_calls": [{"id": "c1", "name": "mcp__t__slow", "arguments": {"marker": "m"}}]}]
    async with connected(transport, tmp_path) as servers:
        session = Session("s")
        loop = AgentLoop(
            session,
            model=ScriptedModel(script),
            tools=servers.tools,
            cwd=tmp_path,
            config=LoopConfig(max_steps=5),
        )
        outcome: list[Any] = []

        async def run() -> None:
            outcome.append(await loop.run_turn("go"))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(run)
                assert await wait_for_file(tmp_path / "m.started")
                loop.cancel()
        assert await wait_for_file(tmp_path / "m.cancelled"), "the server saw the cancellation"
    [result] = outcome
    assert result.reason["kind"] == "aborted"
    data = tool_results(session)["c1"]
    assert data["error"]["code"] == ABORTED
    assert data["message"]["content"][0]["isError"] is True
    assert_log_valid(session)


async def test_cancelling_the_task_of_a_call_cancels_it_on_the_server(tmp_path: Path) -> None:
    async with connected("stdio", tmp_path) as servers:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(partial(dispatch, servers.tools, "mcp__t__slow", marker="p"))
                assert await wait_for_file(tmp_path / "p.started")
                tasks.cancel_scope.cancel()
        assert await wait_for_file(tmp_path / "p.cancelled")
        after = await dispatch(servers.tools, "mcp__t__echo", text="still here")
    assert after.text == "still here", "the connection outlives a cancelled call"


async def test_a_call_over_its_timeout_is_tool_timeout_and_the_server_is_told(
    tmp_path: Path,
) -> None:
    async with connected("stdio", tmp_path, timeout_seconds=0.5) as servers:
        outcome = await dispatch(servers.tools, "mcp__t__slow", marker="t")
        assert outcome.error is not None
        assert outcome.error["code"] == TOOL_TIMEOUT
        assert await wait_for_file(tmp_path / "t.cancelled")
        after = await dispatch(servers.tools, "mcp__t__echo", text="still here")
    assert after.text == "still here", "a timeout does not cost the connection"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_server_dying_mid_call_is_an_error_result_and_the_next_call_reconnects(
    transport: str, tmp_path: Path
) -> None:
    async with connected(transport, tmp_path) as servers:
        first = await dispatch(servers.tools, "mcp__t__pid")
        with anyio.fail_after(30):
            crashed = await dispatch(servers.tools, "mcp__t__crash")
        assert crashed.is_error
        assert crashed.error == {"name": "ToolError", "code": MCP_SERVER_UNAVAILABLE}
        assert "closed the connection during the call" in crashed.text
        if transport == "stdio":
            second = await dispatch(servers.tools, "mcp__t__pid")
            assert not second.is_error, second.text
            assert int(second.text) != int(first.text), "a new server process"
            assert starts(tmp_path) == [int(first.text), int(second.text)]
        else:
            # Nobody restarts an HTTP server: the next call tries to reconnect and says so.
            second = await dispatch(servers.tools, "mcp__t__pid")
            assert second.error == {"name": "ToolError", "code": MCP_SERVER_UNAVAILABLE}
            assert "could not be restarted or reconnected" in second.text
    if transport == "stdio":
        assert not pid_alive(int(second.text))


async def test_a_server_that_exits_between_calls_is_restarted_by_the_next_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with connected("stdio", tmp_path) as servers:
        first = int((await dispatch(servers.tools, "mcp__t__pid")).text)
        os.kill(first, signal.SIGKILL)
        with anyio.fail_after(30):  # the link notices the end of the server's stdout
            while "the connection was lost" not in caplog.text:  # noqa: ASYNC110 - a log line
                await anyio.sleep(0.02)
        second = await dispatch(servers.tools, "mcp__t__pid")
    assert not second.is_error, second.text
    assert int(second.text) != first


async def test_failed_reconnects_back_off_and_a_later_call_reconnects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(link_module, "RECONNECT_BASE_SECONDS", 0.2)
    async with connected("stdio", tmp_path) as servers:
        await dispatch(servers.tools, "mcp__t__crash")
        (tmp_path / "broken").touch()
        failed = await dispatch(servers.tools, "mcp__t__echo", text="x")
        assert failed.error == {"name": "ToolError", "code": MCP_SERVER_UNAVAILABLE}
        assert "could not be restarted or reconnected" in failed.text
        attempts = len(starts(tmp_path))
        assert attempts == 2, "one restart was tried"
        waiting = await dispatch(servers.tools, "mcp__t__echo", text="x")
        assert "the next reconnect attempt is in" in waiting.text
        assert len(starts(tmp_path)) == attempts, "no attempt while backing off"
        (tmp_path / "broken").unlink()
        for _ in range(600):  # the backoff is 0.2 s; bounded, no time asserted
            recovered = await dispatch(servers.tools, "mcp__t__echo", text="back")
            if "next reconnect attempt" not in recovered.text:
                break
            await anyio.sleep(0.05)
        assert recovered.text == "back"
        assert len(starts(tmp_path)) == attempts + 1


async def test_an_http_server_back_at_its_url_is_reconnected_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(link_module, "RECONNECT_BASE_SECONDS", 0.05)
    port = free_port()
    async with http_subprocess(tmp_path, port) as url:
        config = McpServerConfig(name="t", url=url)
        async with McpServers([config]) as servers:
            first = int((await dispatch(servers.tools, "mcp__t__pid")).text)
            crashed = await dispatch(servers.tools, "mcp__t__crash")
            assert crashed.error == {"name": "ToolError", "code": MCP_SERVER_UNAVAILABLE}
            down = await dispatch(servers.tools, "mcp__t__pid")
            assert down.error == {"name": "ToolError", "code": MCP_SERVER_UNAVAILABLE}
            async with http_subprocess(tmp_path, port):
                for _ in range(600):  # until the back-off has passed; bounded, not timed
                    second = await dispatch(servers.tools, "mcp__t__pid")
                    if not second.is_error:
                        break
                    await anyio.sleep(0.05)
                assert not second.is_error, second.text
                assert int(second.text) != first
