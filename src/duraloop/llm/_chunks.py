"""The StreamChunk vocabulary (docs/providers.md#stream-contract) as plain JSON dicts.

A model stream is a sequence of chunks, each a lossless JSON dict logged verbatim as
`assistant/chunk.data.chunk`, so the key names are dsh's (`blockType`, `argumentsDelta`,
`inputTokens`). The TypedDicts document the shapes for type checkers; the union is closed
and consumers switch on `type`. The chunk types and finish kinds are defined in
`duraloop.log.vocabulary`.

Contract (docs/providers.md#stream-contract): block indices are allocated in first-seen order; at
    most one
`usage`, before `finish`; exactly one terminal `finish` and nothing after it; blocks may be
left open only when the finish is `error` or `aborted`; tool arguments are raw strings.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypeAlias, TypedDict

from ..errors import UsageError
from ..log import ContentBlock, JsonObject, JsonValue
from ..log.vocabulary import (
    BLOCK_END,
    BLOCK_START,
    FINISH,
    FINISH_ABORTED,
    FINISH_ERROR,
    REASONING_DELTA,
    TEXT_DELTA,
    TOOL_CALL_DELTA,
    USAGE,
)

FinishKind: TypeAlias = Literal["stop", "tool-calls", "max-tokens", "error", "aborted"]
BlockType: TypeAlias = Literal["text", "reasoning", "image", "tool-call", "tool-result"]


class TokenUsage(TypedDict):
    """Disjoint token counts (docs/providers.md#finish-and-usage).

    `inputTokens` excludes cached input.
    """

    inputTokens: int
    outputTokens: int
    cacheReadTokens: NotRequired[int]
    cacheWriteTokens: NotRequired[int]
    reasoningTokens: NotRequired[int]


class FinishReason(TypedDict):
    """Why a stream ended: `{kind, failure?}`; `failure` is an `LlmFailure` for error/aborted."""

    kind: FinishKind
    failure: NotRequired[JsonObject]


class BlockStartChunk(TypedDict):
    """`{"type": "block-start", "index", "blockType"}`: opens block `index`."""

    type: Literal["block-start"]
    index: int
    blockType: BlockType


class TextDeltaChunk(TypedDict):
    """`{"type": "text-delta", "index", "text"}`: appends visible text."""

    type: Literal["text-delta"]
    index: int
    text: str


class ReasoningDeltaChunk(TypedDict):
    """`{"type": "reasoning-delta", "index", "text"}`: appends reasoning text."""

    type: Literal["reasoning-delta"]
    index: int
    text: str


class ToolCallDeltaChunk(TypedDict):
    """`{"type": "tool-call-delta", "index", "id", "name"?, "argumentsDelta"}`.

    `id` may be `""` until known; `name` is present once known; `argumentsDelta` is a raw
    JSON fragment (possibly `""`), never parsed.
    """

    type: Literal["tool-call-delta"]
    index: int
    id: str
    name: NotRequired[str]
    argumentsDelta: str


class BlockEndChunk(TypedDict):
    """`{"type": "block-end", "index", "block"}`: closes block `index`; `block` is authoritative."""

    type: Literal["block-end"]
    index: int
    block: ContentBlock


class UsageChunk(TypedDict):
    """`{"type": "usage", "usage": TokenUsage}`: at most one per stream, before `finish`."""

    type: Literal["usage"]
    usage: TokenUsage


class FinishChunk(TypedDict):
    """`{"type": "finish", "reason", "replayState"?}`: the terminal chunk."""

    type: Literal["finish"]
    reason: FinishReason
    replayState: NotRequired[JsonValue]


StreamChunk: TypeAlias = (
    BlockStartChunk
    | TextDeltaChunk
    | ReasoningDeltaChunk
    | ToolCallDeltaChunk
    | BlockEndChunk
    | UsageChunk
    | FinishChunk
)
"""One chunk of a model stream; switch on `chunk["type"]`."""


def block_start(index: int, block_type: BlockType) -> BlockStartChunk:
    """Build a `block-start` chunk.

    Args:
        index: the block index, allocated in first-seen order.
        block_type: the type of the block being opened.

    Returns:
        `{"type": "block-start", "index": index, "blockType": block_type}`.
    """
    return {"type": BLOCK_START, "index": index, "blockType": block_type}


def text_delta(index: int, text: str) -> TextDeltaChunk:
    """Build a `text-delta` chunk.

    Args:
        index: the text block's index.
        text: the fragment to append.

    Returns:
        `{"type": "text-delta", "index": index, "text": text}`.
    """
    return {"type": TEXT_DELTA, "index": index, "text": text}


def reasoning_delta(index: int, text: str) -> ReasoningDeltaChunk:
    """Build a `reasoning-delta` chunk.

    Args:
        index: the reasoning block's index.
        text: the fragment to append.

    Returns:
        `{"type": "reasoning-delta", "index": index, "text": text}`.
    """
    return {"type": REASONING_DELTA, "index": index, "text": text}


def tool_call_delta(
    index: int, *, call_id: str, name: str | None, arguments_delta: str
) -> ToolCallDeltaChunk:
    """Build a `tool-call-delta` chunk.

    Args:
        index: the tool-call block's index.
        call_id: the call id known so far, `""` when not yet known.
        name: the tool name once known, else None (the key is then omitted).
        arguments_delta: the raw JSON fragment, possibly `""`.

    Returns:
        `{"type": "tool-call-delta", "index", "id", "name"?, "argumentsDelta"}`.
    """
    chunk: ToolCallDeltaChunk = {
        "type": TOOL_CALL_DELTA,
        "index": index,
        "id": call_id,
        "argumentsDelta": arguments_delta,
    }
    if name:
        chunk["name"] = name
    return chunk


def block_end(index: int, block: ContentBlock) -> BlockEndChunk:
    """Build a `block-end` chunk.

    Args:
        index: the index of the block being closed.
        block: the complete content block (authoritative over the deltas).

    Returns:
        `{"type": "block-end", "index": index, "block": block}`.
    """
    return {"type": BLOCK_END, "index": index, "block": block}


def usage_chunk(
    *,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int | None = None,
    cache_write_tokens: int | None = None,
    reasoning_tokens: int | None = None,
) -> UsageChunk:
    """Build a `usage` chunk; optional counts are omitted when None.

    Args:
        input_tokens: uncached input tokens.
        output_tokens: output tokens (reasoning included).
        cache_read_tokens: input tokens read from the provider cache.
        cache_write_tokens: input tokens written to the provider cache.
        reasoning_tokens: the reasoning share of `output_tokens` (informational).

    Returns:
        `{"type": "usage", "usage": {"inputTokens", "outputTokens", ...}}`.
    """
    usage: TokenUsage = {"inputTokens": input_tokens, "outputTokens": output_tokens}
    if cache_read_tokens is not None:
        usage["cacheReadTokens"] = cache_read_tokens
    if cache_write_tokens is not None:
        usage["cacheWriteTokens"] = cache_write_tokens
    if reasoning_tokens is not None:
        usage["reasoningTokens"] = reasoning_tokens
    return {"type": USAGE, "usage": usage}


def finish_chunk(
    kind: FinishKind, *, failure: JsonObject | None = None, replay_state: JsonValue = None
) -> FinishChunk:
    """Build a terminal `finish` chunk.

    Args:
        kind: `stop`, `tool-calls`, `max-tokens`, `error` or `aborted`.
        failure: the `LlmFailure` `{message, code, ...}`; required for error and aborted.
        replay_state: an opaque `{response, blocks?}` replay envelope, or None.

    Returns:
        `{"type": "finish", "reason": {"kind", "failure"?}, "replayState"?}`.

    Raises:
        UsageError: if `failure` is missing for an error/aborted finish, or given for another.
    """
    needs_failure = kind in (FINISH_ERROR, FINISH_ABORTED)
    if needs_failure != (failure is not None):
        raise UsageError(
            f"a {kind!r} finish {'needs' if needs_failure else 'takes no'} failure, got {failure!r}"
        )
    reason: FinishReason = {"kind": kind}
    if failure is not None:
        reason["failure"] = failure
    chunk: FinishChunk = {"type": FINISH, "reason": reason}
    if replay_state is not None:
        chunk["replayState"] = replay_state
    return chunk
