"""MCP results, schemas and annotations as duraloop sees them (docs/mcp.md#results).

The inputs are the SDK's own result and tool types, as a server's answer is parsed into.
"""

from __future__ import annotations

import json

import mcp_types as types
import pytest

from duraloop.log.vocabulary import MCP_TOOL_ERROR
from duraloop.tools.mcp._convert import (
    MAX_DESCRIPTION_CHARS,
    description_of,
    is_parallel_safe,
    outcome_of_result,
    parameters_of,
    validate_arguments,
)


def texts(result: types.CallToolResult) -> list[str]:
    outcome = outcome_of_result(result, server="s", tool="t")
    return [block["text"] for block in outcome.content]


def test_non_text_content_becomes_a_line_describing_it() -> None:
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="before"),
            types.ImageContent(type="image", data="QUJDRA==", mime_type="image/png"),
            types.ResourceLink(type="resource_link", name="readme", uri="file:///r.md"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="file:///a.txt", text="inside"),
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="file:///b.bin", blob="AAAA", mime_type="application/x"
                ),
            ),
        ]
    )
    assert texts(result) == [
        "before",
        "[image 'image/png', about 4 bytes, not shown]",
        "[resource link 'file:///r.md': 'readme']",
        "[resource 'file:///a.txt']\ninside",
        "[resource 'file:///b.bin', 'application/x', not shown]",
    ]


def test_structured_content_not_in_the_text_is_appended_as_json() -> None:
    result = types.CallToolResult(
        content=[types.TextContent(type="text", text="3 rows")],
        structured_content={"rows": [1, 2, 3]},
    )
    assert texts(result) == ["3 rows", '{"rows": [1, 2, 3]}']


def test_structured_content_alone_is_the_result() -> None:
    result = types.CallToolResult(content=[], structured_content={"ok": True})
    assert texts(result) == ['{"ok": true}']


def test_an_empty_success_is_ok_and_an_empty_error_names_the_tool() -> None:
    assert texts(types.CallToolResult(content=[])) == ["ok"]
    failed = outcome_of_result(
        types.CallToolResult(content=[], is_error=True), server="s", tool="t"
    )
    assert failed.is_error
    assert failed.error == {"name": "ToolError", "code": MCP_TOOL_ERROR}
    assert failed.text == "Error: MCP tool t of server s failed"


@pytest.mark.parametrize(
    ("hints", "parallel"),
    [
        (None, False),
        (types.ToolAnnotations(), False),
        (types.ToolAnnotations(read_only_hint=True), True),
        (types.ToolAnnotations(read_only_hint=True, destructive_hint=False), True),
        (types.ToolAnnotations(read_only_hint=True, destructive_hint=True), False),
        (types.ToolAnnotations(read_only_hint=False), False),
        (types.ToolAnnotations(destructive_hint=False, idempotent_hint=True), False),
    ],
)
def test_only_read_only_and_not_destructive_is_parallel_safe(
    hints: types.ToolAnnotations | None, parallel: bool
) -> None:
    listed = types.Tool(name="t", input_schema={"type": "object"}, annotations=hints)
    assert is_parallel_safe(listed, override=None) is parallel
    assert is_parallel_safe(listed, override=not parallel) is (not parallel)


def test_a_schema_without_type_is_an_object_and_others_are_refused() -> None:
    untyped = types.Tool(name="t", input_schema={"properties": {"a": {"type": "string"}}})
    assert parameters_of(untyped) == {"properties": {"a": {"type": "string"}}, "type": "object"}
    array = types.Tool(name="t", input_schema={"type": "array"})
    assert parameters_of(array) is None
    huge = types.Tool(
        name="t",
        input_schema={"type": "object", "description": "x" * (64 * 1024)},
    )
    assert parameters_of(huge) is None


def test_a_long_description_is_cut_and_a_missing_one_is_made_up() -> None:
    long = types.Tool(name="t", input_schema={"type": "object"}, description="d" * 20000)
    described = description_of(long, "s")
    assert len(described) == MAX_DESCRIPTION_CHARS
    assert described.endswith("[truncated]")
    bare = types.Tool(name="t", input_schema={"type": "object"})
    assert description_of(bare, "s") == "The tool t of MCP server s."


def test_arguments_must_be_an_object() -> None:
    assert validate_arguments({"a": 1}) == {"a": 1}
    with pytest.raises(ValueError, match="must be a JSON object, got list"):
        validate_arguments([1])
    assert json.dumps(validate_arguments({})) == "{}"
