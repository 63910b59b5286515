"""BlockAssembler conformance (docs/providers.md#the-block-assembler): the assembler decides what
becomes history.

Pure data in, data out, so each rule of 1.5 gets one small chunk sequence and an exact
expected result.
"""

from __future__ import annotations

import pytest

from duraloop.errors import LlmError
from duraloop.llm import (
    BlockAssembler,
    StreamChunk,
    block_end,
    block_start,
    finish_chunk,
    reasoning_delta,
    text_delta,
    tool_call_delta,
    usage_chunk,
)


def _assemble(chunks: list[StreamChunk]) -> BlockAssembler:
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.push(chunk)
    return assembler


def test_assembler_closed_blocks_use_block_end_as_authoritative() -> None:
    tool = {"type": "tool-call", "id": "c1", "name": "read_file", "arguments": '{"path":"a"}'}
    assembler = _assemble(
        [
            block_start(0, "text"),
            text_delta(0, "hel"),
            text_delta(0, "lo"),
            block_end(0, {"type": "text", "text": "hello"}),
            block_start(1, "tool-call"),
            tool_call_delta(1, call_id="c1", name="read_file", arguments_delta='{"pa'),
            block_end(1, tool),
            finish_chunk("tool-calls"),
        ]
    )
    assert assembler.blocks() == [{"type": "text", "text": "hello"}, tool]
    assert assembler.finish == {"kind": "tool-calls"}


def test_assembler_delta_only_stream_assembles_open_partials() -> None:
    assembler = _assemble(
        [
            reasoning_delta(0, "think"),
            text_delta(1, "a"),
            text_delta(1, "b"),
            tool_call_delta(2, call_id="", name=None, arguments_delta='{"x"'),
            tool_call_delta(2, call_id="", name=None, arguments_delta=":1}"),
        ]
    )
    assert assembler.blocks() == [
        {"type": "reasoning", "text": "think"},
        {"type": "text", "text": "ab"},
        {"type": "tool-call", "id": "call-2", "name": "", "arguments": '{"x":1}'},
    ]


def test_assembler_tool_call_last_nonempty_id_wins_and_name_set_when_truthy() -> None:
    assembler = _assemble(
        [
            tool_call_delta(0, call_id="first", name="grep", arguments_delta=""),
            tool_call_delta(0, call_id="", name="", arguments_delta="{}"),
            tool_call_delta(0, call_id="second", name=None, arguments_delta=""),
        ]
    )
    assert assembler.blocks() == [
        {"type": "tool-call", "id": "second", "name": "grep", "arguments": "{}"}
    ]


def test_assembler_first_start_and_first_end_win_and_late_deltas_are_ignored() -> None:
    assembler = _assemble(
        [
            block_start(0, "text"),
            block_start(0, "reasoning"),
            text_delta(0, "a"),
            block_end(0, {"type": "text", "text": "A"}),
            text_delta(0, "ignored"),
            block_end(0, {"type": "text", "text": "second close"}),
        ]
    )
    assert assembler.blocks() == [{"type": "text", "text": "A"}]


def test_assembler_without_finish_defaults_to_stop() -> None:
    assembler = _assemble([text_delta(0, "hi")])
    assert assembler.finish == {"kind": "stop"}
    assert assembler.usage is None


def test_assembler_usage_last_wins() -> None:
    assembler = _assemble(
        [usage_chunk(input_tokens=1, output_tokens=2), usage_chunk(input_tokens=3, output_tokens=4)]
    )
    assert assembler.usage == {"inputTokens": 3, "outputTokens": 4}


def test_assembler_max_tokens_drops_tool_calls_and_prunes_replay_blocks() -> None:
    assembler = _assemble(
        [
            text_delta(0, "partial"),
            tool_call_delta(1, call_id="c1", name="write", arguments_delta='{"a'),
            finish_chunk("max-tokens", replay_state={"response": "r", "blocks": ["t", "c"]}),
        ]
    )
    assert assembler.blocks() == [{"type": "text", "text": "partial"}]
    assert assembler.replay_state == {"response": "r", "blocks": ["t"]}
    message = assembler.message("scripted", "m")
    assert message["content"] == [{"type": "text", "text": "partial"}]
    assert message["source"]["replayState"] == {"response": "r", "blocks": ["t"]}


def test_assembler_replay_envelope_with_wrong_block_count_is_discarded() -> None:
    assembler = _assemble(
        [text_delta(0, "x"), finish_chunk("stop", replay_state={"response": 1, "blocks": []})]
    )
    assert assembler.replay_state is None
    assert "replayState" not in assembler.message("p", "m")["source"]


def test_assembler_interrupted_blocks_keep_nonblank_text_and_reasoning_only() -> None:
    assembler = _assemble(
        [
            reasoning_delta(0, "plan"),
            block_end(1, {"type": "text", "text": "   "}),
            tool_call_delta(2, call_id="c", name="t", arguments_delta="{"),
            text_delta(3, "said"),
        ]
    )
    assert assembler.interrupted_blocks() == [
        {"type": "reasoning", "text": "plan"},
        {"type": "text", "text": "said"},
    ]


def test_assembler_unclosed_unknown_block_type_raises() -> None:
    assembler = _assemble([block_start(0, "image")])
    with pytest.raises(LlmError) as caught:
        assembler.blocks()
    assert caught.value.code == "MALFORMED_RESPONSE"
    assert "block 0" in str(caught.value)


def test_assembler_delta_of_other_type_than_opened_block_raises() -> None:
    assembler = _assemble([block_start(0, "reasoning")])
    with pytest.raises(LlmError, match="text delta for block 0"):
        assembler.push(text_delta(0, "x"))


def test_assembler_message_builds_assistant_message_with_model_source() -> None:
    assembler = _assemble([text_delta(0, "hi"), finish_chunk("stop")])
    message = assembler.message("openai", "gpt-test")
    assert message["role"] == "assistant"
    assert message["content"] == [{"type": "text", "text": "hi"}]
    assert message["source"] == {"kind": "model", "provider": "openai", "model": "gpt-test"}
    assert len(message["id"]) == 36
