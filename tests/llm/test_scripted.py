"""ScriptedModel: streams like a real provider and fails loudly when misused.

The scripted model is the default for the demo, the tests and the benchmarks, so its
chunk shapes must satisfy the docs/providers.md#stream-contract exactly as a real adapter's do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from duraloop.errors import ConfigError, LlmError
from duraloop.llm import (
    BlockAssembler,
    ModelRequest,
    RetryPolicy,
    ScriptedModel,
    StreamChunk,
    _scripted,
    stream_chunks,
)
from duraloop.llm._errors import LLM_ERROR_CODES
from duraloop.log._json import JsonValue
from duraloop.log._messages import assistant_message, tool_result_message, user_message

REQUEST = ModelRequest(messages=[user_message("hello there, model")], system="be brief")


async def _collect(model: ScriptedModel, request: ModelRequest = REQUEST) -> list[StreamChunk]:
    return [chunk async for chunk in stream_chunks(model, request)]


def _assemble(chunks: list[StreamChunk]) -> BlockAssembler:
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.push(chunk)
    return assembler


@pytest.mark.anyio
async def test_scripted_full_response_streams_blocks_usage_then_finish() -> None:
    model = ScriptedModel(
        [
            {
                "reasoning": "I should read the file and then list the folder.",
                "text": "Let me look at the files in your workspace now.",
                "tool_calls": [
                    {"id": "c1", "name": "read_file", "arguments": {"path": "a.txt"}},
                    {"name": "ls", "arguments": {}},
                ],
            }
        ]
    )
    chunks = await _collect(model)
    types = [chunk["type"] for chunk in chunks]
    assert types[-2:] == ["usage", "finish"]
    assert types.count("block-start") == types.count("block-end") == 4
    text_pieces = [c["text"] for c in chunks if c["type"] == "text-delta"]
    assert len(text_pieces) > 1
    assert all(piece.endswith(" ") for piece in text_pieces[:-1])
    for index in (2, 3):
        deltas = [c for c in chunks if c["type"] == "tool-call-delta" and c["index"] == index]
        assert len(deltas) >= 2
    assert json.loads(json.dumps(chunks)) == chunks
    assembler = _assemble(chunks)
    assert assembler.blocks() == [
        {"type": "reasoning", "text": "I should read the file and then list the folder."},
        {"type": "text", "text": "Let me look at the files in your workspace now."},
        {"type": "tool-call", "id": "c1", "name": "read_file", "arguments": '{"path":"a.txt"}'},
        {"type": "tool-call", "id": "call_1", "name": "ls", "arguments": "{}"},
    ]
    assert assembler.finish == {"kind": "tool-calls"}
    usage = assembler.usage
    assert usage is not None
    assert usage["inputTokens"] == (len("be brief") + len("hello there, model")) // 4
    assert usage["outputTokens"] > 0
    assert model.requests == [REQUEST]


@pytest.mark.anyio
async def test_scripted_string_arguments_are_sent_raw_even_when_malformed() -> None:
    model = ScriptedModel([{"tool_calls": [{"id": "c", "name": "w", "arguments": '{"pa'}]}])
    chunks = await _collect(model)
    fragments = "".join(c["argumentsDelta"] for c in chunks if c["type"] == "tool-call-delta")
    assert fragments == '{"pa'
    assert _assemble(chunks).blocks()[0]["arguments"] == '{"pa'


@pytest.mark.anyio
async def test_scripted_generated_ids_skip_ids_the_script_uses() -> None:
    model = ScriptedModel(
        [
            {
                "tool_calls": [
                    {"name": "a", "arguments": {}},
                    {"id": "call_1", "name": "b", "arguments": {}},
                ]
            },
            {"tool_calls": [{"name": "c", "arguments": {}}]},
        ]
    )
    ids: list[str] = []
    for _ in range(2):
        blocks = _assemble(await _collect(model)).blocks()
        ids.extend(block["id"] for block in blocks)
    assert ids == ["call_2", "call_1", "call_3"]


@pytest.mark.anyio
async def test_scripted_exhausted_script_ends_with_error_finish_naming_the_path(
    tmp_path: Path,
) -> None:
    path = tmp_path / "demo.json"
    path.write_text(json.dumps([{"text": "only one"}]))
    model = ScriptedModel.from_file(path)
    assert model.model == "demo"
    await _collect(model)
    chunks = await _collect(model)
    assert len(chunks) == 1
    finish = chunks[0]
    assert finish["type"] == "finish"
    assert finish["reason"]["kind"] == "error"
    failure = finish["reason"]["failure"]
    assert failure["code"] == "SCRIPT_EXHAUSTED"
    assert "request 2 (the script has 1 responses)" in failure["message"]
    assert str(path) in failure["message"]
    assert len(model.requests) == 2


@pytest.mark.anyio
async def test_scripted_exhausted_script_raises_from_stream_directly() -> None:
    model = ScriptedModel([])
    with pytest.raises(LlmError) as caught:
        async for _ in model.stream(REQUEST):
            pass
    assert caught.value.code == "SCRIPT_EXHAUSTED"
    assert caught.value.retryable is False


@pytest.mark.anyio
async def test_scripted_error_response_streams_text_then_error_finish() -> None:
    model = ScriptedModel(
        [{"text": "partial answer here", "error": {"code": "RATE_LIMIT", "message": "slow down"}}]
    )
    chunks = await _collect(model)
    assert [c["type"] for c in chunks if c["type"] == "text-delta"]
    assert not [c for c in chunks if c["type"] in ("usage", "block-end")]
    assembler = _assemble(chunks)
    assert assembler.finish == {
        "kind": "error",
        "failure": {"message": "slow down", "code": "RATE_LIMIT"},
    }


@pytest.mark.anyio
async def test_scripted_max_tokens_finish_drops_tool_calls_in_assembly() -> None:
    model = ScriptedModel(
        [{"text": "cut", "tool_calls": [{"name": "w", "arguments": "{"}], "finish": "max-tokens"}]
    )
    assembler = _assemble(await _collect(model))
    assert assembler.finish == {"kind": "max-tokens"}
    assert assembler.blocks() == [{"type": "text", "text": "cut"}]


def test_scripted_from_file_rejects_a_non_list_with_the_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"text": "x"}')
    with pytest.raises(ConfigError, match=r"bad\.json must hold a JSON list of responses"):
        ScriptedModel.from_file(path)


def test_scripted_from_file_rejects_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("[{")
    with pytest.raises(ConfigError, match=r"broken\.json is not valid JSON"):
        ScriptedModel.from_file(path)


def test_scripted_from_file_names_the_bad_response_and_field(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps([{"text": "ok"}, {"tool_calls": [{"arguments": {}}]}]))
    with pytest.raises(ConfigError) as caught:
        ScriptedModel.from_file(path)
    assert "response 2, tool call 1: name must be a non-empty string" in str(caught.value)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(
    ("response", "fragment"),
    [
        ({"txt": "x"}, "unknown keys ['txt']"),
        ({"finish": "done"}, "finish must be one of"),
        ({"error": {"code": "X"}}, "error must be"),
        ({"delay_ms": -1}, "delay_ms must be an integer >= 0"),
        ({"text": 3}, "text must be a string"),
    ],
)
def test_scripted_malformed_response_raises_config_error(
    response: dict[str, object], fragment: str
) -> None:
    with pytest.raises(ConfigError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        ScriptedModel([response])


def test_scripted_error_code_that_is_no_llm_error_code_is_refused_with_the_valid_codes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps([{"error": {"code": "RATE_LIMITED", "message": "slow down"}}]))
    with pytest.raises(ConfigError) as caught:
        ScriptedModel.from_file(path)
    text = str(caught.value)
    assert f"{path}: response 1: error code 'RATE_LIMITED' is not an LlmError code" in text
    for code in ("RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT", "EMPTY_RESPONSE", "AUTH"):
        assert code in text
    assert "HTTP_<status>" in text


@pytest.mark.parametrize("code", ["RATE_LIMIT", "CONTEXT_WINDOW_EXCEEDED", "HTTP_404", "UNKNOWN"])
def test_scripted_error_accepts_every_llm_error_code(code: str) -> None:
    assert ScriptedModel([{"error": {"code": code, "message": "failed"}}]).remaining_count == 1


@pytest.mark.parametrize("code", ["HTTP_4", "HTTP_600", "rate_limit", "TOOL_NOT_STARTED"])
def test_scripted_error_refuses_codes_that_only_look_like_llm_error_codes(code: str) -> None:
    with pytest.raises(ConfigError, match="is not an LlmError code"):
        ScriptedModel([{"error": {"code": code, "message": "failed"}}])


def test_every_default_retryable_code_is_an_llm_error_code() -> None:
    assert set(RetryPolicy().retryable_codes) <= set(LLM_ERROR_CODES)
    assert LlmError.RETRYABLE_CODES <= set(LLM_ERROR_CODES)


@pytest.mark.anyio
async def test_scripted_input_tokens_count_only_new_messages_of_a_growing_history(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counted: list[object] = []
    chars = _scripted._message_chars

    def counting(message: Mapping[str, JsonValue]) -> int:
        if "role" in message:  # a message, not the tool-result block it recurses into
            counted.append(message)
        return chars(message)

    monkeypatch.setattr(_scripted, "_message_chars", counting)
    model = ScriptedModel([{"text": "fine"}] * 4)
    call = {"type": "tool-call", "id": "c1", "name": "read", "arguments": '{"p":"abc"}'}
    history = [user_message("x" * 40)]
    expected = [40 // 4]
    history += [
        assistant_message([{"type": "text", "text": "y" * 8}, call], provider="p", model="m"),
        tool_result_message("c1", [{"type": "text", "text": "z" * 12}], is_error=False),
    ]
    expected.append((40 + 8 + len("read") + len('{"p":"abc"}') + 12 + len("sys")) // 4)
    forked = [*history[:1], user_message("w" * 20)]
    expected.append((40 + 20) // 4)
    requests = [
        ModelRequest(messages=history[:1]),
        ModelRequest(messages=list(history), system="sys"),
        ModelRequest(messages=forked),
    ]
    counts = []
    for request in requests:
        usage = _assemble(await _collect(model, request)).usage
        assert usage is not None
        counts.append((usage["inputTokens"], len(counted)))
    # Request 2 counts its 2 new messages; the fork recounts its whole (2-message) history.
    assert counts == [(expected[0], 1), (expected[1], 3), (expected[2], 5)]
