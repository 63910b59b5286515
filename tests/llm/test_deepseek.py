"""DeepSeekChatModel against the wire-level server in the DeepSeek dialect.

See docs/providers.md#deepseek, #deepseek-thinking-mode.

The server validates every request independently of duraloop (pairing, assistant content
never null, `reasoning_content` on tool-call turns in thinking mode, and byte-equal to the
reasoning it streamed for those calls) and fails the test at teardown on a violation.
Pinned here: the body per reasoning effort, the reasoning echo across a tool step, the
2.1 error mapping table with status, request id and Retry-After, and each stream fault with
its code and retryability.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest

from duraloop.errors import ConfigError, LlmError
from duraloop.llm import BlockAssembler, ModelRequest, StreamChunk, ToolSchema
from duraloop.llm._chat_completions import DeepSeekChatModel
from duraloop.log._messages import (
    Message,
    assistant_message,
    tool_result_message,
    user_message,
)

from ._wire_chat import Comment, Raw, Stall, WireChatServer, chunk_event, tool_delta, usage_event

REQUEST = ModelRequest(messages=[user_message("hi")])
TOOL = ToolSchema("get_date", "Get the current date", {"type": "object", "properties": {}})
REASONING = "  The user asks for the date.\nI'll call get_date — é 𝄞 \t"


@pytest.fixture
def server() -> Iterator[WireChatServer]:
    wire = WireChatServer("deepseek")
    wire.start()
    try:
        yield wire
    finally:
        wire.stop()


@pytest.fixture
async def model(server: WireChatServer) -> AsyncIterator[DeepSeekChatModel]:
    adapter = DeepSeekChatModel("deepseek-v4-pro", api_key="sk-test", base_url=server.base_url)
    try:
        yield adapter
    finally:
        await adapter.aclose()


async def _collect(model: DeepSeekChatModel, request: ModelRequest = REQUEST) -> list[StreamChunk]:
    return [chunk async for chunk in model.stream(request)]


async def _raises(model: DeepSeekChatModel, request: ModelRequest = REQUEST) -> LlmError:
    with pytest.raises(LlmError) as caught:
        await _collect(model, request)
    return caught.value


def _assemble(chunks: list[StreamChunk]) -> Message:
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.push(chunk)
    return assembler.message(provider="deepseek", model="deepseek-v4-pro")


@pytest.mark.parametrize(
    ("effort", "expected"),
    [
        (None, {}),
        ("off", {"thinking": {"type": "disabled"}}),
        ("low", {"thinking": {"type": "enabled"}, "reasoning_effort": "low"}),
        ("high", {"thinking": {"type": "enabled"}, "reasoning_effort": "high"}),
        ("max", {"thinking": {"type": "enabled"}, "reasoning_effort": "max"}),
    ],
)
def test_deepseek_body_options_follow_the_effort_table(
    effort: str | None, expected: dict[str, object]
) -> None:
    model = DeepSeekChatModel(
        "deepseek-v4-pro", api_key="sk-x", reasoning_effort=effort, max_tokens=9
    )
    body = model.payload(ModelRequest(messages=[user_message("q")], tools=[TOOL]))
    assert body == {
        "model": "deepseek-v4-pro",
        "messages": [{"role": "user", "content": "q"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        **expected,
        "tools": [{"type": "function", "function": TOOL.to_json()}],
        "max_tokens": 9,
    }
    assert model.payload(ModelRequest(messages=[], max_tokens=3))["max_tokens"] == 3


@pytest.mark.parametrize("effort", ["medium", "OFF", "minimal", ""])
def test_deepseek_unknown_effort_is_a_config_error(effort: str) -> None:
    with pytest.raises(ConfigError, match="use one of off, low, high, max"):
        DeepSeekChatModel("deepseek-v4-pro", api_key="sk-x", reasoning_effort=effort)


def test_deepseek_key_with_spaces_is_a_config_error_that_hides_the_key() -> None:
    with pytest.raises(ConfigError, match="DeepSeek API key") as caught:
        DeepSeekChatModel("deepseek-v4-pro", api_key="sk-sec ret")
    assert "sec ret" not in str(caught.value)


@pytest.mark.anyio
async def test_deepseek_reasoning_is_streamed_and_echoed_byte_exact_on_the_tool_turn(
    server: WireChatServer, model: DeepSeekChatModel
) -> None:
    half = len(REASONING) // 2
    server.queue_sse(
        [
            chunk_event(reasoning=""),
            chunk_event(reasoning=REASONING[:half]),
            Comment("keep-alive"),
            chunk_event(reasoning=REASONING[half:]),
            chunk_event(tool_calls=[tool_delta(0, call_id="call_00_kw66qNnNto", name="get_date")]),
            chunk_event(tool_calls=[tool_delta(0, arguments="{}")]),
            chunk_event(finish_reason="tool_calls"),
            usage_event(100, 40, reasoning_tokens=30),
        ]
    )
    server.queue_sse([chunk_event(reasoning="done"), chunk_event(content="It is 2025-12-01.")])
    history: list[Message] = [user_message("What day is it?")]
    chunks = await _collect(model, ModelRequest(messages=history, tools=[TOOL]))
    assert chunks[:2] == [
        {"type": "block-start", "index": 0, "blockType": "reasoning"},
        {"type": "reasoning-delta", "index": 0, "text": REASONING[:half]},
    ]
    reply = _assemble(chunks)
    assert reply["content"] == [
        {"type": "reasoning", "text": REASONING},
        {"type": "tool-call", "id": "call_00_kw66qNnNto", "name": "get_date", "arguments": "{}"},
    ]
    history += [reply, tool_result_message("call_00_kw66qNnNto", [], is_error=False)]
    final = _assemble(await _collect(model, ModelRequest(messages=history, tools=[TOOL])))
    assert final["content"][1] == {"type": "text", "text": "It is 2025-12-01."}
    sent = server.requests[1].body["messages"]
    assert sent[1:] == [
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": REASONING,
            "tool_calls": [
                {
                    "id": "call_00_kw66qNnNto",
                    "type": "function",
                    "function": {"name": "get_date", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_00_kw66qNnNto", "content": "(no output)"},
    ]
    # The server also checked it against the reasoning it streamed for call_00_kw66qNnNto.
    assert server.streamed_reasoning == {"call_00_kw66qNnNto": REASONING}


@pytest.mark.anyio
async def test_deepseek_thinking_mode_sends_empty_reasoning_for_a_foreign_history(
    server: WireChatServer, model: DeepSeekChatModel
) -> None:
    long_id = "toolu_01A09q90qw90lq917835lq9" + "Z" * 30
    history = [
        user_message("list"),
        assistant_message(
            [{"type": "tool-call", "id": long_id, "name": "ls", "arguments": '{"path":"."}'}],
            provider="anthropic",
            model="claude-x",
        ),
        tool_result_message(long_id, [{"type": "text", "text": "a.txt"}], is_error=False),
        assistant_message([{"type": "text", "text": "One file."}], provider="anthropic", model="c"),
        user_message("thanks"),
    ]
    server.queue_sse([chunk_event(content="ok"), chunk_event(finish_reason="stop")])
    await _collect(model, ModelRequest(messages=history))
    sent = server.requests[0].body["messages"]
    assert [m.get("reasoning_content") for m in sent if m["role"] == "assistant"] == ["", ""]
    wire_id = sent[1]["tool_calls"][0]["id"]
    assert len(wire_id) <= 40 and sent[2]["tool_call_id"] == wire_id


@pytest.mark.anyio
async def test_deepseek_thinking_off_echoes_only_reasoning_that_exists(
    server: WireChatServer,
) -> None:
    model = DeepSeekChatModel(
        "deepseek-v4-flash", api_key="sk-x", base_url=server.base_url, reasoning_effort="off"
    )
    history = [
        user_message("q"),
        assistant_message(
            [{"type": "reasoning", "text": "think"}, {"type": "text", "text": "a"}],
            provider="deepseek",
            model="deepseek-v4-flash",
        ),
        assistant_message([{"type": "text", "text": "b"}], provider="openai", model="gpt"),
        user_message("q2"),
    ]
    server.queue_sse([chunk_event(content="ok")])
    try:
        await _collect(model, ModelRequest(messages=history))
    finally:
        await model.aclose()
    sent = server.requests[0].body
    assert sent["thinking"] == {"type": "disabled"} and "reasoning_effort" not in sent
    assert sent["messages"][1:3] == [
        {"role": "assistant", "content": "a", "reasoning_content": "think"},
        {"role": "assistant", "content": "b"},
    ]


@pytest.mark.anyio
async def test_deepseek_reasoning_only_stop_is_a_response_and_usage_subtracts_cache_hits(
    server: WireChatServer, model: DeepSeekChatModel
) -> None:
    usage = usage_event(120, 30)
    usage["usage"]["prompt_cache_hit_tokens"] = 100
    usage["usage"]["prompt_cache_miss_tokens"] = 20
    server.queue_sse(
        [chunk_event(reasoning="only thoughts"), chunk_event(finish_reason="stop"), usage]
    )
    chunks = await _collect(model)
    assert chunks[-2:] == [
        {"type": "usage", "usage": {"inputTokens": 20, "outputTokens": 30, "cacheReadTokens": 100}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


@pytest.mark.anyio
async def test_deepseek_unknown_finish_reason_is_an_error_finish_with_its_code(
    server: WireChatServer, model: DeepSeekChatModel
) -> None:
    server.queue_sse(
        [chunk_event(content="a"), chunk_event(finish_reason="insufficient_system_resource")]
    )
    finish = (await _collect(model))[-1]
    assert finish["type"] == "finish"
    assert finish["reason"] == {
        "kind": "error",
        "failure": {
            "message": "model stopped: insufficient_system_resource",
            "code": "INSUFFICIENT_SYSTEM_RESOURCE",
        },
    }


@pytest.mark.parametrize(
    ("status", "message", "code", "retryable"),
    [
        (401, "Authentication Fails, Your api key: ****abcd is invalid", "AUTH", False),
        (403, "Forbidden", "AUTH", False),
        (413, "Request Entity Too Large", "INVALID_REQUEST", False),
        (402, "Insufficient Balance", "QUOTA", False),
        (429, "Your usage limit exceeded for this month", "QUOTA", False),
        (429, "Rate Limit Reached", "RATE_LIMIT", True),
        (
            400,
            "This model's maximum context length is 131072 tokens. However, you requested "
            "140000 tokens. Please reduce the length of the messages.",
            "CONTEXT_WINDOW_EXCEEDED",
            False,
        ),
        (400, "Invalid Format", "INVALID_REQUEST", False),
        (422, "Invalid Parameters", "HTTP_422", False),
        (404, "Not Found", "HTTP_404", False),
        (500, "Server Error", "SERVER", True),
        (503, "Server Overloaded", "SERVER", True),
    ],
)
@pytest.mark.anyio
async def test_deepseek_http_errors_follow_the_llm_spec_2_1_table(
    server: WireChatServer,
    model: DeepSeekChatModel,
    status: int,
    message: str,
    code: str,
    retryable: bool,
) -> None:
    server.queue_error(status, message, headers={"x-deepseek-request-id": "ds-req-1"})
    error = await _raises(model)
    assert (error.code, error.retryable, error.status) == (code, retryable, status)
    assert error.message == f"DeepSeek API error (HTTP {status}): {message}"
    assert error.request_id == "ds-req-1"
    assert error.failure()["code"] == code
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_deepseek_error_without_a_json_body_keeps_status_and_prefers_x_request_id(
    server: WireChatServer, model: DeepSeekChatModel
) -> None:
    server.queue_body(
        502,
        b"<html>Bad Gateway</html>",
        content_type="text/html",
        headers={"x-request-id": "edge-1", "x-deepseek-request-id": "ds-2"},
    )
    error = await _raises(model)
    assert (error.code, error.status, error.request_id) == ("SERVER", 502, "edge-1")
    assert error.message.startswith("DeepSeek API error (HTTP 502)")


@pytest.mark.anyio
async def test_deepseek_retry_after_as_seconds_or_http_date_is_milliseconds(
    server: WireChatServer, model: DeepSeekChatModel
) -> None:
    server.queue_error(429, "Rate Limit Reached", headers={"retry-after": "12"})
    in_an_hour = email.utils.formatdate(time.time() + 3600, usegmt=True)
    server.queue_error(503, "Server Overloaded", headers={"retry-after": in_an_hour})
    server.queue_error(429, "Rate Limit Reached", headers={"retry-after": "soon"})
    assert (await _raises(model)).provider_retry_after_ms == 12_000
    from_date = (await _raises(model)).provider_retry_after_ms
    assert from_date is not None and 3_500_000 < from_date <= 3_600_000
    assert (await _raises(model)).provider_retry_after_ms is None


@pytest.mark.anyio
async def test_deepseek_stream_cut_mid_tool_call_is_stream_closed_not_retried(
    server: WireChatServer, model: DeepSeekChatModel
) -> None:
    server.queue_sse(
        [
            chunk_event(reasoning="I will call it"),
            chunk_event(tool_calls=[tool_delta(0, call_id="call_00_x", name="get_date")]),
            chunk_event(tool_calls=[tool_delta(0, arguments='{"tz": "Asia/Sha')]),
        ],
        done=False,
        headers={"x-deepseek-request-id": "ds-cut"},
    )
    chunks: list[StreamChunk] = []
    with pytest.raises(LlmError) as caught:
        async for chunk in model.stream(REQUEST):
            chunks.append(chunk)
    assert (caught.value.code, caught.value.retryable) == ("STREAM_CLOSED", False)
    assert caught.value.request_id == "ds-cut"
    assert "without [DONE]" in caught.value.message
    assert not any(c["type"] in ("block-end", "finish") for c in chunks)


@pytest.mark.anyio
async def test_deepseek_finish_and_usage_are_held_until_done(
    server: WireChatServer, model: DeepSeekChatModel
) -> None:
    # A finish reason and usage arrived, but no [DONE]: the stream is still cut.
    server.queue_sse(
        [chunk_event(content="a"), chunk_event(finish_reason="stop"), usage_event(3, 1)], done=False
    )
    chunks: list[StreamChunk] = []
    with pytest.raises(LlmError) as caught:
        async for chunk in model.stream(REQUEST):
            chunks.append(chunk)
    assert caught.value.code == "STREAM_CLOSED"
    assert [c["type"] for c in chunks] == ["block-start", "text-delta"]


@pytest.mark.parametrize(
    ("frames", "code", "retryable"),
    [
        ([Raw(b"data: {not json}\n\n")], "MALFORMED_RESPONSE", False),
        ([Raw(b"data: [1, 2]\n\n")], "MALFORMED_RESPONSE", False),
        ([{"error": {"message": "Server Overloaded", "type": "server_error"}}], "SERVER", True),
        (
            [Raw(b'event: error\ndata: {"error": {"message": "Rate Limit Reached"}}\n\n')],
            "RATE_LIMIT",
            True,
        ),
        ([{"error": {"message": "Insufficient Balance", "code": 402}}], "QUOTA", False),
    ],
)
@pytest.mark.anyio
async def test_deepseek_bad_payloads_mid_stream_are_classified(
    server: WireChatServer,
    model: DeepSeekChatModel,
    frames: list[object],
    code: str,
    retryable: bool,
) -> None:
    server.queue_sse([chunk_event(content="partial"), *frames])  # type: ignore[list-item]
    error = await _raises(model)
    assert (error.code, error.retryable) == (code, retryable)


@pytest.mark.anyio
async def test_deepseek_keep_alive_comments_and_unknown_events_do_not_disturb_the_stream(
    server: WireChatServer, model: DeepSeekChatModel
) -> None:
    server.queue_sse(
        [
            Comment("keep-alive"),
            chunk_event(content="a"),
            Comment("keep-alive"),
            Raw(b"event: ping\ndata: {}\n\n"),
            chunk_event(content="b"),
            chunk_event(finish_reason="stop"),
        ]
    )
    assert _assemble(await _collect(model))["content"] == [{"type": "text", "text": "ab"}]


@pytest.mark.anyio
async def test_deepseek_faults_map_to_codes_and_retryability(
    server: WireChatServer, model: DeepSeekChatModel
) -> None:
    server.queue_reset()
    server.queue_sse([chunk_event(reasoning="thinking")], done=False, end="reset")
    server.queue_sse([], done=False)
    server.queue_error(500, "Server Error")
    outcomes = [await _raises(model) for _ in range(4)]
    assert [(e.code, e.retryable) for e in outcomes] == [
        ("TRANSPORT", True),
        ("TRANSPORT", True),
        ("EMPTY_RESPONSE", True),
        ("SERVER", True),
    ]
    assert "DeepSeek API request to" in outcomes[0].message
    assert "DeepSeek API stream from" in outcomes[1].message


@pytest.mark.anyio
async def test_deepseek_keep_alive_comments_count_as_activity_without_a_chunk(
    server: WireChatServer, model: DeepSeekChatModel
) -> None:
    server.queue_sse([Comment("keep-alive"), Comment("keep-alive"), Stall()])
    started = anyio.current_time()
    chunks: list[StreamChunk] = []
    with anyio.move_on_after(0.5):  # the stall never ends: only the cancel stops the read
        async for chunk in model.stream(REQUEST):
            chunks.append(chunk)
    assert chunks == []
    assert model.last_activity_seconds is not None and model.last_activity_seconds > started


@pytest.mark.anyio
async def test_deepseek_http_read_timeout_mid_stream_is_a_retryable_timeout(
    server: WireChatServer,
) -> None:
    model = DeepSeekChatModel(
        "deepseek-v4-pro", api_key="sk-x", base_url=server.base_url, timeout_seconds=0.2
    )
    server.queue_sse([chunk_event(content="a"), Stall()])
    try:
        error = await _raises(model)
    finally:
        await model.aclose()
    assert (error.code, error.retryable) == ("TIMEOUT", True)
    assert "timed out" in error.message
