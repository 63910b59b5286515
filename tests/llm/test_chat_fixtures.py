"""Provider documentation examples as wire fixtures, parsed to neutral values and back.

Each fixture under `fixtures/openai/` and `fixtures/deepseek/` reproduces a request and a
streamed response from the provider's public docs (its `source` key says which page and
what is verbatim). Three directions are pinned: the documented response stream becomes
the neutral chunks and assistant message it must; neutral history encodes to the
documented request, up to the listed `duraloop_changes` (RFC 6902 operations, each with
its reason); and the whole exchange runs through a real adapter against the wire server,
which receives exactly those bodies and validates them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from duraloop.llm import BlockAssembler, ModelRequest, OpenAIChatModel, StreamChunk, ToolSchema
from duraloop.llm._chat_completions import ChatCompletionsModel, DeepSeekChatModel
from duraloop.llm._chat_completions._stream import ChunkTranslator
from duraloop.log._messages import Message, assistant_message, tool_result_message, user_message

from ._wire_chat import Raw, WireChatServer

FIXTURES = Path(__file__).parent / "fixtures"


def _load(name: str) -> dict[str, Any]:
    data = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    assert isinstance(data, dict) and data["source"]
    return data


def _apply(document: dict[str, Any], changes: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply RFC 6902 `add` / `remove` / `replace` operations to a copy of `document`."""
    out = copy.deepcopy(document)
    for change in changes:
        *parents, last = change["path"].lstrip("/").split("/")
        target: Any = out
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        if change["op"] == "remove":
            del target[last]
        else:
            assert change["op"] in ("add", "replace")
            assert (last in target) == (change["op"] == "replace")
            target[last] = change["value"]
    return out


def _translate(response: list[Any]) -> list[StreamChunk]:
    translator = ChunkTranslator(provider="fixture")
    chunks: list[StreamChunk] = []
    for payload in response:
        if payload == "[DONE]":
            return chunks + translator.close()
        chunks += translator.feed(payload)
    raise AssertionError("the fixture stream has no [DONE]")


def _assemble(chunks: list[StreamChunk], provider: str, model: str) -> Message:
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.push(chunk)
    return assembler.message(provider=provider, model=model)


def _tools(request: dict[str, Any]) -> list[ToolSchema]:
    return [
        ToolSchema(t["function"]["name"], t["function"]["description"], t["function"]["parameters"])
        for t in request["tools"]
    ]


def _frames(response: list[Any]) -> list[Raw]:
    """The response as SSE bytes, `[DONE]` included, exactly as a provider sends them."""
    return [
        Raw(f"data: {p if p == '[DONE]' else json.dumps(p, ensure_ascii=False)}\n\n".encode())
        for p in response
    ]


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[WireChatServer]:
    wire = WireChatServer(request.param)
    wire.start()
    try:
        yield wire
    finally:
        wire.stop()


# ------------------------------------------------------------------------- OpenAI


STREAM = _load("openai/function_calling_stream.json")
STEPS = _load("openai/function_calling_steps.json")
PARIS = "What's the weather like in Paris today?"


def test_openai_streamed_function_call_parses_into_one_tool_call_block() -> None:
    chunks = _translate(STREAM["response"])
    deltas = [c for c in chunks if c["type"] == "tool-call-delta"]
    assert [d["argumentsDelta"] for d in deltas] == [
        "",
        '{"',
        "location",
        '":"',
        "Paris",
        ",",
        " France",
        '"}',
    ]
    assert {d["id"] for d in deltas} == {"call_DdmO9pD3xa9XTPNJ32zg2hcA"}
    message = _assemble(chunks, "openai", "gpt-4o")
    assert message["content"] == [
        {
            "type": "tool-call",
            "id": "call_DdmO9pD3xa9XTPNJ32zg2hcA",
            "name": "get_weather",
            "arguments": '{"location":"Paris, France"}',
        }
    ]
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "tool-calls"}}


def test_openai_documented_requests_are_what_neutral_history_encodes_to() -> None:
    model = OpenAIChatModel("gpt-4o", api_key="sk-x")
    first = ModelRequest(messages=[user_message(PARIS)], tools=_tools(STREAM["request"]))
    assert model.payload(first) == _apply(STREAM["request"], STREAM["duraloop_changes"])
    call = {
        "type": "tool-call",
        "id": "call_12345xyz",
        "name": "get_weather",
        "arguments": '{"latitude":48.8566,"longitude":2.3522}',
    }
    history = [
        user_message(PARIS),
        assistant_message([call], provider="openai", model="gpt-4o"),
        tool_result_message("call_12345xyz", [{"type": "text", "text": "14"}], is_error=False),
    ]
    second = ModelRequest(messages=history, tools=_tools(STEPS["request"]))
    assert model.payload(second) == _apply(STEPS["request"], STEPS["duraloop_changes"])


@pytest.mark.parametrize("server", ["openai"], indirect=True)
@pytest.mark.anyio
async def test_openai_function_calling_guide_runs_over_the_wire(server: WireChatServer) -> None:
    model = OpenAIChatModel("gpt-4o", api_key="sk-x", base_url=server.base_url)
    server.queue_sse(_frames(STREAM["response"]), done=False)
    server.queue_sse(_frames(STEPS["response"]), done=False)
    try:
        first = ModelRequest(messages=[user_message(PARIS)], tools=_tools(STREAM["request"]))
        reply = _assemble([c async for c in model.stream(first)], "openai", "gpt-4o")
        history = [
            user_message(PARIS),
            reply,
            tool_result_message(
                "call_DdmO9pD3xa9XTPNJ32zg2hcA", [{"type": "text", "text": "14"}], is_error=False
            ),
        ]
        second = ModelRequest(messages=history, tools=_tools(STEPS["request"]))
        answer = _assemble([c async for c in model.stream(second)], "openai", "gpt-4o")
    finally:
        await model.aclose()
    assert server.requests[0].body == _apply(STREAM["request"], STREAM["duraloop_changes"])
    assert server.requests[1].body["messages"][1]["tool_calls"][0]["function"] == {
        "name": "get_weather",
        "arguments": '{"location":"Paris, France"}',
    }
    assert answer["content"] == [
        {"type": "text", "text": "The current temperature in Paris is 14°C (57.2°F)."}
    ]


# ------------------------------------------------------------------------- DeepSeek


THINKING = _load("deepseek/thinking_tool_calls.json")
HANGZHOU = "How's the weather in Hangzhou Tomorrow"


def _deepseek_history(wire: list[dict[str, Any]]) -> list[Message]:
    """The neutral messages of a documented DeepSeek `messages` list (user, assistant, tool)."""
    history: list[Message] = []
    for message in wire:
        if message["role"] == "user":
            history.append(user_message(message["content"]))
        elif message["role"] == "tool":
            text = [{"type": "text", "text": message["content"]}]
            history.append(tool_result_message(message["tool_call_id"], text, is_error=False))
        else:
            blocks: list[dict[str, Any]] = [
                {"type": "reasoning", "text": message["reasoning_content"]}
            ]
            if message["content"]:
                blocks.append({"type": "text", "text": message["content"]})
            blocks += [
                {"type": "tool-call", "id": c["id"], **c["function"]} for c in message["tool_calls"]
            ]
            history.append(assistant_message(blocks, provider="deepseek", model="deepseek-v4-pro"))
    return history


def test_deepseek_streamed_reasoning_and_tool_call_parse_into_neutral_blocks() -> None:
    first, second = THINKING["exchanges"]
    chunks = _translate(first["response"])
    documented = second["request"]["messages"][3]  # the Turn 1.2 message, as sent back
    message = _assemble(chunks, "deepseek", "deepseek-v4-pro")
    assert message["content"] == [
        {"type": "reasoning", "text": documented["reasoning_content"]},
        {
            "type": "tool-call",
            "id": "call_00_H2SCW6136vWJGq9SQlBuhVt4",
            "name": "get_weather",
            "arguments": '{"location": "Hangzhou", "date": "2026-04-20"}',
        },
    ]
    assert chunks[-2:] == [
        {
            "type": "usage",
            "usage": {
                "inputTokens": 28,
                "outputTokens": 61,
                "cacheReadTokens": 384,
                "reasoningTokens": 29,
            },
        },
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]
    final = _assemble(_translate(second["response"]), "deepseek", "deepseek-v4-pro")
    assert final["content"] == [
        {"type": "reasoning", "text": THINKING["final_answer"]["reasoning_content"]},
        {"type": "text", "text": THINKING["final_answer"]["content"]},
    ]


def test_deepseek_documented_requests_are_what_neutral_history_encodes_to() -> None:
    model = DeepSeekChatModel("deepseek-v4-pro", api_key="sk-x", reasoning_effort="high")
    for exchange in THINKING["exchanges"]:
        wire = exchange["request"]
        request = ModelRequest(messages=_deepseek_history(wire["messages"]), tools=_tools(wire))
        assert model.payload(request) == _apply(wire, exchange["duraloop_changes"])
        assert json.loads(model.encode_request(request)) == model.payload(request)


@pytest.mark.parametrize("server", ["deepseek"], indirect=True)
@pytest.mark.anyio
async def test_deepseek_thinking_tool_call_exchange_runs_over_the_wire(
    server: WireChatServer,
) -> None:
    first, second = THINKING["exchanges"]
    model: ChatCompletionsModel = DeepSeekChatModel(
        "deepseek-v4-pro", api_key="sk-x", base_url=server.base_url, reasoning_effort="high"
    )
    tools = _tools(first["request"])
    history = _deepseek_history(first["request"]["messages"])
    server.queue_sse(_frames(first["response"]), done=False)
    server.queue_sse(_frames(second["response"]), done=False)
    try:
        chunks = [c async for c in model.stream(ModelRequest(messages=history, tools=tools))]
        history += [
            _assemble(chunks, "deepseek", "deepseek-v4-pro"),
            tool_result_message(
                "call_00_H2SCW6136vWJGq9SQlBuhVt4",
                [{"type": "text", "text": "Cloudy 7~13°C"}],
                is_error=False,
            ),
        ]
        final = [c async for c in model.stream(ModelRequest(messages=history, tools=tools))]
    finally:
        await model.aclose()
    for received, exchange in zip(server.requests, THINKING["exchanges"], strict=True):
        assert received.body == _apply(exchange["request"], exchange["duraloop_changes"])
    assert final[-1] == {"type": "finish", "reason": {"kind": "stop"}}
    assert history[0]["content"] == [{"type": "text", "text": HANGZHOU}]
