"""Approvals through the real Chat Completions adapters, at the wire (docs/approvals.md).

`AgentLoop` drives `OpenAIChatModel` and `DeepSeekChatModel` against the wire-level server,
which validates every request (tool messages answer the preceding calls in order; DeepSeek's
reasoning echo) and fails the test at teardown on a violation. A rejected call reaches the
model as its tool message `Error: the user rejected tool ...`, with the person's feedback;
a turn paused across a process restart, then decided and continued, sends an accepted
request; so does the next turn after a cancel while paused.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from duraloop.llm import OpenAIChatModel
from duraloop.llm._chat_completions import ChatCompletionsModel, DeepSeekChatModel
from duraloop.log import Session
from duraloop.loop import AgentLoop, SessionSetup, resume_session, start_session
from duraloop.store import JsonlStore
from duraloop.testing import assert_log_valid
from duraloop.tools import ApprovalRequest, Decision, Tool, ToolContext

from ._wire_chat import Frame, WireChatServer, chunk_event, tool_delta, usage_event

pytestmark = pytest.mark.anyio


def _tool(name: str, runs: list[str], *, asks: bool) -> Tool:
    async def body(args: Any, ctx: ToolContext) -> str:
        runs.append(ctx.call_id)
        return f"{name} ok"

    return Tool(
        name=name,
        description=f"The {name} tool.",
        parameters={"type": "object", "properties": {}},
        validator=lambda arguments: arguments,
        body=body,
        parallel=True,
        requires_approval=asks,
    )


def _tools(runs: list[str]) -> list[Tool]:
    return [_tool("fine", runs, asks=False), _tool("danger", runs, asks=True)]


@pytest.fixture(params=["openai", "deepseek"])
def server(request: pytest.FixtureRequest) -> Iterator[WireChatServer]:
    wire = WireChatServer(request.param)
    wire.start()
    try:
        yield wire
    finally:
        wire.stop()


def _adapter(server: WireChatServer) -> ChatCompletionsModel:
    if server.dialect == "openai":
        return OpenAIChatModel("gpt-test", api_key="sk-test", base_url=server.base_url)
    return DeepSeekChatModel("deepseek-v4-pro", api_key="sk-test", base_url=server.base_url)


@pytest.fixture
async def model(server: WireChatServer) -> AsyncIterator[ChatCompletionsModel]:
    adapter = _adapter(server)
    try:
        yield adapter
    finally:
        await adapter.aclose()


def _calls(server: WireChatServer, *calls: tuple[str, str]) -> list[Frame]:
    """A reply calling `(call id, tool name)`s (with reasoning on DeepSeek)."""
    frames: list[Frame] = []
    if server.dialect == "deepseek":
        frames += [chunk_event(reasoning=""), chunk_event(reasoning="I need the tools.")]
    for index, (call_id, name) in enumerate(calls):
        frames.append(chunk_event(tool_calls=[tool_delta(index, call_id=call_id, name=name)]))
        frames.append(chunk_event(tool_calls=[tool_delta(index, arguments="{}")]))
    return [*frames, chunk_event(finish_reason="tool_calls"), usage_event(50, 10)]


def _text(text: str) -> list[Frame]:
    return [chunk_event(content=text), chunk_event(finish_reason="stop"), usage_event(60, 5)]


def _tool_messages(server: WireChatServer, request: int) -> list[tuple[str, str]]:
    return [
        (m["tool_call_id"], m["content"])
        for m in server.requests[request].body["messages"]
        if m["role"] == "tool"
    ]


REJECTED = 'Error: the user rejected tool "danger" with feedback: list the files first'


async def test_a_rejection_with_feedback_is_the_calls_tool_message(
    tmp_path: Path, server: WireChatServer, model: ChatCompletionsModel
) -> None:
    runs: list[str] = []

    def reject(request: ApprovalRequest) -> Decision:
        return Decision(allow=False, feedback="list the files first")

    session = Session("s")
    loop = AgentLoop(session, model=model, tools=_tools(runs), cwd=tmp_path, approver=reject)
    server.queue_sse(_calls(server, ("call_1", "fine"), ("call_2", "danger")))
    server.queue_sse(_text("I will list the files first."))
    result = await loop.run_turn("clean up")
    assert (result.kind, result.text) == ("completed", "I will list the files first.")
    assert _tool_messages(server, 1) == [("call_1", "fine ok"), ("call_2", REJECTED)]
    assert runs == ["call_1"]
    assert_log_valid(session)


async def test_a_turn_paused_across_a_restart_continues_with_an_accepted_request(
    tmp_path: Path, server: WireChatServer, model: ChatCompletionsModel
) -> None:
    runs: list[str] = []
    store = JsonlStore(tmp_path / "sessions")
    loop = start_session(SessionSetup(store=store, model=model, tools=_tools(runs), cwd=tmp_path))
    server.queue_sse(_calls(server, ("call_1", "danger"), ("call_2", "fine")))
    with loop:
        assert (await loop.run_turn("clean up")).kind == "paused"
    assert len(server.requests) == 1 and runs == []
    resumed_model = _adapter(server)
    try:
        resumed, repair = resume_session(
            loop.session.id, SessionSetup(store=store, model=resumed_model, tools=_tools(runs))
        )
        with resumed:
            assert not repair.repaired
            await resumed.decide("call_1", allow=False, feedback="list the files first")
            server.queue_sse(_text("Listing instead."))
            assert (await resumed.continue_turn()).kind == "completed"
            assert_log_valid(resumed.session)
    finally:
        await resumed_model.aclose()
    assert _tool_messages(server, 1) == [("call_1", REJECTED), ("call_2", "fine ok")]
    assert runs == ["call_2"]


async def test_the_next_turn_after_a_cancel_while_paused_is_accepted(
    tmp_path: Path, server: WireChatServer, model: ChatCompletionsModel
) -> None:
    session = Session("s")
    loop = AgentLoop(session, model=model, tools=_tools([]), cwd=tmp_path)
    server.queue_sse(_calls(server, ("call_1", "fine"), ("call_2", "danger")))
    assert (await loop.run_turn("clean up")).kind == "paused"
    loop.cancel()
    server.queue_sse(_text("Stopped."))
    assert (await loop.run_turn("never mind")).kind == "completed"
    assert _tool_messages(server, 1) == [
        ("call_1", "fine ok"),
        ("call_2", "Error: tool call aborted before dispatch"),
    ]
    assert_log_valid(session)
