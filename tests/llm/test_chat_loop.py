"""The loop's recovery scenarios through the real Chat Completions adapters (issue 5).

`AgentLoop` drives `OpenAIChatModel` and `DeepSeekChatModel` against the wire-level server,
which validates every request it receives (docs/providers.md#chat-completions-pairing, and 3.3 for
DeepSeek) and fails the test at teardown on a violation. Each scenario ends in a state the loop must
repair or record (Laws 4, 5 and 9 of docs/architecture.md#laws) and then sends the next
request: a failing tool with
transient faults retried on the way, a stalled stream cut by the loop's idle timeout
(`LoopConfig.stream_idle_timeout_seconds`; the adapter has no timer of its own), a stream cut mid
tool call (`STREAM_CLOSED`, not retried), a cancellation while tools run, a crash after `tool/call`
then a resume, and a fork. The server accepting every request is the point; the log is checked valid
after each.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from duraloop.errors import LlmError, ToolError
from duraloop.llm import OpenAIChatModel, RetryPolicy
from duraloop.llm._chat_completions import ChatCompletionsModel, DeepSeekChatModel
from duraloop.log import Session
from duraloop.loop import (
    AgentLoop,
    LoopConfig,
    SessionSetup,
    TurnResult,
    resume_session,
    start_session,
)
from duraloop.store import JsonlStore, MemoryStore
from duraloop.testing import Gates, assert_log_valid, gated_tool
from duraloop.tools import Tool, ToolContext

from ._wire_chat import (
    Comment,
    Frame,
    Pause,
    Stall,
    WireChatServer,
    chunk_event,
    tool_delta,
    usage_event,
)

FAST = RetryPolicy(initial_delay_ms=1, max_delay_ms=8, jitter_ratio=0.0)
"""Backoffs of 1, 2, 4, 8 ms, no jitter."""


def _plain_tool(name: str, *, fail: bool = False) -> Tool:
    async def body(args: Any, ctx: ToolContext) -> str:
        if fail:
            raise ToolError("disk full", code="FS_FULL")
        return f"{name} ok"

    return Tool(
        name=name,
        description=f"The {name} tool.",
        parameters={"type": "object", "properties": {}},
        validator=lambda arguments: arguments,
        body=body,
        parallel=True,
    )


@pytest.fixture(params=["openai", "deepseek"])
def server(request: pytest.FixtureRequest) -> Iterator[WireChatServer]:
    wire = WireChatServer(request.param)
    wire.start()
    try:
        yield wire
    finally:
        wire.stop()


@pytest.fixture
async def model(server: WireChatServer) -> AsyncIterator[ChatCompletionsModel]:
    adapter: ChatCompletionsModel
    if server.dialect == "openai":
        adapter = OpenAIChatModel("gpt-test", api_key="sk-test", base_url=server.base_url)
    else:
        adapter = DeepSeekChatModel("deepseek-v4-pro", api_key="sk-test", base_url=server.base_url)
    try:
        yield adapter
    finally:
        await adapter.aclose()


def _calls(server: WireChatServer, *calls: tuple[str, str]) -> list[Frame]:
    """A reply calling `(call id, tool name)`s in parallel (with reasoning on DeepSeek)."""
    frames: list[Frame] = []
    if server.dialect == "deepseek":
        frames += [chunk_event(reasoning=""), chunk_event(reasoning=f"I need {len(calls)} tools.")]
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


def _retry_codes(session: Session) -> list[str]:
    return [e.data["failure"]["code"] for e in session.events if e.type == "llm/retry"]


@pytest.mark.anyio
async def test_failed_tool_and_transient_faults_then_the_next_request_is_accepted(
    tmp_path: Path, server: WireChatServer, model: ChatCompletionsModel
) -> None:
    session = Session("s")
    loop = AgentLoop(
        session,
        model=model,
        tools=[_plain_tool("fine"), _plain_tool("boom", fail=True)],
        cwd=tmp_path,
        config=LoopConfig(retry=FAST),
    )
    server.queue_error(500, "The server had an error", error_type="server_error")
    server.queue_error(429, "Rate limit reached", headers={"retry-after": "0"})
    server.queue_sse(_calls(server, ("call_1", "fine")), done=False, end="reset")
    server.queue_sse(_calls(server, ("call_1", "fine"), ("call_2", "boom")))
    server.queue_sse(_text("One worked, one failed."))
    result = await loop.run_turn("use both tools")
    assert (result.kind, result.text) == ("completed", "One worked, one failed.")
    assert _retry_codes(session) == ["SERVER", "RATE_LIMIT", "TRANSPORT"]
    assert len(server.requests) == 5
    assert _tool_messages(server, 4) == [("call_1", "fine ok"), ("call_2", "Error: disk full")]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_keep_alive_comments_rearm_the_loop_idle_timeout(
    tmp_path: Path, server: WireChatServer, model: ChatCompletionsModel
) -> None:
    # docs/providers.md#adapter-guarantees: transport activity re-arms the idle timer. 1.5 s of
    # keep-alives before the first chunk, under a 0.5 s idle timeout: no TIMEOUT, no retry.
    session = Session("s")
    config = LoopConfig(retry=FAST, stream_idle_timeout_seconds=0.5)
    loop = AgentLoop(session, model=model, cwd=tmp_path, config=config)
    keep_alives: list[Frame] = [frame for _ in range(15) for frame in (Pause(0.1), Comment())]
    server.queue_sse([*keep_alives, *_text("Queued, then answered.")])
    result = await loop.run_turn("hi")
    assert (result.kind, result.text) == ("completed", "Queued, then answered.")
    assert [e for e in session.events if e.type == "llm/retry"] == []
    assert len(server.requests) == 1
    assert_log_valid(session)


@pytest.mark.anyio
async def test_the_same_wait_without_keep_alives_times_out(
    tmp_path: Path, server: WireChatServer, model: ChatCompletionsModel
) -> None:
    session = Session("s")
    config = LoopConfig(retry=FAST, stream_idle_timeout_seconds=0.5)
    loop = AgentLoop(session, model=model, cwd=tmp_path, config=config)
    server.queue_sse([Pause(1.5), *_text("too late")])
    server.queue_sse(_text("Hello."))
    result = await loop.run_turn("hi")
    assert (result.kind, result.text) == ("completed", "Hello.")
    assert [e.data["failure"]["code"] for e in session.events if e.type == "llm/retry"] == [
        "TIMEOUT"
    ]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_stalled_stream_is_cut_by_the_loop_idle_timeout_and_retried(
    tmp_path: Path, server: WireChatServer, model: ChatCompletionsModel
) -> None:
    session = Session("s")
    config = LoopConfig(retry=FAST, stream_idle_timeout_seconds=0.3)
    loop = AgentLoop(session, model=model, cwd=tmp_path, config=config)
    server.queue_sse([chunk_event(content="Hel"), Stall()])
    server.queue_sse(_text("Hello."))
    result = await loop.run_turn("hi")
    assert (result.kind, result.text) == ("completed", "Hello.")
    retries = [e.data["failure"] for e in session.events if e.type == "llm/retry"]
    assert [r["code"] for r in retries] == ["TIMEOUT"]
    assert "stream_idle_timeout_seconds" in retries[0]["message"]
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body  # the same request, again
    assert_log_valid(session)


@pytest.mark.anyio
async def test_stream_cut_mid_tool_call_ends_the_turn_and_the_next_turn_is_accepted(
    tmp_path: Path, server: WireChatServer, model: ChatCompletionsModel
) -> None:
    session = Session("s")
    loop = AgentLoop(
        session,
        model=model,
        tools=[_plain_tool("fine")],
        cwd=tmp_path,
        config=LoopConfig(retry=FAST),
    )
    cut = _calls(server, ("call_1", "fine"))[:-3]  # no finish, no usage, then no [DONE]
    server.queue_sse(cut, done=False)
    with pytest.raises(LlmError) as caught:
        await loop.run_turn("go")
    assert (caught.value.code, caught.value.retryable) == ("STREAM_CLOSED", False)
    assert not any(e.type == "assistant/message" for e in session.events)
    server.queue_sse(_text("Recovered."))
    assert (await loop.run_turn("again")).text == "Recovered."
    roles = [m["role"] for m in server.requests[1].body["messages"]]
    assert roles == ["system", "user", "user"]  # the cut attempt left nothing in history
    assert_log_valid(session)


async def _run(loop: AgentLoop, prompt: str, results: list[TurnResult]) -> None:
    results.append(await loop.run_turn(prompt))


@pytest.mark.anyio
async def test_cancellation_while_tools_run_then_the_next_request_is_accepted(
    tmp_path: Path, server: WireChatServer, model: ChatCompletionsModel
) -> None:
    gates = Gates()
    session = Session("s")
    loop = AgentLoop(session, model=model, tools=[gated_tool("slow", gates)], cwd=tmp_path)
    server.queue_sse(_calls(server, ("call_a", "slow"), ("call_b", "slow")))
    results: list[TurnResult] = []
    async with anyio.create_task_group() as group:
        group.start_soon(_run, loop, "go", results)
        await gates.wait_entered("call_a", "call_b")
        loop.cancel()
        gates.release("call_a", "call_b")
    assert results[0].kind == "aborted"
    server.queue_sse(_text("Stopped as asked."))
    assert (await loop.run_turn("what happened?")).kind == "completed"
    # The loop's cancellation results, marked as errors in their text
    # (docs/providers.md#error-tool-results).
    assert _tool_messages(server, 1) == [
        ("call_a", "Error: tool call aborted"),
        ("call_b", "Error: tool call aborted"),
    ]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_crash_after_tool_call_then_resume_sends_an_accepted_request(
    tmp_path: Path, server: WireChatServer, model: ChatCompletionsModel
) -> None:
    gates = Gates()
    live = tmp_path / "live"
    crashed = tmp_path / "crashed"
    loop = start_session(
        SessionSetup(
            store=JsonlStore(live),
            model=model,
            tools=[gated_tool("slow", gates)],
            cwd=tmp_path,
        )
    )
    session_id = loop.session.id
    server.queue_sse(_calls(server, ("call_a", "slow"), ("call_b", "slow")))
    results: list[TurnResult] = []
    with loop:
        async with anyio.create_task_group() as group:
            group.start_soon(_run, loop, "go", results)
            await gates.wait_entered("call_a", "call_b")
            # The process "dies" here: both tool/call events are durable (Law 5).
            shutil.copytree(live, crashed)
            loop.cancel()
            gates.release("call_a", "call_b")
    resumed, repair = resume_session(
        session_id,
        SessionSetup(
            store=JsonlStore(crashed),
            model=model,
            tools=[gated_tool("slow", Gates())],
        ),
    )
    with resumed:
        assert repair.repaired
        server.queue_sse(_text("The earlier calls may or may not have run."))
        assert (await resumed.run_turn("continue")).kind == "completed"
        assert_log_valid(resumed.session)
    # Crash repair's TOOL_OUTCOME_UNKNOWN closers, sent as error text
    # (docs/providers.md#error-tool-results).
    answered = _tool_messages(server, 1)
    assert [call_id for call_id, _ in answered] == ["call_a", "call_b"]
    assert all(
        text.startswith("Error: The tool call was interrupted after it was recorded")
        for _, text in answered
    )


@pytest.mark.anyio
async def test_fork_after_a_tool_turn_sends_an_accepted_request(
    tmp_path: Path, server: WireChatServer, model: ChatCompletionsModel
) -> None:
    store = MemoryStore()
    loop = start_session(
        SessionSetup(store=store, model=model, tools=[_plain_tool("fine")], cwd=tmp_path)
    )
    server.queue_sse(_calls(server, ("call_1", "fine")))
    server.queue_sse(_text("Done."))
    server.queue_sse(_text("Second answer."))
    with loop:
        await loop.run_turn("first")
        boundary = max(e.seq for e in loop.session.events if e.type == "turn/end")
        await loop.run_turn("second")
        source = loop.session.id
    child = store.fork(source, boundary=boundary)
    forked, _repair = resume_session(
        child,
        SessionSetup(
            store=store,
            model=model,
            tools=[_plain_tool("fine")],
        ),
    )
    server.queue_sse(_text("Forked answer."))
    with forked:
        assert (await forked.run_turn("instead")).text == "Forked answer."
        assert_log_valid(forked.session)
    sent = server.requests[3].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[-1]["content"] == "instead"
