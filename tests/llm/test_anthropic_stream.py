"""EventTranslator: Anthropic stream events in, neutral stream chunks out.

See docs/providers.md#stream-contract, #anthropic-wire.

Pure tests over event dicts (the SSE `data` JSON), so every mapping rule is pinned without a
server: block indices in first-seen order, block-end when the provider closes a block,
usage before finish, the replay envelope (one entry per block, signatures kept), each stop
reason, the in-stream error types, and truncation (no `message_stop`) as STREAM_CLOSED.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from duraloop.errors import LlmError
from duraloop.llm import BlockAssembler, StreamChunk
from duraloop.llm._anthropic._errors import stream_error_code
from duraloop.llm._anthropic._stream import EventTranslator

from ._wire_anthropic import (
    message_end,
    message_start,
    redacted_block,
    text_block,
    thinking_block,
    tool_block,
)


def _translate(events: list[dict[str, Any]]) -> list[StreamChunk]:
    translator = EventTranslator("anthropic")
    out: list[StreamChunk] = []
    for event in events:
        out += translator.feed(event)
    out += translator.close()
    return out


def _finish(chunks: list[StreamChunk]) -> dict[str, Any]:
    last = chunks[-1]
    assert last["type"] == "finish"
    return dict(last["reason"])


def test_thinking_text_and_tool_use_map_to_chunks_in_first_seen_order() -> None:
    events = [
        message_start(input_tokens=30, cache_read=12, cache_creation=4),
        *thinking_block(0, "Let me ", "look.", signature="sig-A"),
        *text_block(1, "Reading."),
        *tool_block(2, "toolu_1", "read_file", "", '{"path":', ' "a.txt"}'),
        *message_end("tool_use", output_tokens=42),
    ]
    chunks = _translate(events)
    assert chunks == [
        {"type": "block-start", "index": 0, "blockType": "reasoning"},
        {"type": "reasoning-delta", "index": 0, "text": "Let me "},
        {"type": "reasoning-delta", "index": 0, "text": "look."},
        {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": "Let me look."}},
        {"type": "block-start", "index": 1, "blockType": "text"},
        {"type": "text-delta", "index": 1, "text": "Reading."},
        {"type": "block-end", "index": 1, "block": {"type": "text", "text": "Reading."}},
        {"type": "block-start", "index": 2, "blockType": "tool-call"},
        {
            "type": "tool-call-delta",
            "index": 2,
            "id": "toolu_1",
            "name": "read_file",
            "argumentsDelta": "",
        },
        {
            "type": "tool-call-delta",
            "index": 2,
            "id": "toolu_1",
            "name": "read_file",
            "argumentsDelta": "",
        },
        {
            "type": "tool-call-delta",
            "index": 2,
            "id": "toolu_1",
            "name": "read_file",
            "argumentsDelta": '{"path":',
        },
        {
            "type": "tool-call-delta",
            "index": 2,
            "id": "toolu_1",
            "name": "read_file",
            "argumentsDelta": ' "a.txt"}',
        },
        {
            "type": "block-end",
            "index": 2,
            "block": {
                "type": "tool-call",
                "id": "toolu_1",
                "name": "read_file",
                "arguments": '{"path": "a.txt"}',
            },
        },
        {
            "type": "usage",
            "usage": {
                "inputTokens": 30,
                "outputTokens": 42,
                "cacheReadTokens": 12,
                "cacheWriteTokens": 4,
            },
        },
        {
            "type": "finish",
            "reason": {"kind": "tool-calls"},
            "replayState": {
                "response": {"id": "msg_wire_1", "model": "claude-test", "stopReason": "tool_use"},
                "blocks": [
                    {"type": "thinking", "signature": "sig-A"},
                    {"type": "text"},
                    {"type": "tool_use"},
                ],
            },
        },
    ]


def test_tool_use_without_input_deltas_has_empty_object_arguments() -> None:
    chunks = _translate(
        [message_start(), *tool_block(0, "toolu_x", "now"), *message_end("tool_use")]
    )
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.push(chunk)
    assert assembler.blocks() == [
        {"type": "tool-call", "id": "toolu_x", "name": "now", "arguments": "{}"}
    ]


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", {"kind": "stop"}),
        ("stop_sequence", {"kind": "stop"}),
        ("pause_turn", {"kind": "stop"}),
        (None, {"kind": "stop"}),
        ("max_tokens", {"kind": "max-tokens"}),
        ("tool_use", {"kind": "tool-calls"}),
        (
            "refusal",
            {
                "kind": "error",
                "failure": {
                    "message": "the model declined to answer (stop_reason refusal): I can't",
                    "code": "REFUSAL",
                },
            },
        ),
        (
            "model_context_window_exceeded",
            {
                "kind": "error",
                "failure": {
                    "message": "the response filled the model's context window",
                    "code": "CONTEXT_WINDOW_EXCEEDED",
                },
            },
        ),
        (
            "sensitive",
            {
                "kind": "error",
                "failure": {"message": "model stopped: sensitive", "code": "SENSITIVE"},
            },
        ),
    ],
)
def test_stop_reason_maps_to_finish(stop_reason: str | None, finish: dict[str, Any]) -> None:
    chunks = _translate([message_start(), *text_block(0, "I can't"), *message_end(stop_reason)])
    assert _finish(chunks) == finish
    assert ("replayState" in chunks[-1]) == (finish["kind"] != "error")


def test_refusal_is_not_retryable() -> None:
    assert "REFUSAL" not in LlmError.RETRYABLE_CODES


def test_end_turn_with_only_blank_text_is_an_empty_response() -> None:
    chunks = _translate([message_start(), *text_block(0, " \n"), *message_end("end_turn")])
    assert _finish(chunks) == {
        "kind": "error",
        "failure": {
            "message": "model returned a completed response with no content",
            "code": "EMPTY_RESPONSE",
        },
    }


def test_reasoning_only_answer_is_a_valid_stop() -> None:
    chunks = _translate(
        [message_start(), *thinking_block(0, "hm", signature="s"), *message_end("end_turn")]
    )
    assert _finish(chunks) == {"kind": "stop"}


def test_redacted_thinking_is_empty_reasoning_with_its_data_in_replay_state() -> None:
    chunks = _translate(
        [
            message_start(),
            *redacted_block(0, "EmwKAhgBEgy"),
            *text_block(1, "ok"),
            *message_end("end_turn"),
        ]
    )
    assert chunks[:2] == [
        {"type": "block-start", "index": 0, "blockType": "reasoning"},
        {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": ""}},
    ]
    replay = chunks[-1].get("replayState")
    assert isinstance(replay, dict)
    assert replay["blocks"] == [
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy"},
        {"type": "text"},
    ]


def test_message_delta_usage_is_cumulative_last_wins() -> None:
    events = [
        message_start(input_tokens=5, output_tokens=1),
        *text_block(0, "x"),
        {"type": "message_delta", "delta": {"stop_reason": None}, "usage": {"output_tokens": 3}},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"input_tokens": 6, "output_tokens": 9},
        },
        {"type": "message_stop"},
    ]
    usage = [c for c in _translate(events) if c["type"] == "usage"]
    assert usage == [{"type": "usage", "usage": {"inputTokens": 6, "outputTokens": 9}}]


def test_stream_without_usage_emits_no_usage_chunk() -> None:
    start = message_start()
    del start["message"]["usage"]
    events = [
        start,
        *text_block(0, "x"),
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"},
    ]
    assert [c["type"] for c in _translate(events)] == [
        "block-start",
        "text-delta",
        "block-end",
        "finish",
    ]


def test_stream_ending_before_message_stop_raises_stream_closed() -> None:
    translator = EventTranslator("anthropic")
    for event in [message_start(), *tool_block(0, "toolu_1", "ls", '{"pa')[:2]]:
        translator.feed(event)
    with pytest.raises(LlmError) as caught:
        translator.close()
    assert (caught.value.code, caught.value.retryable) == ("STREAM_CLOSED", False)


@pytest.mark.parametrize(
    "event",
    [
        {"type": "content_block_delta", "index": 7, "delta": {"type": "text_delta", "text": "x"}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "{"},
        },
        {"type": "content_block_stop", "index": 3},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ],
)
def test_event_addressing_no_matching_open_block_is_malformed(event: dict[str, Any]) -> None:
    translator = EventTranslator("anthropic")
    translator.feed(message_start())
    translator.feed(text_block(0)[0])
    with pytest.raises(LlmError) as caught:
        translator.feed(event)
    assert (caught.value.code, caught.value.retryable) == ("MALFORMED_RESPONSE", False)


def test_unknown_block_type_is_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    server_tool = tool_block(0, "srvtoolu_1", "web_search", '{"q": 1}')
    server_tool[0]["content_block"]["type"] = "server_tool_use"
    events = [message_start(), *server_tool, *text_block(1, "done"), *message_end("end_turn")]
    with caplog.at_level(logging.WARNING):
        chunks = _translate(events)
    assert chunks[0] == {"type": "block-start", "index": 0, "blockType": "text"}
    replay = chunks[-1].get("replayState")
    assert isinstance(replay, dict) and replay["blocks"] == [{"type": "text"}]
    assert "server_tool_use" in caplog.text


def test_ping_and_events_after_message_stop_produce_nothing() -> None:
    translator = EventTranslator("anthropic")
    assert translator.feed({"type": "ping"}) == []
    for event in [message_start(), *text_block(0, "a"), *message_end("end_turn")]:
        translator.feed(event)
    assert translator.feed({"type": "content_block_start", "index": 9}) == []
    assert translator.close() == []


@pytest.mark.parametrize(
    ("error_type", "code", "retryable"),
    [
        ("overloaded_error", "SERVER", True),
        ("api_error", "SERVER", True),
        ("rate_limit_error", "RATE_LIMIT", True),
        ("invalid_request_error", "INVALID_REQUEST", False),
        ("authentication_error", "AUTH", False),
        ("permission_error", "AUTH", False),
        ("billing_error", "QUOTA", False),
        ("brand_new_error", "SERVER", True),
    ],
)
def test_error_event_is_classified_by_its_type(error_type: str, code: str, retryable: bool) -> None:
    translator = EventTranslator("anthropic")
    translator.feed(message_start())
    with pytest.raises(LlmError) as caught:
        translator.feed({"type": "error", "error": {"type": error_type, "message": "boom"}})
    assert (caught.value.code, caught.value.retryable, caught.value.status) == (
        code,
        retryable,
        None,
    )
    assert error_type in caught.value.message


def test_invalid_request_error_saying_prompt_too_long_is_context_overflow() -> None:
    assert stream_error_code(
        "invalid_request_error", "prompt is too long: 208000 tokens > 200000 maximum"
    ) == ("CONTEXT_WINDOW_EXCEEDED")
