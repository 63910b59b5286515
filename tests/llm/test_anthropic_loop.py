"""The loop's recovery scenarios replayed through the Anthropic adapter onto the wire server.

Law 4 of docs/architecture.md#laws says the log stays a conversation any provider accepts
after a tool error, a failed step, a cancellation, a crash plus resume, and a fork; issue 5
asks to show it on the wire. Each test drives a real `AgentLoop` with
`AnthropicMessagesModel` against the socket-level server, which validates every request
against the Messages pairing rules (docs/providers.md#anthropic-pairing) independently of
duraloop and fails the test on any violation. A session started on another provider
(DeepSeek-style ids, one invalid for Anthropic) continues here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from duraloop.errors import ToolError
from duraloop.llm import ScriptedModel
from duraloop.llm._anthropic import AnthropicMessagesModel
from duraloop.log import Session, fork_seed, interrupted_turn_closers
from duraloop.loop import AgentLoop
from duraloop.tools import Tool, ToolCallRequest, ToolContext, ToolPipeline
from duraloop.tools._signal import CancelSignal

from ._wire_anthropic import AnthropicWireServer, text_reply, tool_reply


def _object(arguments: Any) -> Any:
    if not isinstance(arguments, dict):
        raise ValueError("arguments must be a JSON object")
    return arguments


def _tool(name: str, body: Any, *, parallel: bool = True) -> Tool:
    return Tool(
        name=name,
        description=f"The {name} tool.",
        parameters={"type": "object", "properties": {}},
        validator=_object,
        body=body,
        parallel=parallel,
    )


async def _fine(args: Any, ctx: ToolContext) -> str:
    return f"{ctx.tool_name} ok"


async def _fails(args: Any, ctx: ToolContext) -> str:
    raise ToolError("the disk is on fire", code="FS_ON_FIRE")


TOOLS = [_tool("fine", _fine), _tool("fails", _fails)]


@pytest.fixture
def server() -> Iterator[AnthropicWireServer]:
    with AnthropicWireServer.running() as running:
        yield running


@pytest.fixture
async def model(server: AnthropicWireServer) -> AsyncIterator[AnthropicMessagesModel]:
    adapter = AnthropicMessagesModel("claude-test", api_key="k", base_url=server.base_url)
    try:
        yield adapter
    finally:
        await adapter.aclose()


def _results(body: dict[str, Any], message_index: int) -> list[tuple[str, bool]]:
    content = body["messages"][message_index]["content"]
    return [
        (b["tool_use_id"], b.get("is_error", False)) for b in content if b["type"] == "tool_result"
    ]


@pytest.mark.anyio
async def test_tool_error_turn_then_next_turn_are_accepted(
    tmp_path: Path, model: AnthropicMessagesModel, server: AnthropicWireServer
) -> None:
    server.queue_events(
        tool_reply(("toolu_a", "fine", "{}"), ("toolu_b", "fails", "{}"), text="Working.")
    )
    server.queue_events(text_reply("One failed."))
    server.queue_events(text_reply("Hello again."))
    loop = AgentLoop(Session("s"), model=model, tools=TOOLS, cwd=tmp_path)
    first = await loop.run_turn("use both tools")
    second = await loop.run_turn("again")
    assert (first.kind, first.text, second.text) == ("completed", "One failed.", "Hello again.")
    assert len(server.requests) == 3
    assert _results(server.requests[1].body, 2) == [("toolu_a", False), ("toolu_b", True)]
    assert server.requests[1].body["messages"][2]["content"][1]["content"].startswith("Error")


class _ExplodingPipeline(ToolPipeline):
    async def dispatch(self, call: ToolCallRequest, signal: CancelSignal) -> Any:
        if call.call_id == "toolu_b":
            raise RuntimeError("dispatch exploded")
        return await super().dispatch(call, signal)


@pytest.mark.anyio
async def test_failed_step_recovery_results_are_accepted(
    tmp_path: Path, model: AnthropicMessagesModel, server: AnthropicWireServer
) -> None:
    server.queue_events(
        tool_reply(("toolu_a", "fine", "{}"), ("toolu_b", "fine", "{}"), ("toolu_c", "fine", "{}"))
    )
    server.queue_events(text_reply("Recovered."))
    tools = [_tool("fine", _fine, parallel=False)]
    loop = AgentLoop(
        Session("s"), model=model, tools=tools, cwd=tmp_path, pipeline_factory=_ExplodingPipeline
    )
    with pytest.raises(RuntimeError, match="dispatch exploded"):
        await loop.run_turn("go")
    result = await loop.run_turn("what happened?")
    assert result.text == "Recovered."
    assert _results(server.requests[1].body, 2) == [
        ("toolu_a", False),
        ("toolu_b", True),
        ("toolu_c", True),
    ]


@pytest.mark.anyio
async def test_cancelled_turn_then_next_turn_is_accepted(
    tmp_path: Path, model: AnthropicMessagesModel, server: AnthropicWireServer
) -> None:
    started = anyio.Event()

    async def _hangs(args: Any, ctx: ToolContext) -> str:
        started.set()
        await anyio.sleep_forever()
        return "never"

    server.queue_events(tool_reply(("toolu_a", "hangs", "{}"), ("toolu_b", "hangs", "{}")))
    server.queue_events(text_reply("Fine, stopped."))
    loop = AgentLoop(
        Session("s"), model=model, tools=[_tool("hangs", _hangs, parallel=False)], cwd=tmp_path
    )
    async with anyio.create_task_group() as group:

        async def _cancel_when_started() -> None:
            await started.wait()
            loop.cancel()

        group.start_soon(_cancel_when_started)
        aborted = await loop.run_turn("start")
    assert aborted.kind == "aborted"
    result = await loop.run_turn("never mind")
    assert result.text == "Fine, stopped."
    assert [call_id for call_id, _ in _results(server.requests[1].body, 2)] == [
        "toolu_a",
        "toolu_b",
    ]
    assert all(is_error for _, is_error in _results(server.requests[1].body, 2))


async def _finished_session(
    tmp_path: Path, server: AnthropicWireServer, model: AnthropicMessagesModel
) -> Session:
    server.queue_events(tool_reply(("toolu_a", "fine", "{}"), ("toolu_b", "fine", "{}")))
    server.queue_events(text_reply("Done."))
    session = Session("s")
    await AgentLoop(session, model=model, tools=TOOLS, cwd=tmp_path).run_turn("go")
    return session


@pytest.mark.anyio
async def test_resume_after_a_crash_mid_tools_is_accepted(
    tmp_path: Path, model: AnthropicMessagesModel, server: AnthropicWireServer
) -> None:
    events = list((await _finished_session(tmp_path, server, model)).events)
    crash = next(e.seq for e in events if e.type == "tool/call")  # died after the first tool/call
    survived = events[: crash + 1]
    resumed = Session("s", seed=survived + interrupted_turn_closers(survived))  # crash repair
    server.queue_events(text_reply("Resumed."))
    result = await AgentLoop(resumed, model=model, tools=TOOLS, cwd=tmp_path).run_turn("continue")
    assert result.text == "Resumed."
    body = server.requests[-1].body
    assert _results(body, 2) == [("toolu_a", True), ("toolu_b", True)]
    assert "outcome is unknown" in body["messages"][2]["content"][0]["content"]


@pytest.mark.anyio
async def test_fork_mid_history_continues_on_the_wire(
    tmp_path: Path, model: AnthropicMessagesModel, server: AnthropicWireServer
) -> None:
    session = await _finished_session(tmp_path, server, model)
    server.queue_events(text_reply("Second turn."))
    await AgentLoop(session, model=model, tools=TOOLS, cwd=tmp_path).run_turn("more")
    events = list(session.events)
    boundary = next(e.seq for e in events if e.type == "turn/end")  # the end of turn 1
    child = Session("child", seed=fork_seed(events, session_id="child", boundary=boundary))
    server.queue_events(text_reply("Forked."))
    result = await AgentLoop(child, model=model, tools=TOOLS, cwd=tmp_path).run_turn(
        "from the fork"
    )
    assert result.text == "Forked."
    body = server.requests[-1].body
    assert _results(body, 2) == [("toolu_a", False), ("toolu_b", False)]
    assert body["messages"][-1]["content"] == "from the fork"
    assert len(body["messages"]) == 5  # turn 1 (user, tool step, answer) + the fork's prompt


@pytest.mark.anyio
async def test_session_started_on_another_provider_continues_with_mapped_ids(
    tmp_path: Path, model: AnthropicMessagesModel, server: AnthropicWireServer
) -> None:
    session = Session("s")
    calls = [
        {"id": "functions.fine:0", "name": "fine", "arguments": {}},
        {"id": "call_00_abc", "name": "fine", "arguments": {}},
    ]
    deepseek = ScriptedModel([{"text": "", "tool_calls": calls}, {"text": "scripted done"}])
    await AgentLoop(session, model=deepseek, tools=TOOLS, cwd=tmp_path).run_turn("start elsewhere")
    server.queue_events(tool_reply(("toolu_z", "fine", "{}")))
    server.queue_events(text_reply("Continued."))
    result = await AgentLoop(session, model=model, tools=TOOLS, cwd=tmp_path).run_turn(
        "continue here"
    )
    assert result.text == "Continued."
    first = server.requests[0].body
    uses = [b["id"] for b in first["messages"][1]["content"] if b["type"] == "tool_use"]
    assert uses[1] == "call_00_abc" and uses[0].startswith("functions_fine_0_")
    assert [call_id for call_id, _ in _results(first, 2)] == uses
    stored = [
        b["id"]
        for e in session.events
        if e.type == "assistant/message"
        for b in e.data["message"]["content"]
        if b["type"] == "tool-call"
    ]
    assert stored == ["functions.fine:0", "call_00_abc", "toolu_z"]
