"""Fixtures for the MCP tests: real servers (the SDK's `MCPServer`) over stdio and HTTP.

`_mcp_server.py` is the server. A stdio server and an HTTP server run as subprocesses of
`sys.executable`; the in-process one runs `MCPServer.streamable_http_app` under uvicorn in the
test's own event loop, on a socket bound to a free port.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import uvicorn
from _mcp_server import build_server

from duraloop.tools import (
    CancelSignal,
    Tool,
    ToolCallRequest,
    ToolOutcome,
    ToolPipeline,
    ToolRegistry,
)
from duraloop.tools.mcp import McpServerConfig

SERVER_SCRIPT = Path(__file__).resolve().parent / "_mcp_server.py"
WAIT_SECONDS = 20.0
"""The bound on every wait for a server to do something (not an asserted time)."""


def stdio_config(state: Path, name: str = "t", **options: Any) -> McpServerConfig:
    """A stdio server running `_mcp_server.py`, writing markers to `state`."""
    return McpServerConfig(
        name=name,
        command=(sys.executable, str(SERVER_SCRIPT), "stdio"),
        env={"MCP_TEST_STATE": str(state)},
        **options,
    )


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@asynccontextmanager
async def http_subprocess(state: Path, port: int | None = None) -> AsyncIterator[str]:
    """Run `_mcp_server.py` over streamable HTTP in a subprocess (on `port`); yield its url."""
    port = port if port is not None else free_port()
    env = {**os.environ, "MCP_TEST_STATE": str(state)}
    process = await anyio.open_process(
        [sys.executable, str(SERVER_SCRIPT), "http", str(port)], env=env, stdout=None, stderr=None
    )
    try:
        await _wait_listening(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        with contextlib.suppress(ProcessLookupError):  # a test may have crashed it
            process.kill()
        with anyio.fail_after(WAIT_SECONDS):
            await process.wait()


@asynccontextmanager
async def http_in_process(state: Path) -> AsyncIterator[str]:
    """Serve `build_server(state)` over streamable HTTP in this event loop; yield its url."""
    app = build_server(state).streamable_http_app(host="127.0.0.1")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server.serve, [sock])
        with anyio.fail_after(WAIT_SECONDS):
            while not server.started:  # noqa: ASYNC110 - uvicorn offers no event
                await anyio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            server.should_exit = True
    sock.close()


async def _wait_listening(port: int, process: anyio.abc.Process) -> None:
    with anyio.fail_after(WAIT_SECONDS):
        while True:
            if process.returncode is not None:
                raise RuntimeError(f"the HTTP test server exited with {process.returncode}")
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                await anyio.sleep(0.05)
                continue
            await stream.aclose()
            return


async def wait_for_file(path: Path) -> bool:
    """Wait (bounded) until `path` exists; return whether it does."""
    target = anyio.Path(path)
    with anyio.move_on_after(WAIT_SECONDS):
        while not await target.exists():  # noqa: ASYNC110 - a file, not an event, is the signal
            await anyio.sleep(0.02)
    return await target.exists()


def by_name(tools: tuple[Tool, ...]) -> dict[str, Tool]:
    """The tools keyed by name."""
    return {tool.name: tool for tool in tools}


async def dispatch(tools: tuple[Tool, ...], name: str, **arguments: Any) -> ToolOutcome:
    """Run one call of `name` through a `ToolPipeline` (dispatch then finalize)."""
    pipeline = ToolPipeline(ToolRegistry(tools), cwd=Path.cwd(), session_id="s")
    call = ToolCallRequest(
        call_id="c1", name=name, raw_arguments="", arguments=arguments, turn=1, step=1
    )
    signal = CancelSignal()
    outcome = await pipeline.dispatch(call, signal)
    return await pipeline.finalize(call, outcome, signal)


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs (a zombie counts as ended)."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"


def starts(state: Path) -> list[int]:
    """The process ids of every start of the server, in order."""
    path = state / "starts"
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def iter_texts(outcome: ToolOutcome) -> Iterator[str]:
    """The outcome's text blocks."""
    for block in outcome.content:
        text = block.get("text")
        if isinstance(text, str):
            yield text
