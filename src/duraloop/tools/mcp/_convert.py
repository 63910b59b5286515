"""From MCP to duraloop: a listed tool's schema and class, a call's result as a `ToolOutcome`.

See docs/mcp.md#results and docs/mcp.md#parallel-calls.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Final

import mcp_types as types

from ...log import ContentBlock, JsonObject, JsonValue
from ...log.vocabulary import MCP_TOOL_ERROR, TOOL_ERROR_NAME
from .._outcome import NONE_RESULT_TEXT, ToolOutcome, text_block

logger = logging.getLogger("duraloop.tools.mcp")

MAX_DESCRIPTION_CHARS: Final = 8192
"""The longest tool description kept from a server, in characters; longer ones are cut."""

MAX_SCHEMA_BYTES: Final = 64 * 1024
"""The largest input schema accepted from a server, in bytes of compact JSON; a tool whose
schema is larger is skipped with a warning (docs/mcp.md#naming)."""

_MAX_LABEL_CHARS: Final = 200
_TRUNCATED: Final = " [truncated]"


def label(text: object) -> str:
    """Quote an untrusted string for a message: `repr`, cut to 200 characters."""
    quoted = repr(text)
    return quoted if len(quoted) <= _MAX_LABEL_CHARS else f"{quoted[: _MAX_LABEL_CHARS - 3]}..."


def is_parallel_safe(listed: types.Tool, *, override: bool | None) -> bool:
    """Classify a listed tool: parallel-safe only if read-only and not destructive.

    See docs/mcp.md#parallel-calls.

    Args:
        listed: the tool as the server lists it.
        override: the configured classification for this tool, or None to read the
            annotations.

    Returns:
        `override` when given; else True when the server says `readOnlyHint: true` and does
        not say `destructiveHint: true`; False otherwise (no annotations, or any other hint).
    """
    if override is not None:
        return override
    hints = listed.annotations
    return hints is not None and hints.read_only_hint is True and hints.destructive_hint is not True


def parameters_of(listed: types.Tool) -> JsonObject | None:
    """Return a listed tool's input schema for the model, or None if it cannot be used.

    A schema without a `type` gets `"type": "object"`; a schema of another type, or one over
    `MAX_SCHEMA_BYTES`, is refused (None), and the caller skips the tool.
    """
    schema: dict[str, Any] = dict(listed.input_schema)
    schema.setdefault("type", "object")
    if schema["type"] != "object":
        return None
    try:
        text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return None
    if len(text.encode("utf-8", "replace")) > MAX_SCHEMA_BYTES:
        return None
    parsed: JsonObject = json.loads(text)
    return parsed


def description_of(listed: types.Tool, server: str) -> str:
    """Return a listed tool's description, cut to `MAX_DESCRIPTION_CHARS` characters."""
    text = listed.description or listed.title or f"The tool {listed.name} of MCP server {server}."
    if len(text) > MAX_DESCRIPTION_CHARS:
        return text[: MAX_DESCRIPTION_CHARS - len(_TRUNCATED)] + _TRUNCATED
    return text


def validate_arguments(arguments: JsonValue) -> dict[str, Any]:
    """Accept a JSON object as an MCP call's arguments; the server checks them against its schema.

    Raises:
        ValueError: if the arguments are not a JSON object (an `INVALID_ARGS` result).
    """
    if not isinstance(arguments, dict):
        raise ValueError(f"arguments must be a JSON object, got {type(arguments).__name__}")
    return arguments


def outcome_of_result(result: types.CallToolResult, *, server: str, tool: str) -> ToolOutcome:
    """Turn an MCP `tools/call` result into the call's outcome (docs/mcp.md#results).

    Text content becomes text blocks; other content (images, audio, resources) becomes a text
    line describing it, since not every provider takes such blocks in a tool result. The
    structured content, when the server sends one, follows as one JSON text block, unless a
    text block already holds it, or holds its lone `result` field (the SDK's servers send both:
    a dict as its JSON text, a plain value wrapped as `{"result": value}`).

    Args:
        result: the server's answer.
        server: the server's configured name, for the texts.
        tool: the server's name for the tool, for the texts.

    Returns:
        A success, or for `isError: true` a failure with the code `MCP_TOOL_ERROR` and the
        server's content.
    """
    blocks = [block for item in result.content for block in _blocks_of(item)]
    structured = result.structured_content
    if structured is not None and not _holds_json(blocks, structured):
        blocks.append(text_block(json.dumps(structured, ensure_ascii=False)))
    if result.is_error:
        if not blocks:
            blocks = [text_block(f"Error: MCP tool {tool} of server {server} failed")]
        return ToolOutcome(
            is_error=True, content=blocks, error={"name": TOOL_ERROR_NAME, "code": MCP_TOOL_ERROR}
        )
    return ToolOutcome.ok(blocks or NONE_RESULT_TEXT)


def _blocks_of(item: object) -> list[ContentBlock]:
    if isinstance(item, types.TextContent):
        return [text_block(item.text)]
    if isinstance(item, types.ImageContent | types.AudioContent):
        kind = "image" if isinstance(item, types.ImageContent) else "audio"
        size = len(item.data) * 3 // 4 - item.data[-2:].count("=")  # base64
        return [text_block(f"[{kind} {label(item.mime_type)}, about {size} bytes, not shown]")]
    if isinstance(item, types.ResourceLink):
        return [text_block(f"[resource link {label(str(item.uri))}: {label(item.name)}]")]
    if isinstance(item, types.EmbeddedResource):
        resource = item.resource
        uri = label(str(resource.uri))
        if isinstance(resource, types.TextResourceContents):
            return [text_block(f"[resource {uri}]\n{resource.text}")]
        return [text_block(f"[resource {uri}, {label(resource.mime_type)}, not shown]")]
    kind = getattr(item, "type", type(item).__name__)
    return [text_block(f"[{label(kind)} content, not shown]")]


def _holds_json(blocks: list[ContentBlock], value: object) -> bool:
    """Whether a text block holds `value`, or the lone `result` the SDK wraps a plain return in."""
    wanted = [value]
    if isinstance(value, dict) and len(value) == 1 and "result" in value:
        wanted.append(value["result"])
    for block in blocks:
        text = block.get("text")
        if not isinstance(text, str):
            continue
        if text in wanted:
            return True
        try:
            if json.loads(text) in wanted:
                return True
        except ValueError:
            continue
    return False
