"""Sessions the browser tests look at, written by the library (AgentLoop + ScriptedModel).

Each builder writes into a JSONL store at `root` (a fresh `JsonlStore` per call, as another
process would) and returns the session id. Call them through `_support.in_thread`: they run
their own event loop, away from Playwright's.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from duraloop.llm import ScriptedModel
from duraloop.log import Event, Session
from duraloop.loop import (
    AgentLoop,
    LoopConfig,
    SessionSetup,
    fork_session,
    resume_session,
    start_session,
)
from duraloop.store import JsonlStore
from duraloop.tools import Tool, ToolContext

XSS_SCRIPT = "<script>window.__xss=1</script>"
XSS_IMG = '<img src=x onerror="window.__xss=1">'
XSS_LINK = "[x](javascript:window.__xss=1)"
XSS_PAYLOAD = f"{XSS_SCRIPT} {XSS_IMG} {XSS_LINK}"


class StepFailureError(Exception):
    """The audit hook's failure that ends the failed step (a policy service outage)."""


def _object(arguments: Any) -> Any:
    if not isinstance(arguments, dict):
        raise ValueError("arguments must be a JSON object")
    return arguments


def slow_tool(name: str, seconds: float, *, parallel: bool = True) -> Tool:
    """A tool that takes `seconds` and answers `<name> <call id> ok`."""

    async def body(args: Any, ctx: ToolContext) -> str:
        await anyio.sleep(seconds)
        return f"{name} {ctx.call_id} ok"

    return Tool(
        name=name,
        description=f"Take {seconds} s.",
        parameters={"type": "object", "properties": {}},
        validator=_object,
        body=body,
        parallel=parallel,
    )


def gate_tool(gate: threading.Event, *, name: str = "wait_for_gate") -> Tool:
    """A tool whose call returns once the test sets `gate`."""

    async def body(args: Any, ctx: ToolContext) -> str:
        opened = await anyio.to_thread.run_sync(gate.wait, 30.0)
        return "the gate opened" if opened else "the gate stayed shut"

    return Tool(
        name=name,
        description="Wait for the test.",
        parameters={"type": "object", "properties": {}},
        validator=_object,
        body=body,
        parallel=False,
    )


def echo_tool() -> Tool:
    """A tool answering its `text` argument verbatim (untrusted output for the XSS cases)."""

    async def body(args: Any, ctx: ToolContext) -> str:
        return str(args.get("text", ""))

    return Tool(
        name="echo",
        description="Echo a text.",
        parameters={"type": "object", "properties": {"text": {"type": "string"}}},
        validator=_object,
        body=body,
        parallel=True,
    )


def approval_tool(runs: list[str]) -> Tool:
    """A tool that asks a person before each call; records its runs."""

    async def body(args: Any, ctx: ToolContext) -> str:
        runs.append(ctx.call_id)
        return f"deployed ({ctx.call_id})"

    return Tool(
        name="deploy",
        description="Deploy (asks first).",
        parameters={"type": "object", "properties": {}},
        validator=_object,
        body=body,
        requires_approval=True,
    )


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    """A scripted tool call."""
    return {"id": call_id, "name": name, "arguments": arguments}


def setup(
    root: Path, cwd: Path, script: Sequence[dict[str, Any]], tools: list[Tool]
) -> SessionSetup:
    """A setup over a fresh `JsonlStore(root)`."""
    cwd.mkdir(parents=True, exist_ok=True)
    return SessionSetup(
        store=JsonlStore(root), model=ScriptedModel(list(script)), tools=tools, cwd=cwd
    )


def _fail_on_result(call_id: str) -> Any:
    """A validator failing once, on the first result of `call_id` (not on its recovery)."""
    failed: list[str] = []

    def audit(event: Event) -> None:
        if event.type != "tool/result" or failed:
            return
        if event.data["message"]["source"]["callId"] == call_id:
            failed.append(call_id)
            raise StepFailureError("audit hook crashed: the policy service is unreachable")

    return audit


def build_parallel_and_recovered(root: Path, cwd: Path) -> tuple[str, str]:
    """Turn 1: a retried model request, three parallel calls (0.3 s each), then an answer;
    turn 2: a step that fails.

    Turn 2 calls `stamp` (exclusive) then `note`; an audit hook fails on stamp's result, so
    stamp is answered TOOL_OUTCOME_UNKNOWN and note TOOL_NOT_STARTED, and the turn ends
    `error`. Then the session is forked after turn 1. Returns (session id, fork id).
    """
    script: list[dict[str, Any]] = [
        {"error": {"code": "TRANSPORT", "message": "connection reset by the provider"}},
        {
            "reasoning": "Three independent reads: run them together.",
            "text": "Reading the three notes in parallel.",
            "tool_calls": [call("read-1", "read"), call("read-2", "read"), call("read-3", "read")],
        },
        {"text": "Read all three notes."},
        {
            "text": "Stamping, then noting.",
            "tool_calls": [call("stamp-1", "stamp"), call("note-1", "note")],
        },
    ]
    tools = [
        slow_tool("read", 0.3),
        slow_tool("stamp", 0.05, parallel=False),
        slow_tool("note", 0.05, parallel=False),
    ]
    configured = setup(root, cwd, script, tools)

    async def run() -> str:
        with start_session(configured) as loop:
            first = await loop.run_turn("Read the notes.")
            assert first.kind == "completed", first
            loop.session.add_validator(_fail_on_result("stamp-1"))
            try:
                await loop.run_turn("Stamp the release and note it.")
            except StepFailureError:
                pass
            else:
                raise AssertionError("turn 2 should have failed")
            return loop.session.id

    session_id = anyio.run(run)
    forked = setup(root, cwd, [], tools)
    with fork_session(session_id, forked, boundary=_turn_end_seq(root, session_id, 1)) as child:
        fork_id = child.session.id
    return session_id, fork_id


def _turn_end_seq(root: Path, session_id: str, turn: int) -> int:
    _, events = JsonlStore(root).read(session_id)
    return next(e.seq for e in events if e.type == "turn/end" and e.data["turn"] == turn)


def build_simple(root: Path, cwd: Path, prompt: str = "Say hello.", text: str = "Hello.") -> str:
    """One completed turn: a prompt and a text answer."""

    async def run() -> str:
        with start_session(setup(root, cwd, [{"text": text}], [])) as loop:
            await loop.run_turn(prompt)
            return loop.session.id

    return anyio.run(run)


def build_xss(root: Path, cwd: Path) -> str:
    """A session whose prompt, model text, reasoning, tool arguments and tool result all hold
    the XSS payloads."""
    script: list[dict[str, Any]] = [
        {
            "reasoning": XSS_PAYLOAD,
            "text": XSS_PAYLOAD,
            "tool_calls": [call("xss-1", "echo", text=XSS_PAYLOAD)],
        },
        {"text": f"Model says: {XSS_PAYLOAD}"},
    ]

    async def run() -> str:
        with start_session(setup(root, cwd, script, [echo_tool()])) as loop:
            await loop.run_turn(f"Prompt: {XSS_PAYLOAD}")
            return loop.session.id

    return anyio.run(run)


def build_paused(root: Path, cwd: Path, runs: list[str]) -> str:
    """A session paused on call `deploy-1` of tool `deploy`, waiting for a person."""
    script: list[dict[str, Any]] = [
        {"text": "Deploying now.", "tool_calls": [call("deploy-1", "deploy")]},
        {"text": "Deployed and verified."},
    ]

    async def run() -> str:
        with start_session(setup(root, cwd, script, [approval_tool(runs)])) as loop:
            result = await loop.run_turn("Deploy the release.")
            assert result.kind == "paused", result
            return loop.session.id

    return anyio.run(run)


def _large_turn(turn: int) -> list[dict[str, Any]]:
    return [
        {
            "reasoning": f"Turn {turn}: eight checks first.",
            "text": "Checking the workspace.",
            "tool_calls": [call(f"t{turn}-a{k}", "look", i=k) for k in range(8)],
        },
        {
            "text": "Eight more checks in parallel.",
            "tool_calls": [call(f"t{turn}-b{k}", "look", i=k) for k in range(8)],
        },
        {"text": f"Done with turn {turn}: everything looks fine."},
    ]


def build_large(root: Path, cwd: Path, events: int) -> tuple[str, int]:
    """A session of at least `events` events (~168 a turn), run in memory, stored in one batch.

    Returns (session id, number of events stored).
    """
    cwd.mkdir(parents=True, exist_ok=True)
    turns = events // 168 + 1
    script: list[dict[str, Any]] = [
        response for turn in range(1, turns + 1) for response in _large_turn(turn)
    ]
    session = Session("large-session")
    look = slow_tool("look", 0.0)
    loop = AgentLoop(
        session,
        model=ScriptedModel(script),
        tools=[look],
        cwd=cwd,
        config=LoopConfig(max_steps=10),
    )

    async def run() -> None:
        for turn in range(1, turns + 1):
            await loop.run_turn(f"Task {turn}: check the workspace and report.")

    anyio.run(run)
    loop.close()
    store = JsonlStore(root)
    stored = Session(session.id, seed=list(session.events), header=session.header)
    writer = store.open_writer(stored)
    copy = AgentLoop(stored, model=ScriptedModel([]), tools=[look], cwd=cwd, durability=writer)
    copy.close()
    writer.close()
    _, read = store.read(session.id)
    return session.id, len(read)


def run_gated_turn(root: Path, cwd: Path, session_id: str, gate: threading.Event) -> str:
    """Resume the session and run a turn whose tool call waits for `gate`; its result kind."""
    script: list[dict[str, Any]] = [
        {"text": "Waiting for the gate.", "tool_calls": [call("gate-1", "wait_for_gate")]},
        {"text": "Gate passed."},
    ]

    async def run() -> str:
        loop, _repair = resume_session(session_id, setup(root, cwd, script, [gate_tool(gate)]))
        with loop:
            result = await loop.run_turn("Go through the gate.")
        return result.kind

    return anyio.run(run)


def run_text_turns(root: Path, cwd: Path, session_id: str, numbers: range) -> None:
    """Resume the session and run a turn for each n: `Question n?`, answered `Answer n.`."""
    script: list[dict[str, Any]] = [{"text": f"Answer {n}."} for n in numbers]

    async def run() -> None:
        loop, _repair = resume_session(session_id, setup(root, cwd, script, []))
        with loop:
            for n in numbers:
                await loop.run_turn(f"Question {n}?")

    anyio.run(run)


def continue_paused(root: Path, cwd: Path, session_id: str, runs: list[str]) -> str:
    """Resume a session whose waiting call is decided and continue its turn; its result kind."""
    script: list[dict[str, Any]] = [{"text": "Deployed and verified."}]

    async def run() -> str:
        loop, _repair = resume_session(session_id, setup(root, cwd, script, [approval_tool(runs)]))
        with loop:
            result = await loop.continue_turn()
        return result.kind

    return anyio.run(run)


def last_seq(root: Path, session_id: str) -> int:
    """The seq of the session's last stored event."""
    _, events = JsonlStore(root).read(session_id)
    return events[-1].seq
