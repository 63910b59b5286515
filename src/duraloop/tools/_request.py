"""One planned tool call ("exec"), with its arguments parsed once (loop-spec 3.2, 4.1)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from ..log._json import JsonValue


def parse_tool_arguments(raw: str) -> JsonValue:
    """Parse a tool call's raw argument text the way the loop does (loop-spec 3.2).

    Args:
        raw: the `arguments` string of a tool-call block.

    Returns:
        `{}` for an empty (or all-whitespace) string, the parsed JSON value, or `raw`
        itself when it is not valid JSON (including `NaN`/`Infinity`, which are not JSON);
        the tool's validator then reports `INVALID_ARGS`.
    """
    if not raw.strip():
        return {}
    try:
        return _decode(raw)
    except msgspec.DecodeError:
        return raw


_decode = msgspec.json.Decoder().decode  # strict JSON: NaN and Infinity are refused


@dataclass(frozen=True)
class ToolCallRequest:
    """One tool call the model requested, as the pipeline stages see it.

    Args:
        call_id: the tool-call block id.
        name: the tool name the model called.
        raw_arguments: the raw argument text (what `tool/call` records).
        arguments: the parsed arguments (see `parse_tool_arguments`).
        turn: the 1-based turn number.
        step: the 1-based step number within the turn.
    """

    call_id: str
    name: str
    raw_arguments: str
    arguments: JsonValue
    turn: int
    step: int

    @classmethod
    def from_block(cls, block: Mapping[str, Any], *, turn: int, step: int) -> ToolCallRequest:
        """Plan a call from an assistant `tool-call` block.

        Args:
            block: `{"type": "tool-call", "id", "name", "arguments"}`.
            turn: the 1-based turn number.
            step: the 1-based step number.

        Returns:
            The request, with `arguments` parsed from the block's raw text.
        """
        raw = block["arguments"]
        return cls(
            call_id=block["id"],
            name=block["name"],
            raw_arguments=raw,
            arguments=parse_tool_arguments(raw),
            turn=turn,
            step=step,
        )
