"""Argument parsing (docs/scheduler.md#arguments): empty is `{}`, invalid JSON passes through raw.

Raw text passed through must still be reported as what it is: when the validator refuses
it, the model is told its JSON is malformed and where the decoder stopped (issue 9, B7),
not that it sent a string.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from duraloop.llm import ScriptedModel
from duraloop.log import Session
from duraloop.loop import AgentLoop
from duraloop.testing import assert_log_valid
from duraloop.tools import builtin_tools
from duraloop.tools._request import (
    ToolCallRequest,
    describe_malformed_arguments,
    parse_tool_arguments,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", {}),
        ("  ", {}),
        ('{"a": 1}', {"a": 1}),
        ("[1, 2]", [1, 2]),
        ("{not json", "{not json"),
        ('{"a": NaN}', '{"a": NaN}'),
    ],
)
def test_parse_tool_arguments_follows_loop_rules(raw: str, expected: object) -> None:
    assert parse_tool_arguments(raw) == expected


def test_request_from_block_keeps_raw_and_parsed_arguments() -> None:
    block = {"type": "tool-call", "id": "c1", "name": "t", "arguments": '{"x": true}'}
    call = ToolCallRequest.from_block(block, turn=2, step=3)
    assert call == ToolCallRequest(
        call_id="c1", name="t", raw_arguments='{"x": true}', arguments={"x": True}, turn=2, step=3
    )


def test_truncated_arguments_are_described_as_malformed_json_with_the_decoder_position() -> None:
    assert describe_malformed_arguments('{"path": "a.txt"') == (
        "arguments are malformed JSON (Expecting ',' delimiter at line 1, column 17, char 16): "
        '\'{"path": "a.txt"\''
    )


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ('{"a":\n 1,\n}', "line 3, column 1, char 10"),
        ('{"é": NaN}', "line 1, column 7, char 6"),  # msgspec's byte 7 is character 6
        ('{"a": 1}}', "line 1, column 9, char 8"),
    ],
)
def test_malformed_arguments_name_the_line_column_and_char_offset(raw: str, where: str) -> None:
    described = describe_malformed_arguments(raw)
    assert described is not None and f" at {where})" in described
    assert described.startswith("arguments are malformed JSON (")
    assert len(described) < 200  # the text is shown bounded


def test_arguments_nested_past_the_decoders_depth_pass_through_raw_and_are_malformed() -> None:
    raw = "[" * 100_000
    assert parse_tool_arguments(raw) == raw
    assert describe_malformed_arguments(raw) == (
        "arguments are malformed JSON (nested too deeply to decode)"
    )


@pytest.mark.parametrize("raw", ["", "  ", '"a string"', "[1]", '{"a": 1}'])
def test_json_arguments_are_not_called_malformed(raw: str) -> None:
    assert describe_malformed_arguments(raw) is None


@pytest.mark.anyio
async def test_model_is_told_its_truncated_arguments_are_malformed_json(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n", encoding="utf-8")
    raw = '{"path": "a.txt"'
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"id": "c1", "name": "read_file", "arguments": raw}]},
        {"text": "sorry"},
    ]
    session = Session("s")
    model = ScriptedModel(script)
    loop = AgentLoop(session, model=model, tools=builtin_tools(), cwd=tmp_path)
    await loop.run_turn("read a.txt")
    (result,) = [e for e in session.events if e.type == "tool/result"]
    assert result.data["error"]["code"] == "INVALID_ARGS"
    text = result.data["message"]["content"][0]["content"][0]["text"]
    assert text == (
        'Error: invalid arguments for tool "read_file": arguments are malformed JSON '
        "(Expecting ',' delimiter at line 1, column 17, char 16): '{\"path\": \"a.txt\"'"
    )
    assert "got str" not in text
    # The model sees exactly that text in its next request.
    (block,) = model.requests[1].messages[-1]["content"]
    assert (block["toolCallId"], block["isError"], block["content"][0]["text"]) == (
        "c1",
        True,
        text,
    )
    assert_log_valid(session)
