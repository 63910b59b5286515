"""One planned tool call ("exec"), with its arguments parsed once.

See docs/scheduler.md#arguments, #planning-and-groups.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from ..log import JsonValue


def parse_tool_arguments(raw: str) -> JsonValue:
    """Parse a tool call's raw argument text the way the loop does (docs/scheduler.md#arguments).

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
    except (msgspec.DecodeError, RecursionError):  # nested past the decoder's depth: not ours
        return raw


_decode = msgspec.json.Decoder().decode  # strict JSON: NaN and Infinity are refused
_BYTE_OFFSET: Final = re.compile(r"\(byte (\d+)\)")
_PREVIEW_CHARS: Final = 80


def describe_malformed_arguments(raw: str) -> str | None:
    """Say why a call's raw argument text is not JSON, and where the decoder stopped.

    Args:
        raw: the `arguments` string of a tool-call block.

    Returns:
        None when `raw` is JSON (or empty, which means `{}`); otherwise e.g.
        `arguments are malformed JSON (Expecting ',' delimiter at line 1, column 17,
        char 16): '{"path": "a.txt"'`, with the text shown up to 80 characters.
    """
    if not raw.strip():
        return None
    try:
        _decode(raw)
    except msgspec.DecodeError as exc:
        refused = str(exc)
    except RecursionError:
        return "arguments are malformed JSON (nested too deeply to decode)"
    else:
        return None
    try:
        json.loads(raw)  # only for its diagnostics: what it expected, and where
    except json.JSONDecodeError as exc:
        reason, offset = exc.msg, exc.pos
    except RecursionError:  # too deep for the stdlib: msgspec's words will do
        reason, offset = _msgspec_position(raw, refused)
    else:  # the stdlib accepts NaN and Infinity; msgspec names the byte where it stopped
        reason, offset = _msgspec_position(raw, refused)
    line = raw.count("\n", 0, offset) + 1
    column = offset - (raw.rfind("\n", 0, offset) + 1) + 1
    shown = raw if len(raw) <= _PREVIEW_CHARS else f"{raw[: _PREVIEW_CHARS - 3]}..."
    return (
        f"arguments are malformed JSON ({reason} at line {line}, column {column}, "
        f"char {offset}): {shown!r}"
    )


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
        origin_session_id: the session whose idempotency key the call uses, when it is not
            the pipeline's own (a re-run of a call a fork inherited,
            docs/recovery.md#idempotency-keys); None for the pipeline's session.
    """

    call_id: str
    name: str
    raw_arguments: str
    arguments: JsonValue
    turn: int
    step: int
    origin_session_id: str | None = None

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


def _msgspec_position(raw: str, refused: str) -> tuple[str, int]:
    """Return msgspec's reason and the character offset of the byte it names (or the end)."""
    encoded = raw.encode("utf-8", "surrogatepass")
    found = _BYTE_OFFSET.search(refused)
    byte = int(found.group(1)) if found else len(encoded)
    reason = _BYTE_OFFSET.sub("", refused).strip()  # "JSON is malformed: invalid character"
    return reason, len(encoded[:byte].decode("utf-8", "ignore"))


def planned_calls(
    blocks: Sequence[Mapping[str, Any]], *, turn: int, step: int
) -> list[ToolCallRequest]:
    """Return the calls of an assistant message's tool-call blocks, in model order.

    Args:
        blocks: the tool-call blocks (`id`, `name`, raw `arguments` text).
        turn: the open turn.
        step: the step of the assistant message.

    Returns:
        One `ToolCallRequest` per block, its arguments parsed (`parse_tool_arguments`).
    """
    return [
        ToolCallRequest(
            call_id=block["id"],
            name=block["name"],
            raw_arguments=block["arguments"],
            arguments=parse_tool_arguments(block["arguments"]),
            turn=turn,
            step=step,
        )
        for block in blocks
    ]
