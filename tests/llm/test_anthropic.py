"""AnthropicMessagesModel against a real local HTTP server speaking Messages SSE.

A socket-level server (tests/llm/_wire_anthropic.py), not a mock, so the SDK's transport,
SSE decoding, error classes and `max_retries=0` are exercised. Each fault the issue names
(429 with Retry-After, 500, 529 overloaded, a stream cut mid tool_use, an `event: error`
mid-stream, a malformed data line, a stall, a connection reset) maps to its `LlmError` code
and retryability; the server validates every request against the pairing rules
(docs/providers.md#anthropic-pairing) and the fixture fails the test on any violation.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator

import pytest

from duraloop.errors import LlmError, WirePairingError
from duraloop.llm import BlockAssembler, ModelRequest, StreamChunk, ToolSchema, stream_chunks
from duraloop.llm._anthropic import AnthropicMessagesModel
from duraloop.log._messages import assistant_message, tool_result_message, user_message

from ._wire_anthropic import (
    AnthropicWireServer,
    Reply,
    error_frame,
    message_end,
    message_start,
    redacted_block,
    text_block,
    text_reply,
    thinking_block,
    tool_block,
    tool_reply,
)

REQUEST = ModelRequest(messages=[user_message("hi")])


@pytest.fixture
def server() -> Iterator[AnthropicWireServer]:
    with AnthropicWireServer.running() as running:
        yield running


@pytest.fixture
async def model(server: AnthropicWireServer) -> AsyncIterator[AnthropicMessagesModel]:
    adapter = AnthropicMessagesModel("claude-test", api_key="sk-ant-test", base_url=server.base_url)
    try:
        yield adapter
    finally:
        await adapter.aclose()


async def _collect(
    model: AnthropicMessagesModel, request: ModelRequest = REQUEST
) -> list[StreamChunk]:
    return [chunk async for chunk in model.stream(request)]


async def _raises(
    model: AnthropicMessagesModel, request: ModelRequest = REQUEST
) -> tuple[LlmError, list[StreamChunk]]:
    chunks: list[StreamChunk] = []
    with pytest.raises(LlmError) as caught:
        async for chunk in model.stream(request):
            chunks.append(chunk)
    return caught.value, chunks


@pytest.mark.anyio
async def test_text_stream_posts_to_v1_messages_and_maps_usage(
    model: AnthropicMessagesModel, server: AnthropicWireServer
) -> None:
    server.queue_events(
        [
            message_start(input_tokens=20, cache_read=7),
            *text_block(0, "Hel", "lo"),
            *message_end("end_turn", output_tokens=3),
        ]
    )
    chunks = await _collect(model)
    assert chunks[:-1] == [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "Hel"},
        {"type": "text-delta", "index": 0, "text": "lo"},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "Hello"}},
        {"type": "usage", "usage": {"inputTokens": 20, "outputTokens": 3, "cacheReadTokens": 7}},
    ]
    assert chunks[-1]["type"] == "finish" and chunks[-1]["reason"] == {"kind": "stop"}
    request = server.requests[0]
    assert request.path == "/v1/messages"
    assert "anthropic-version" in request.headers
    # The SDK chooses the auth header (2.14 sends a bearer token); the key must be in one.
    assert "sk-ant-test" in (
        request.headers.get("x-api-key", ""),
        request.headers.get("authorization", "")[7:],
    )
    assert request.body == {
        "model": "claude-test",
        "max_tokens": 8192,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
    }


@pytest.mark.anyio
async def test_tool_round_trip_is_accepted_by_the_server(
    model: AnthropicMessagesModel, server: AnthropicWireServer
) -> None:
    server.queue_events(
        tool_reply(("toolu_a", "read", '{"path": "a"}'), ("toolu_b", "ls", "{}"), text="Reading.")
    )
    server.queue_events(text_reply("Both read."))
    tools = [
        ToolSchema("read", "Read.", {"type": "object"}),
        ToolSchema("ls", "List.", {"type": "object"}),
    ]
    history = [user_message("read a and list")]
    assembler = BlockAssembler()
    for chunk in await _collect(model, ModelRequest(messages=history, tools=tools)):
        assembler.push(chunk)
    reply = assembler.message("anthropic", "claude-test")
    history += [
        reply,
        tool_result_message("toolu_a", [{"type": "text", "text": "A"}], is_error=False),
        tool_result_message("toolu_b", [{"type": "text", "text": "Error: denied"}], is_error=True),
    ]
    request = ModelRequest(messages=history, tools=tools)
    await _collect(model, request)
    sent = server.requests[1].body
    assert sent == model.payload(request)
    assert sent["messages"][1]["content"][1:] == [
        {"type": "tool_use", "id": "toolu_a", "name": "read", "input": {"path": "a"}},
        {"type": "tool_use", "id": "toolu_b", "name": "ls", "input": {}},
    ]
    assert sent["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "A"},
        {
            "type": "tool_result",
            "tool_use_id": "toolu_b",
            "content": "Error: denied",
            "is_error": True,
        },
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "error_type", "message", "code", "retryable"),
    [
        (
            429,
            "rate_limit_error",
            "Number of request tokens has exceeded your rate limit",
            "RATE_LIMIT",
            True,
        ),
        (500, "api_error", "Internal server error", "SERVER", True),
        (529, "overloaded_error", "Overloaded", "SERVER", True),
        (400, "invalid_request_error", "max_tokens: Field required", "INVALID_REQUEST", False),
        (
            400,
            "invalid_request_error",
            "prompt is too long: 208000 tokens > 200000 maximum",
            "CONTEXT_WINDOW_EXCEEDED",
            False,
        ),
        (
            400,
            "invalid_request_error",
            "Your credit balance is too low to access the Anthropic API.",
            "QUOTA",
            False,
        ),
        (401, "authentication_error", "invalid x-api-key", "AUTH", False),
        (403, "permission_error", "Your API key does not have permission", "AUTH", False),
        (404, "not_found_error", "model: claude-nope", "HTTP_404", False),
        (
            413,
            "request_too_large",
            "Request exceeds the maximum allowed number of bytes.",
            "INVALID_REQUEST",
            False,
        ),
    ],
)
async def test_http_error_maps_to_code_status_and_request_id_in_one_attempt(
    model: AnthropicMessagesModel,
    server: AnthropicWireServer,
    status: int,
    error_type: str,
    message: str,
    code: str,
    retryable: bool,
) -> None:
    server.queue_error(status, error_type, message)
    server.queue_error(status, error_type, message)
    error, chunks = await _raises(model)
    assert (error.code, error.retryable, error.status) == (code, retryable, status)
    assert error.message == message
    assert error.request_id == "req_wire_1"
    assert chunks == []
    assert len(server.requests) == 1, "SDK retries must be off"


@pytest.mark.anyio
async def test_429_carries_retry_after_in_milliseconds(
    model: AnthropicMessagesModel, server: AnthropicWireServer
) -> None:
    server.queue_error(429, "rate_limit_error", "slow down", headers={"retry-after": "7"})
    error, _ = await _raises(model)
    assert (error.code, error.provider_retry_after_ms) == ("RATE_LIMIT", 7000)
    assert isinstance(error.__cause__, Exception)


@pytest.mark.anyio
async def test_stream_cut_mid_tool_use_is_stream_closed_not_retryable(
    model: AnthropicMessagesModel, server: AnthropicWireServer
) -> None:
    events = [
        message_start(),
        *text_block(0, "Reading."),
        *tool_block(1, "toolu_1", "read", "", '{"pa'),
    ]
    server.queue_events(events[:-1])  # no content_block_stop, no message_stop
    error, chunks = await _raises(model)
    assert (error.code, error.retryable) == ("STREAM_CLOSED", False)
    assert [c["type"] for c in chunks][-2:] == ["tool-call-delta", "tool-call-delta"]
    assert not any(c["type"] == "finish" for c in chunks)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("error_type", "code", "retryable"),
    [
        ("overloaded_error", "SERVER", True),
        ("api_error", "SERVER", True),
        ("rate_limit_error", "RATE_LIMIT", True),
        ("invalid_request_error", "INVALID_REQUEST", False),
        ("authentication_error", "AUTH", False),
        ("permission_error", "AUTH", False),
    ],
)
async def test_error_event_mid_stream_is_classified_by_error_type(
    model: AnthropicMessagesModel,
    server: AnthropicWireServer,
    error_type: str,
    code: str,
    retryable: bool,
) -> None:
    server.queue_events(
        [message_start(), *text_block(0, "partial"), error_frame(error_type, "went wrong")]
    )
    error, chunks = await _raises(model)
    assert (error.code, error.retryable, error.status) == (code, retryable, None)
    assert error.request_id == "req_wire_1"
    assert "went wrong" in error.message
    assert chunks[-1] == {
        "type": "block-end",
        "index": 0,
        "block": {"type": "text", "text": "partial"},
    }


@pytest.mark.anyio
async def test_malformed_json_data_line_is_malformed_response(
    model: AnthropicMessagesModel, server: AnthropicWireServer
) -> None:
    bad = (
        b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, "delta": '
        b"{oops\n\n"
    )
    server.queue(
        Reply(actions=[("event", message_start()), ("event", text_block(0)[0]), ("raw", bad)])
    )
    error, _ = await _raises(model)
    assert (error.code, error.retryable) == ("MALFORMED_RESPONSE", False)


@pytest.mark.anyio
async def test_stalled_stream_times_out_as_retryable_timeout(server: AnthropicWireServer) -> None:
    model = AnthropicMessagesModel(
        "claude-test", api_key="k", base_url=server.base_url, timeout_seconds=0.3
    )
    server.queue(
        Reply(actions=[("event", message_start()), ("event", text_block(0)[0]), ("stall", None)])
    )
    try:
        error, chunks = await _raises(model)
    finally:
        await model.aclose()
    assert (error.code, error.retryable) == ("TIMEOUT", True)
    assert chunks == [{"type": "block-start", "index": 0, "blockType": "text"}]


@pytest.mark.anyio
async def test_connection_reset_mid_stream_is_retryable_transport(
    model: AnthropicMessagesModel, server: AnthropicWireServer
) -> None:
    server.queue(
        Reply(
            actions=[
                ("event", message_start()),
                *[("event", e) for e in text_block(0, "par")[:2]],
                ("reset", None),
            ]
        )
    )
    error, chunks = await _raises(model)
    assert (error.code, error.retryable) == ("TRANSPORT", True)
    assert [c["type"] for c in chunks] == ["block-start", "text-delta"]


@pytest.mark.anyio
async def test_connection_reset_before_the_response_is_retryable_transport(
    model: AnthropicMessagesModel, server: AnthropicWireServer
) -> None:
    server.queue(Reply(reset_early=True))
    error, _ = await _raises(model)
    assert (error.code, error.retryable) == ("TRANSPORT", True)
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_connection_refused_is_retryable_transport() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = AnthropicMessagesModel("m", api_key="k", base_url=f"http://127.0.0.1:{port}")
    try:
        error, _ = await _raises(model)
    finally:
        await model.aclose()
    assert (error.code, error.retryable) == ("TRANSPORT", True)


@pytest.mark.anyio
async def test_unpaired_history_raises_before_anything_is_sent(
    model: AnthropicMessagesModel, server: AnthropicWireServer
) -> None:
    call = {"type": "tool-call", "id": "toolu_9", "name": "x", "arguments": "{}"}
    history = [
        user_message("go"),
        assistant_message([call], provider="anthropic", model="claude-test"),
        user_message("skip"),
    ]
    with pytest.raises(WirePairingError) as caught:
        await _collect(model, ModelRequest(messages=history))
    assert caught.value.call_id == "toolu_9"
    assert server.requests == []


@pytest.mark.anyio
async def test_stream_chunks_turns_a_raised_fault_into_an_error_finish(
    model: AnthropicMessagesModel, server: AnthropicWireServer
) -> None:
    server.queue_error(529, "overloaded_error", "Overloaded")
    chunks = [chunk async for chunk in stream_chunks(model, REQUEST)]
    assert chunks == [
        {
            "type": "finish",
            "reason": {
                "kind": "error",
                "failure": {
                    "message": "Overloaded",
                    "code": "SERVER",
                    "status": 529,
                    "requestId": "req_wire_1",
                },
            },
        }
    ]


def test_server_rejects_an_invalid_body_and_records_the_violation(
    server: AnthropicWireServer,
) -> None:
    # The validator itself: a body duraloop would never send is answered with a 400.
    import json
    import urllib.request

    body = {
        "model": "m",
        "max_tokens": 5,
        "stream": True,
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "x", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "first"},
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "r"},
                ],
            },
        ],
    }
    request = urllib.request.Request(
        f"{server.base_url}/v1/messages", data=json.dumps(body).encode(), method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request)
    caught.value.close()
    assert caught.value.code == 400
    found = server.take_violations()
    assert any("without `tool_result` blocks immediately after: toolu_1" in v for v in found)
    assert any("tool_result after other content" in v for v in found)


def test_importing_the_adapter_module_does_not_import_the_sdk() -> None:
    script = (
        "import sys, duraloop, duraloop.llm, duraloop.llm._anthropic as a\n"
        "assert 'anthropic' not in sys.modules, 'importing the adapter imported anthropic'\n"
        "a.AnthropicMessagesModel('m', api_key='k')\n"
        "assert 'anthropic' in sys.modules, 'constructing the adapter did not import anthropic'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.anyio
async def test_error_frame_whose_data_is_not_json_is_a_server_error(
    model: AnthropicMessagesModel, server: AnthropicWireServer
) -> None:
    raw = b"event: error\ndata: upstream overloaded\n\n"
    server.queue(Reply(actions=[("event", message_start()), ("raw", raw)]))
    error, _ = await _raises(model)
    assert (error.code, error.retryable) == ("SERVER", True)
    assert "upstream overloaded" in error.message


@pytest.mark.anyio
async def test_thinking_tool_loop_sends_signed_and_redacted_thinking_back_unchanged(
    server: AnthropicWireServer,
) -> None:
    model = AnthropicMessagesModel(
        "claude-test", api_key="k", base_url=server.base_url, reasoning_effort="low"
    )
    signature = "EqQBCgIYAhIM+/sig=="
    server.queue_events(
        [
            message_start(),
            *thinking_block(0, "I should ", "list.", signature=signature),
            *redacted_block(1, "EmwKAhgBEgy+opaque=="),
            *tool_block(2, "toolu_t", "ls", '{"dir": "."}'),
            *message_end("tool_use"),
        ]
    )
    server.queue_events(text_reply("Listed."))
    history = [user_message("list")]
    try:
        assembler = BlockAssembler()
        for chunk in await _collect(model, ModelRequest(messages=history)):
            assembler.push(chunk)
        history += [
            assembler.message("anthropic", "claude-test"),
            tool_result_message("toolu_t", [{"type": "text", "text": "a b"}], is_error=False),
        ]
        await _collect(model, ModelRequest(messages=history))
    finally:
        await model.aclose()
    sent = server.requests[1].body
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert sent["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "I should list.", "signature": signature},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy+opaque=="},
        {"type": "tool_use", "id": "toolu_t", "name": "ls", "input": {"dir": "."}},
    ]
