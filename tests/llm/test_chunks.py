"""Stream chunk constructors (docs/providers.md#stream-contract): exact dsh key names, lossless
JSON.

Chunks are logged verbatim as `assistant/chunk.data.chunk`, so the pinned shapes are the
wire contract.
"""

from __future__ import annotations

import json

import pytest

from duraloop.errors import UsageError
from duraloop.llm import (
    block_end,
    block_start,
    finish_chunk,
    reasoning_delta,
    text_delta,
    tool_call_delta,
    usage_chunk,
)


def test_chunk_constructors_produce_dsh_shapes() -> None:
    chunks = [
        block_start(0, "text"),
        text_delta(0, "hi"),
        reasoning_delta(1, "r"),
        tool_call_delta(1, call_id="c1", name="read_file", arguments_delta='{"pa'),
        tool_call_delta(2, call_id="", name=None, arguments_delta=""),
        block_end(0, {"type": "text", "text": "hi"}),
        usage_chunk(input_tokens=10, output_tokens=11),
        usage_chunk(input_tokens=1, output_tokens=2, cache_read_tokens=3, reasoning_tokens=1),
        finish_chunk("stop"),
        finish_chunk("error", failure={"message": "boom", "code": "SERVER"}),
    ]
    assert chunks == [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "hi"},
        {"type": "reasoning-delta", "index": 1, "text": "r"},
        {
            "type": "tool-call-delta",
            "index": 1,
            "id": "c1",
            "name": "read_file",
            "argumentsDelta": '{"pa',
        },
        {"type": "tool-call-delta", "index": 2, "id": "", "argumentsDelta": ""},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "hi"}},
        {"type": "usage", "usage": {"inputTokens": 10, "outputTokens": 11}},
        {
            "type": "usage",
            "usage": {
                "inputTokens": 1,
                "outputTokens": 2,
                "cacheReadTokens": 3,
                "reasoningTokens": 1,
            },
        },
        {"type": "finish", "reason": {"kind": "stop"}},
        {
            "type": "finish",
            "reason": {"kind": "error", "failure": {"message": "boom", "code": "SERVER"}},
        },
    ]
    assert json.loads(json.dumps(chunks)) == chunks


def test_finish_chunk_error_without_failure_is_refused() -> None:
    with pytest.raises(UsageError, match="'error' finish needs failure"):
        finish_chunk("error")
    with pytest.raises(UsageError, match="'stop' finish takes no failure"):
        finish_chunk("stop", failure={"message": "x", "code": "X"})
