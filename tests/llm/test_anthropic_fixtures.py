"""Anthropic's documented request/response pairs, parsed to neutral chunks and back.

Fixtures in tests/llm/fixtures/anthropic/ reproduce the public docs (each file names its
page): the streaming page's tool-use and extended-thinking event streams, verbatim, and the
tool-use guide's `tool_use` response with an `is_error` tool result. Each response is
translated into neutral chunks and messages (both by the pure translator and through the
SDK over a real socket), and the neutral history is converted back into the documented
request JSON. The thinking signature must survive the round trip byte for byte, because the
API verifies it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from duraloop.llm import BlockAssembler, ModelRequest, StreamChunk, ToolSchema
from duraloop.llm._anthropic import AnthropicMessagesModel
from duraloop.llm._anthropic._stream import EventTranslator
from duraloop.log._messages import Message, tool_result_message, user_message

from ._wire_anthropic import AnthropicWireServer, Reply, message_events, parse_sse, text_reply

FIXTURES = Path(__file__).parent / "fixtures" / "anthropic"


def _fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return data


def _sse_text(fixture: dict[str, Any]) -> str:
    return (FIXTURES / str(fixture["response_sse"])).read_text(encoding="utf-8")


def _translate(events: list[dict[str, Any]]) -> list[StreamChunk]:
    translator = EventTranslator("anthropic")
    chunks = [chunk for event in events for chunk in translator.feed(event)]
    return chunks + translator.close()


def _assemble(chunks: list[StreamChunk], model: str) -> tuple[BlockAssembler, Message]:
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.push(chunk)
    return assembler, assembler.message("anthropic", model)


def _tools(request: dict[str, Any]) -> list[ToolSchema]:
    return [
        ToolSchema(t["name"], t["description"], t["input_schema"]) for t in request.get("tools", [])
    ]


@pytest.fixture
def server() -> Iterator[AnthropicWireServer]:
    with AnthropicWireServer.running() as running:
        yield running


@pytest.fixture
async def opus(server: AnthropicWireServer) -> AsyncIterator[AnthropicMessagesModel]:
    adapter = AnthropicMessagesModel("claude-opus-4-6", api_key="k", base_url=server.base_url)
    try:
        yield adapter
    finally:
        await adapter.aclose()


def test_streaming_tool_use_doc_stream_parses_into_text_and_one_tool_call() -> None:
    fixture = _fixture("streaming_tool_use.json")
    chunks = _translate(parse_sse(_sse_text(fixture)))
    assembler, message = _assemble(chunks, "claude-opus-4-6")
    assert message["content"] == [
        {"type": "text", "text": "Okay, let's check the weather for San Francisco, CA:"},
        {
            "type": "tool-call",
            "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "name": "get_weather",
            "arguments": '{"location": "San Francisco, CA", "unit": "fahrenheit"}',
        },
    ]
    assert assembler.usage == {"inputTokens": 472, "outputTokens": 89}
    assert assembler.finish == {"kind": "tool-calls"}
    assert [c["index"] for c in chunks if c["type"] == "block-start"] == [0, 1]


@pytest.mark.anyio
async def test_streaming_tool_use_doc_stream_through_the_sdk_gives_the_same_chunks(
    opus: AnthropicMessagesModel, server: AnthropicWireServer
) -> None:
    fixture = _fixture("streaming_tool_use.json")
    text = _sse_text(fixture)
    server.queue(Reply(actions=[("raw", text.encode())]))
    request = fixture["request"]
    prompt = ModelRequest(
        messages=[user_message(request["messages"][0]["content"])],
        tools=_tools(request),
        max_tokens=request["max_tokens"],
    )
    chunks = [chunk async for chunk in opus.stream(prompt)]
    assert chunks == _translate(parse_sse(text))
    sent = server.requests[0].body
    documented = {key: value for key, value in request.items() if key != "tool_choice"}
    assert sent == documented  # duraloop never sends tool_choice; the rest is the doc's body


@pytest.mark.anyio
async def test_extended_thinking_doc_stream_round_trips_the_signature_byte_exact(
    server: AnthropicWireServer,
) -> None:
    fixture = _fixture("streaming_extended_thinking.json")
    text = _sse_text(fixture)
    request = fixture["request"]
    model = AnthropicMessagesModel(
        request["model"],
        api_key="k",
        base_url=server.base_url,
        reasoning_effort="high",
        max_tokens=request["max_tokens"],
    )
    server.queue(Reply(actions=[("raw", text.encode())]))
    server.queue_events(text_reply("Yes."))
    question = user_message(request["messages"][0]["content"])
    try:
        chunks = [chunk async for chunk in model.stream(ModelRequest(messages=[question]))]
        assembler, reply = _assemble(chunks, request["model"])
        follow_up = ModelRequest(messages=[question, reply, user_message("Is 21 prime?")])
        body = model.encode_request(follow_up)
        assert [c async for c in model.stream(follow_up)][-1]["type"] == "finish"
    finally:
        await model.aclose()
    thinking = (
        "I need to find the GCD of 1071 and 462 using the Euclidean algorithm.\n\n1071 = 2 × 462 + "
        "147\n462 = 3 × 147 + 21\n147 = 7 × 21 + 0\nThe remainder is 0, so GCD(1071, 462) = 21."
    )
    signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds..."
    assert reply["content"] == [
        {"type": "reasoning", "text": thinking},
        {"type": "text", "text": "The greatest common divisor of 1071 and 462 is **21**."},
    ]
    assert assembler.usage is None  # the documented stream reports no usage
    replay = reply["source"]["replayState"]
    assert replay["blocks"] == [{"type": "thinking", "signature": signature}, {"type": "text"}]
    block = {"type": "thinking", "thinking": thinking, "signature": signature}
    assert msgspec.json.encode(block) in body  # byte-exact on the wire
    first, second = server.requests[0].body, server.requests[1].body
    assert second["messages"][1]["content"][0] == block
    assert {k: v for k, v in first.items() if k != "thinking"} == {
        k: v for k, v in request.items() if k != "thinking"
    }
    assert (
        first["thinking"]["type"] == "enabled"
    )  # budget from the effort table, not the doc's 16000


def test_tool_use_guide_response_and_error_result_convert_back_to_the_documented_request() -> None:
    fixture = _fixture("tool_use_guide.json")
    response, request = fixture["response"], fixture["request"]
    _, reply = _assemble(_translate(message_events(response)), response["model"])
    call = reply["content"][1]
    assert call["type"] == "tool-call" and call["id"] == "toolu_01A09q90qw90lq917835lq9"
    assert json.loads(call["arguments"]) == {"location": "San Francisco, CA", "unit": "celsius"}
    error = request["messages"][2]["content"][0]
    history = [
        user_message(request["messages"][0]["content"]),
        reply,
        tool_result_message(
            call["id"], [{"type": "text", "text": error["content"]}], is_error=True
        ),
    ]
    model = AnthropicMessagesModel(request["model"], api_key="k")
    body = model.payload(
        ModelRequest(messages=history, tools=_tools(request), max_tokens=request["max_tokens"])
    )
    assert body == {**request, "stream": True}
