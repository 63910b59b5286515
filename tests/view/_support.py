"""A real viewer for the tests: uvicorn on a free loopback port, and sessions built by the loop.

`serve(app)` runs the app in a thread on 127.0.0.1 and yields a client bound to it;
`story_session` writes, with `AgentLoop` and `ScriptedModel`, a session with parallel calls,
a step that fails mid-way (a validator crashes while a result is committed: the loop answers
the recorded call `TOOL_OUTCOME_UNKNOWN` and the unstarted one `TOOL_NOT_STARTED`), and
`paused_session` one whose call waits for approval.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import uvicorn

from duraloop.llm import ScriptedModel
from duraloop.log import Event, result_call_id
from duraloop.loop import SessionSetup, start_session
from duraloop.store import SessionStore
from duraloop.tools import Tool, ToolContext

TOKEN = "test-token-0123456789"
XSS = '<script>alert("x")</script><img src=x onerror=alert(1)> [a](javascript:alert(1))'


@contextmanager
def serve(app: Any) -> Iterator[httpx2.Client]:
    """Serve `app` on a free 127.0.0.1 port in a thread; yield a client with its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    port = sock.getsockname()[1]
    try:
        with httpx2.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def auth() -> dict[str, str]:
    """The token header every API request carries."""
    return {"X-Duraloop-Token": TOKEN}


def _object(arguments: Any) -> Any:
    if not isinstance(arguments, dict):
        raise ValueError("arguments must be a JSON object")
    return arguments


def tool(name: str, *, parallel: bool, output: str = "", requires_approval: bool = False) -> Tool:
    """A tool that waits a little (so parallel calls overlap) and returns `output`."""

    async def body(args: Any, ctx: ToolContext) -> str:
        await anyio.sleep(0.02)
        return output or f"{name} {ctx.call_id} ok"

    return Tool(
        name=name,
        description=f"The {name} tool.",
        parameters={"type": "object", "properties": {}},
        validator=_object,
        body=body,
        parallel=parallel,
        requires_approval=requires_approval,
    )


class StampCrashError(Exception):
    """The validator's crash that fails the second turn's step."""


def story_session(store: SessionStore, cwd: Path, session_id: str = "story") -> str:
    """Write the session of the module docstring into `store`; return its id."""
    script: list[dict[str, Any]] = [
        {
            "reasoning": "two reads at once",
            "text": XSS,
            "tool_calls": [
                {"id": "read-1", "name": "read", "arguments": {"path": "a"}},
                {"id": "read-2", "name": "read", "arguments": {"path": "b"}},
            ],
        },
        {"text": "done reading"},
        {
            "text": "stamping",
            "tool_calls": [
                {"id": "stamp-1", "name": "stamp", "arguments": {}},
                {"id": "log-1", "name": "log", "arguments": {}},
            ],
        },
    ]
    tools = [
        tool("read", parallel=True, output=XSS),
        tool("stamp", parallel=False),
        tool("log", parallel=False),
    ]
    setup = SessionSetup(store=store, model=ScriptedModel(script), tools=tools, cwd=cwd)
    loop = start_session(setup, session_id=session_id)
    with loop:
        anyio.run(loop.run_turn, f"read both files {XSS}")
        crashed = {"done": False}

        def crash(event: Event) -> None:
            if event.type != "tool/result" or crashed["done"]:
                return
            if result_call_id(event.data["message"]) == "stamp-1":
                crashed["done"] = True
                raise StampCrashError("the audit hook crashed")

        loop.session.add_validator(crash)
        try:
            anyio.run(loop.run_turn, "stamp it")
        except StampCrashError:
            pass
        else:  # pragma: no cover - the story needs the failed step
            raise AssertionError("the second turn did not fail")
    return session_id


def paused_session(store: SessionStore, cwd: Path, session_id: str = "paused") -> str:
    """Write a session whose first turn waits for approval of call `write-1`."""
    script: list[dict[str, Any]] = [
        {"text": "writing", "tool_calls": [{"id": "write-1", "name": "write", "arguments": {}}]},
        {"text": "written"},
    ]
    tools = [tool("write", parallel=False, requires_approval=True)]
    setup = SessionSetup(store=store, model=ScriptedModel(script), tools=tools, cwd=cwd)
    loop = start_session(setup, session_id=session_id)
    with loop:
        result = anyio.run(loop.run_turn, "write the file")
    assert result.approval is not None and result.approval.call_id == "write-1"
    return session_id
