"""OpenAIChatModel against a real local HTTP server speaking Chat Completions SSE.

The wire server (`_wire_chat`, OpenAI dialect) is a socket, not a mock: the SDK's transport
and duraloop's SSE reader run as they do for users, and every request the adapter sends
is validated against the pairing rule of docs/providers.md#chat-completions-pairing (the
`fake_openai` fixture fails the test at teardown on a violation). Pinned: parallel tool calls split
across deltas, usage after finish, the OpenAI body options (`max_completion_tokens`,
`reasoning_effort`, no `reasoning_content`), tool-call ids mapped onto the 40-character rule, and
each fault with its code and retryability (docs/providers.md#error-codes, #chat-completions-wire,
#offline-testing).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

from duraloop.errors import ConfigError, LlmError, WirePairingError
from duraloop.llm import BlockAssembler, ModelRequest, OpenAIChatModel, StreamChunk, ToolSchema
from duraloop.log._messages import assistant_message, tool_result_message, user_message

from ._wire_chat import Comment, Raw, WireChatServer, chunk_event, tool_delta, usage_event

REQUEST = ModelRequest(messages=[user_message("hi")])
OK = [chunk_event(content="ok"), chunk_event(finish_reason="stop")]


@pytest.fixture
async def model(fake_openai: WireChatServer) -> AsyncIterator[OpenAIChatModel]:
    adapter = OpenAIChatModel("gpt-test", api_key="sk-test", base_url=fake_openai.base_url)
    try:
        yield adapter
    finally:
        await adapter.aclose()


async def _collect(model: OpenAIChatModel, request: ModelRequest = REQUEST) -> list[StreamChunk]:
    return [chunk async for chunk in model.stream(request)]


async def _raises(model: OpenAIChatModel, request: ModelRequest = REQUEST) -> LlmError:
    with pytest.raises(LlmError) as caught:
        await _collect(model, request)
    return caught.value


@pytest.mark.anyio
async def test_openai_text_stream_maps_deltas_usage_and_finish(
    model: OpenAIChatModel, fake_openai: WireChatServer
) -> None:
    fake_openai.queue_sse(
        [
            chunk_event(content=""),
            chunk_event(content="Hel"),
            Comment(),
            chunk_event(content="lo"),
            chunk_event(finish_reason="stop"),
            usage_event(30, 5, cached_tokens=12, reasoning_tokens=2),
        ]
    )
    chunks = await _collect(model)
    assert chunks == [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "Hel"},
        {"type": "text-delta", "index": 0, "text": "lo"},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "Hello"}},
        {
            "type": "usage",
            "usage": {
                "inputTokens": 18,
                "outputTokens": 5,
                "cacheReadTokens": 12,
                "reasoningTokens": 2,
            },
        },
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    received = fake_openai.requests[0]
    assert received.path == "/v1/chat/completions"
    assert received.headers["authorization"] == "Bearer sk-test"
    assert received.headers["accept"] == "text/event-stream"
    assert received.body == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


@pytest.mark.anyio
async def test_openai_parallel_tool_calls_split_across_deltas_assemble_in_order(
    model: OpenAIChatModel, fake_openai: WireChatServer
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
    assert [c["type"] for c in chunks[-5:]] == ["block-end"] * 3 + ["usage", "finish"]


@pytest.mark.anyio
async def test_openai_server_reusing_index_zero_for_a_new_id_opens_a_new_call(
    model: OpenAIChatModel, fake_openai: WireChatServer
) -> None:
    fake_openai.queue_sse(
        [
            chunk_event(tool_calls=[tool_delta(0, call_id="c1", name="a", arguments="{}")]),
            chunk_event(tool_calls=[tool_delta(0, call_id="c2", name="b", arguments="{}")]),
            chunk_event(finish_reason="tool_calls"),
        ]
    )
    assembler = BlockAssembler()
    for chunk in await _collect(model):
        assembler.push(chunk)
    assert [(b["id"], b["name"]) for b in assembler.blocks()] == [("c1", "a"), ("c2", "b")]


@pytest.mark.anyio
async def test_openai_request_payload_pairs_calls_and_sends_openai_options(
    fake_openai: WireChatServer,
) -> None:
    model = OpenAIChatModel(
        "gpt-test",
        api_key="sk-test",
        base_url=fake_openai.base_url,
        max_tokens=64,
        reasoning_effort="low",
    )
    long_id = "toolu_" + "x" * 58  # an Anthropic-style 64-character id: too long here
    calls = [
        {"type": "tool-call", "id": "c1", "name": "read_file", "arguments": '{"path":"a"}'},
        {"type": "tool-call", "id": long_id, "name": "ls", "arguments": "{bad json"},
    ]
    history = [
        user_message("look at a"),
        assistant_message(
            [{"type": "reasoning", "text": "hmm"}, {"type": "text", "text": "Sure."}, *calls],
            provider="anthropic",
            model="claude-x",
        ),
        tool_result_message("c1", [{"type": "text", "text": "contents"}], is_error=False),
        tool_result_message(long_id, [{"type": "text", "text": "no such dir"}], is_error=True),
        user_message("thanks"),
    ]
    tool = ToolSchema("read_file", "Read a file.", {"type": "object"})
    request = ModelRequest(
        messages=history, system="sys", tools=[tool], max_tokens=100, temperature=0.5
    )
    fake_openai.queue_sse(OK)
    fake_openai.queue_sse(OK)
    try:
        await _collect(model, request)
        await _collect(model, ModelRequest(messages=history[:1]))
    finally:
        await model.aclose()
    body = fake_openai.requests[0].body
    mapped = body["messages"][2]["tool_calls"][1]["id"]
    assert mapped != long_id and len(mapped) <= 40 and mapped.startswith("toolu_xxx")
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
                    "id": mapped,
                    "type": "function",
                    "function": {"name": "ls", "arguments": "{bad json"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "contents"},
        {"role": "tool", "tool_call_id": mapped, "content": "Error: no such dir"},
        {"role": "user", "content": "thanks"},
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
    assert (body["max_completion_tokens"], body["temperature"]) == (100, 0.5)
    assert body["reasoning_effort"] == "low"
    assert "max_tokens" not in body
    assert body == model.payload(request)
    # Without a cap on the request, the constructor's default applies.
    assert fake_openai.requests[1].body["max_completion_tokens"] == 64


@pytest.mark.anyio
async def test_openai_unpaired_history_raises_before_anything_is_sent(
    model: OpenAIChatModel, fake_openai: WireChatServer
) -> None:
    call = {"type": "tool-call", "id": "call_1", "name": "ls", "arguments": "{}"}
    history = [
        user_message("go"),
        assistant_message([call], provider="openai", model="m"),
        user_message("no result in between"),
    ]
    with pytest.raises(WirePairingError) as caught:
        await _collect(model, ModelRequest(messages=history))
    assert (caught.value.call_id, caught.value.message_index) == ("call_1", 1)
    assert "duraloop bug" in str(caught.value)
    assert fake_openai.requests == []


@pytest.mark.parametrize(
    ("status", "message", "error_type", "code", "retryable"),
    [
        (400, "Invalid 'messages[2].content'", "invalid_request_error", "INVALID_REQUEST", False),
        (
            400,
            "This model's maximum context length is 128000 tokens.",
            "invalid_request_error",
            "CONTEXT_WINDOW_EXCEEDED",
            False,
        ),
        (401, "Incorrect API key provided", "invalid_request_error", "AUTH", False),
        (403, "Project does not have access", "permission_error", "AUTH", False),
        (404, "The model `gpt-x` does not exist", "invalid_request_error", "HTTP_404", False),
        (413, "Request too large", "invalid_request_error", "INVALID_REQUEST", False),
        (
            429,
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            "QUOTA",
            False,
        ),
        (429, "Rate limit reached for requests", "requests", "RATE_LIMIT", True),
        (500, "The server had an error", "server_error", "SERVER", True),
        (503, "The engine is currently overloaded", "server_error", "SERVER", True),
    ],
)
@pytest.mark.anyio
async def test_openai_http_errors_map_to_codes(
    model: OpenAIChatModel,
    fake_openai: WireChatServer,
    status: int,
    message: str,
    error_type: str,
    code: str,
    retryable: bool,
) -> None:
    fake_openai.queue_error(
        status, message, error_type=error_type, headers={"x-request-id": "req_9"}
    )
    fake_openai.queue_error(status, message, error_type=error_type)
    error = await _raises(model)
    assert (error.code, error.retryable, error.status) == (code, retryable, status)
    assert error.request_id == "req_9"
    assert message in error.message and f"HTTP {status}" in error.message
    assert len(fake_openai.requests) == 1  # SDK retries are off: one attempt


@pytest.mark.anyio
async def test_openai_429_carries_retry_after_in_milliseconds(
    model: OpenAIChatModel, fake_openai: WireChatServer
) -> None:
    fake_openai.queue_error(429, "Rate limit reached", headers={"retry-after": "7"})
    error = await _raises(model)
    assert (error.code, error.provider_retry_after_ms) == ("RATE_LIMIT", 7000)
    assert isinstance(error.__cause__, Exception)


@pytest.mark.anyio
async def test_openai_stream_cut_before_done_raises_stream_closed_even_after_a_finish(
    model: OpenAIChatModel, fake_openai: WireChatServer
) -> None:
    fake_openai.queue_sse([chunk_event(content="Hel")], done=False)
    fake_openai.queue_sse(
        [chunk_event(content="Hel"), chunk_event(finish_reason="stop")], done=False
    )
    for _ in range(2):
        chunks: list[StreamChunk] = []
        with pytest.raises(LlmError) as caught:
            async for chunk in model.stream(REQUEST):
                chunks.append(chunk)
        assert (caught.value.code, caught.value.retryable) == ("STREAM_CLOSED", False)
        assert [c["type"] for c in chunks] == ["block-start", "text-delta"]


@pytest.mark.anyio
async def test_openai_stream_cut_mid_tool_call_raises_stream_closed(
    model: OpenAIChatModel, fake_openai: WireChatServer
) -> None:
    fake_openai.queue_sse(
        [chunk_event(tool_calls=[tool_delta(0, call_id="c", name="ls", arguments='{"pa')])],
        done=False,
    )
    error = await _raises(model)
    assert (error.code, error.retryable) == ("STREAM_CLOSED", False)


@pytest.mark.parametrize(
    ("error", "code", "retryable"),
    [
        ({"message": "The server had an error", "type": "server_error"}, "SERVER", True),
        ({"message": "Rate limit reached", "type": "rate_limit_exceeded"}, "RATE_LIMIT", True),
        ({"message": "upstream failed", "code": 503}, "SERVER", True),
        ({"message": "bad input", "type": "invalid_request_error"}, "INVALID_REQUEST", False),
    ],
)
@pytest.mark.anyio
async def test_openai_error_payload_mid_stream_is_classified(
    model: OpenAIChatModel,
    fake_openai: WireChatServer,
    error: dict[str, object],
    code: str,
    retryable: bool,
) -> None:
    fake_openai.queue_sse(
        [chunk_event(content="partial"), {"error": error}], headers={"x-request-id": "req_s"}
    )
    caught = await _raises(model)
    assert (caught.code, caught.retryable, caught.request_id) == (code, retryable, "req_s")
    assert str(error["message"]) in caught.message


@pytest.mark.anyio
async def test_openai_malformed_json_payload_raises_malformed_response(
    model: OpenAIChatModel, fake_openai: WireChatServer
) -> None:
    fake_openai.queue_sse([chunk_event(content="a"), Raw(b'data: {"choices": [\n\n')])
    error = await _raises(model)
    assert (error.code, error.retryable) == ("MALFORMED_RESPONSE", False)
    assert '{"choices": [' in error.message


@pytest.mark.anyio
async def test_openai_empty_200_body_is_a_retryable_empty_response(
    model: OpenAIChatModel, fake_openai: WireChatServer
) -> None:
    fake_openai.queue_sse([], done=False)
    error = await _raises(model)
    assert (error.code, error.retryable, error.status) == ("EMPTY_RESPONSE", True, 200)


@pytest.mark.anyio
async def test_openai_non_streaming_json_body_is_refused_as_malformed(
    model: OpenAIChatModel, fake_openai: WireChatServer
) -> None:
    fake_openai.queue_body(200, b'{"id": "chatcmpl-1", "object": "chat.completion", "choices": []}')
    fake_openai.queue_body(200, b'{"error": {"message": "Internal error", "type": "server_error"}}')
    assert (await _raises(model)).code == "MALFORMED_RESPONSE"
    assert (await _raises(model)).code == "SERVER"


@pytest.mark.anyio
async def test_openai_connection_reset_before_and_during_the_stream_is_transport(
    model: OpenAIChatModel, fake_openai: WireChatServer
) -> None:
    fake_openai.queue_reset()
    fake_openai.queue_sse([chunk_event(content="a")], done=False, end="reset")
    for _ in range(2):
        error = await _raises(model)
        assert (error.code, error.retryable) == ("TRANSPORT", True)
        assert fake_openai.base_url in error.message


@pytest.mark.anyio
async def test_openai_length_finish_maps_to_max_tokens_and_filter_to_error(
    model: OpenAIChatModel, fake_openai: WireChatServer
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
    model: OpenAIChatModel, fake_openai: WireChatServer
) -> None:
    fake_openai.queue_sse([chunk_event(content=""), chunk_event(finish_reason="stop")])
    finish = (await _collect(model))[-1]
    assert finish["type"] == "finish"
    assert finish["reason"]["kind"] == "error"
    assert finish["reason"]["failure"]["code"] == "EMPTY_RESPONSE"


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
    assert "ConnectError" in error.message


@pytest.mark.anyio
async def test_openai_image_content_is_refused_before_any_request(
    model: OpenAIChatModel, fake_openai: WireChatServer
) -> None:
    request = ModelRequest(messages=[user_message([{"type": "image", "attachment": {}}])])
    error = await _raises(model, request)
    assert error.code == "UNSUPPORTED_CONTENT"
    assert fake_openai.requests == []


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"api_key": "sk bad"}, "OpenAI API key"),
        ({"api_key": " "}, "OpenAI API key"),
        ({"api_key": "sk-x", "reasoning_effort": "extreme"}, "'extreme'; use one of none"),
        ({"api_key": "sk-x", "max_tokens": 0}, "max_tokens must be an integer >= 1"),
        ({"api_key": "sk-x", "timeout_seconds": 0}, "timeout_seconds must be a number > 0"),
    ],
)
def test_openai_bad_options_are_config_errors(options: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match) as caught:
        OpenAIChatModel("m", **options)  # type: ignore[arg-type]
    assert "sk bad" not in str(caught.value)


def test_importing_duraloop_does_not_import_the_openai_sdk() -> None:
    # A fresh interpreter: this test process has imported openai already.
    script = (
        "import sys, duraloop, duraloop.llm, duraloop.loop\n"
        "assert 'openai' not in sys.modules, 'import duraloop imported openai'\n"
        "from duraloop.llm import OpenAIChatModel\n"
        "OpenAIChatModel('gpt-test', api_key='sk-x')\n"
        "assert 'openai' in sys.modules, 'constructing the adapter did not import openai'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("key", [None, 123])
def test_an_api_key_that_is_not_a_string_is_a_config_error(key: object) -> None:
    """Regression (issue 10 user trial): `api_key=os.environ.get(...)` unset gave AttributeError."""
    with pytest.raises(ConfigError, match="API key .* not a string"):
        OpenAIChatModel("gpt-4.1", api_key=key)  # type: ignore[arg-type]
