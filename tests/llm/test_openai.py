"""OpenAIChatModel against a real local HTTP server speaking Chat Completions SSE.

A socket-level fake (not a mock) exercises the SDK's transport, SSE decoding and retry
settings: parallel tool calls split across deltas, usage after finish, truncated streams,
HTTP errors, and the request payload's tool-call pairing (llm-spec 2.1, 2.3, 3.1, 5.4).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

from duraloop.errors import ConfigError, LlmError
from duraloop.llm import (
    BlockAssembler,
    ModelRequest,
    OpenAIChatModel,
    StreamChunk,
    ToolSchema,
)
from duraloop.log._messages import assistant_message, tool_result_message, user_message

from ._fake_openai import FakeOpenAIServer, chunk_event, tool_delta, usage_event

REQUEST = ModelRequest(messages=[user_message("hi")])


@pytest.fixture
async def model(fake_openai: FakeOpenAIServer) -> AsyncIterator[OpenAIChatModel]:
    adapter = OpenAIChatModel("gpt-test", api_key="sk-test", base_url=fake_openai.base_url)
    try:
        yield adapter
    finally:
        await adapter.aclose()


async def _collect(model: OpenAIChatModel, request: ModelRequest = REQUEST) -> list[StreamChunk]:
    return [chunk async for chunk in model.stream(request)]


async def _raises(model: OpenAIChatModel) -> LlmError:
    with pytest.raises(LlmError) as caught:
        await _collect(model)
    return caught.value


@pytest.mark.anyio
async def test_openai_text_stream_maps_deltas_usage_and_finish(
    model: OpenAIChatModel, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue_sse(
        [
            chunk_event(content=""),
            chunk_event(content="Hel"),
            chunk_event(content="lo"),
            chunk_event(finish_reason="stop"),
            usage_event(30, 5, cached_tokens=12),
        ]
    )
    chunks = await _collect(model)
    assert chunks == [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "Hel"},
        {"type": "text-delta", "index": 0, "text": "lo"},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "Hello"}},
        {"type": "usage", "usage": {"inputTokens": 18, "outputTokens": 5, "cacheReadTokens": 12}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    assert fake_openai.requests[0].path == "/v1/chat/completions"
    body = fake_openai.requests[0].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


@pytest.mark.anyio
async def test_openai_parallel_tool_calls_split_across_deltas_assemble_in_order(
    model: OpenAIChatModel, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue_sse(
        [
            chunk_event(content="Reading both."),
            chunk_event(tool_calls=[tool_delta(0, call_id="call_a", name="read_file")]),
            chunk_event(tool_calls=[tool_delta(0, arguments='{"pa')]),
            chunk_event(tool_calls=[tool_delta(1, call_id="call_b", name="ls", arguments="{")]),
            chunk_event(tool_calls=[tool_delta(0, arguments='th":"a.txt"}')]),
            chunk_event(tool_calls=[tool_delta(1, arguments="}")]),
            chunk_event(finish_reason="tool_calls"),
            usage_event(10, 20),
        ]
    )
    chunks = await _collect(model)
    deltas = [c for c in chunks if c["type"] == "tool-call-delta"]
    assert [(d["index"], d["id"], d.get("name"), d["argumentsDelta"]) for d in deltas] == [
        (1, "call_a", "read_file", ""),
        (1, "call_a", "read_file", '{"pa'),
        (2, "call_b", "ls", "{"),
        (1, "call_a", "read_file", 'th":"a.txt"}'),
        (2, "call_b", "ls", "}"),
    ]
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.push(chunk)
    assert assembler.blocks() == [
        {"type": "text", "text": "Reading both."},
        {"type": "tool-call", "id": "call_a", "name": "read_file", "arguments": '{"path":"a.txt"}'},
        {"type": "tool-call", "id": "call_b", "name": "ls", "arguments": "{}"},
    ]
    assert assembler.finish == {"kind": "tool-calls"}
    assert [c["type"] for c in chunks[-5:]] == [
        "block-end",
        "block-end",
        "block-end",
        "usage",
        "finish",
    ]


@pytest.mark.anyio
async def test_openai_request_payload_pairs_tool_calls_with_tool_messages(
    model: OpenAIChatModel, fake_openai: FakeOpenAIServer
) -> None:
    calls = [
        {"type": "tool-call", "id": "c1", "name": "read_file", "arguments": '{"path":"a"}'},
        {"type": "tool-call", "id": "c2", "name": "ls", "arguments": "{bad json"},
    ]
    history = [
        user_message("look at a"),
        assistant_message(
            [{"type": "reasoning", "text": "hmm"}, {"type": "text", "text": "Sure."}, *calls],
            provider="openai",
            model="gpt-test",
        ),
        tool_result_message("c1", [{"type": "text", "text": "contents"}], is_error=False),
        tool_result_message("c2", [{"type": "text", "text": "no such dir"}], is_error=True),
        tool_result_message("c3", [], is_error=False),
    ]
    tool = ToolSchema("read_file", "Read a file.", {"type": "object"})
    request = ModelRequest(
        messages=history, system="sys", tools=[tool], max_tokens=100, temperature=0.5
    )
    fake_openai.queue_sse([chunk_event(content="ok"), chunk_event(finish_reason="stop")])
    await _collect(model, request)
    body = fake_openai.requests[0].body
    assert body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "look at a"},
        {
            "role": "assistant",
            "content": "Sure.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path":"a"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "ls", "arguments": "{bad json"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "contents"},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: no such dir"},
        {"role": "tool", "tool_call_id": "c3", "content": "(no output)"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": {"type": "object"},
            },
        }
    ]
    assert body["max_tokens"] == 100
    assert body["temperature"] == 0.5
    assert body == model.payload(request)


@pytest.mark.anyio
async def test_openai_429_raises_retryable_rate_limit_with_retry_after(
    model: OpenAIChatModel, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue_error(
        429,
        "Rate limit reached",
        error_type="rate_limit_error",
        headers={"retry-after": "7", "x-request-id": "req_42"},
    )
    error = await _raises(model)
    assert (error.code, error.retryable, error.status) == ("RATE_LIMIT", True, 429)
    assert error.provider_retry_after_ms == 7000
    assert error.request_id == "req_42"
    assert error.message == "Rate limit reached"
    assert isinstance(error.__cause__, Exception)
    assert len(fake_openai.requests) == 1


@pytest.mark.anyio
async def test_openai_401_raises_auth_not_retryable(
    model: OpenAIChatModel, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue_error(401, "Incorrect API key provided", error_type="invalid_request_error")
    error = await _raises(model)
    assert (error.code, error.retryable, error.status) == ("AUTH", False, 401)


@pytest.mark.anyio
async def test_openai_500_makes_exactly_one_http_attempt(
    model: OpenAIChatModel, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue_error(500, "internal")
    fake_openai.queue_error(500, "internal")
    fake_openai.queue_error(500, "internal")
    error = await _raises(model)
    assert (error.code, error.retryable) == ("SERVER", True)
    assert len(fake_openai.requests) == 1


@pytest.mark.anyio
async def test_openai_stream_cut_before_finish_raises_stream_closed(
    model: OpenAIChatModel, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue_sse([chunk_event(content="Hel")], done=False)
    chunks: list[StreamChunk] = []
    with pytest.raises(LlmError) as caught:
        async for chunk in model.stream(REQUEST):
            chunks.append(chunk)
    assert (caught.value.code, caught.value.retryable) == ("STREAM_CLOSED", False)
    assert [c["type"] for c in chunks] == ["block-start", "text-delta"]


@pytest.mark.anyio
async def test_openai_length_finish_maps_to_max_tokens_and_filter_to_error(
    model: OpenAIChatModel, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue_sse([chunk_event(content="a"), chunk_event(finish_reason="length")])
    fake_openai.queue_sse([chunk_event(content="b"), chunk_event(finish_reason="content_filter")])
    assert (await _collect(model))[-1] == {"type": "finish", "reason": {"kind": "max-tokens"}}
    assert (await _collect(model))[-1] == {
        "type": "finish",
        "reason": {
            "kind": "error",
            "failure": {"message": "model stopped: content_filter", "code": "CONTENT_FILTER"},
        },
    }


@pytest.mark.anyio
async def test_openai_empty_stop_is_an_empty_response_error(
    model: OpenAIChatModel, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue_sse([chunk_event(content=""), chunk_event(finish_reason="stop")])
    finish = (await _collect(model))[-1]
    assert finish["type"] == "finish"
    assert finish["reason"]["kind"] == "error"
    assert finish["reason"]["failure"]["code"] == "EMPTY_RESPONSE"


@pytest.mark.anyio
async def test_deepseek_reasoning_streams_and_is_sent_back(fake_openai: FakeOpenAIServer) -> None:
    model = OpenAIChatModel(
        "deepseek-chat", api_key="sk-x", base_url=fake_openai.base_url, provider="deepseek"
    )
    history = [
        user_message("q"),
        assistant_message(
            [{"type": "reasoning", "text": "think"}, {"type": "text", "text": "a"}],
            provider="deepseek",
            model="deepseek-chat",
        ),
        user_message("q2"),
    ]
    fake_openai.queue_sse(
        [
            chunk_event(reasoning=""),
            chunk_event(reasoning="step 1"),
            chunk_event(content="answer"),
            chunk_event(finish_reason="stop"),
        ]
    )
    try:
        chunks = [c async for c in model.stream(ModelRequest(messages=history))]
    finally:
        await model.aclose()
    assert chunks[:3] == [
        {"type": "block-start", "index": 0, "blockType": "reasoning"},
        {"type": "reasoning-delta", "index": 0, "text": "step 1"},
        {"type": "block-start", "index": 1, "blockType": "text"},
    ]
    sent = fake_openai.requests[0].body["messages"][1]
    assert sent == {"role": "assistant", "content": "a", "reasoning_content": "think"}


@pytest.mark.anyio
async def test_openai_connection_refused_raises_transport() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAIChatModel("m", api_key="sk-x", base_url=f"http://127.0.0.1:{port}/v1")
    try:
        error = await _raises(model)
    finally:
        await model.aclose()
    assert (error.code, error.retryable) == ("TRANSPORT", True)


@pytest.mark.anyio
async def test_openai_image_content_is_refused_before_any_request(
    model: OpenAIChatModel, fake_openai: FakeOpenAIServer
) -> None:
    request = ModelRequest(messages=[user_message([{"type": "image", "attachment": {}}])])
    with pytest.raises(LlmError) as caught:
        await _collect(model, request)
    assert caught.value.code == "UNSUPPORTED_CONTENT"
    assert fake_openai.requests == []


def test_openai_key_with_spaces_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="openai API key"):
        OpenAIChatModel("m", api_key="sk bad")


def test_importing_duraloop_does_not_import_the_openai_sdk() -> None:
    # A fresh interpreter: this test process has imported openai already.
    script = (
        "import sys, duraloop, duraloop.llm, duraloop.loop\n"
        "assert 'openai' not in sys.modules, 'import duraloop imported openai'\n"
        "model = duraloop.llm.parse_model_spec('openai:gpt-test', env={'OPENAI_API_KEY': 'sk-x'})\n"
        "assert 'openai' in sys.modules, 'constructing the adapter did not import openai'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
