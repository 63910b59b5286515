"""The token estimate of messages and request headers (docs/compaction.md#the-estimate).

dsh's fixed heuristic (compaction-spec 4.1), so a `shadowedTokenCount` duraloop writes is
the one dsh would: about four UTF-16 code units a token, plus four per block and message.
It prices what a request will cost before it is sent; the provider's reported usage then
calibrates it (`CompactionFold`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .vocabulary import BLOCK_REASONING, BLOCK_TEXT, BLOCK_TOOL_CALL, BLOCK_TOOL_RESULT

_BLOCK_OVERHEAD = 4
_MESSAGE_OVERHEAD = 4


def utf16_length(text: str) -> int:
    """Return the length of `text` in UTF-16 code units (JavaScript's `.length`)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _json_text(value: object) -> str:
    """Compact JSON in insertion order, as JavaScript's `JSON.stringify` writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _quarter(text: object) -> int:
    """ceil(UTF-16 length / 4) of a string; 0 for anything else."""
    return -(-utf16_length(text) // 4) if isinstance(text, str) else 0


def estimate_content(content: object) -> int:
    """Return the estimated tokens of a list of content blocks (0 for anything else).

    Per block: text and reasoning `ceil(len/4) + 4`; a tool call `ceil(len(name)/4) +
    ceil(len(arguments)/4) + 4`; a tool result its nested content's estimate + 4; any other
    block `4 + ceil(len(compact JSON)/4)` (compaction-spec 4.1).
    """
    if not isinstance(content, list):
        return 0
    total = 0
    for block in content:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == BLOCK_TEXT or kind == BLOCK_REASONING:
            total += _quarter(block.get("text")) + _BLOCK_OVERHEAD
        elif kind == BLOCK_TOOL_CALL:
            total += _quarter(block.get("name")) + _quarter(block.get("arguments"))
            total += _BLOCK_OVERHEAD
        elif kind == BLOCK_TOOL_RESULT:
            total += estimate_content(block.get("content")) + _BLOCK_OVERHEAD
        else:
            total += _BLOCK_OVERHEAD + _quarter(_json_text(block))
    return total


def estimate_message(message: Mapping[str, Any] | None) -> int:
    """Return the estimated tokens of one message: its content's estimate + 4 (0 for None)."""
    if message is None:
        return 0
    return estimate_content(message.get("content")) + _MESSAGE_OVERHEAD


def estimate_header(header: Mapping[str, Any] | None) -> int:
    """Return the estimated tokens of a `request/header`'s header: its system prompt and tools.

    `ceil(len(system)/4) + 4` when there is a system prompt, `ceil(len(JSON of tools)/4) + 4`
    when there are tools (compaction-spec 4.1); 0 for None.
    """
    if header is None:
        return 0
    total = 0
    system = header.get("system")
    if isinstance(system, str) and system:
        total += _quarter(system) + _BLOCK_OVERHEAD
    tools = header.get("tools")
    if isinstance(tools, Sequence) and tools:
        total += _quarter(_json_text(list(tools))) + _BLOCK_OVERHEAD
    return total


def usage_total(usage: object) -> int:
    """Return a `TokenUsage`'s total: input + cache read + cache write + output (0 if none).

    Reasoning tokens are already in `outputTokens` (compaction-spec 4.1).
    """
    if not isinstance(usage, Mapping):
        return 0
    total = 0
    for key in ("inputTokens", "cacheReadTokens", "cacheWriteTokens", "outputTokens"):
        value = usage.get(key)
        if type(value) is int and value > 0:
            total += value
    return total
