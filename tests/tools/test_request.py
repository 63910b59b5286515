"""Argument parsing (loop-spec 3.2): empty is `{}`, invalid JSON passes through raw."""

from __future__ import annotations

import pytest

from duraloop.tools._request import ToolCallRequest, parse_tool_arguments


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
