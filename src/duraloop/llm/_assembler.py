"""The block assembler: stream chunks in, content blocks and an assistant message out.

Reimplements dsh's `BlockAssembler` exactly (docs/providers.md#the-block-assembler): tolerant of
delta-only streams, first `block-start` and first `block-end` win, `usage` last wins, a missing
`finish` means `stop`, and a `max-tokens` finish drops every tool-call block (truncated calls are
unsafe to execute).
"""

from __future__ import annotations

import logging
from typing import Any, assert_never

from ..errors import LlmError
from ..log import ContentBlock, JsonValue, Message, assistant_message
from ..log.vocabulary import (
    BLOCK_END,
    BLOCK_REASONING,
    BLOCK_START,
    BLOCK_TEXT,
    BLOCK_TOOL_CALL,
    FINISH,
    FINISH_MAX_TOKENS,
    FINISH_STOP,
    MALFORMED_RESPONSE,
    REASONING_DELTA,
    TEXT_DELTA,
    TOOL_CALL_DELTA,
    USAGE,
)
from ._chunks import FinishReason, StreamChunk, TokenUsage

_STOP: FinishReason = {"kind": FINISH_STOP}


logger = logging.getLogger(__name__)


class _Partial:
    """One block being assembled from its deltas."""

    __slots__ = ("arguments", "block_type", "call_id", "name", "text")

    def __init__(self, block_type: str) -> None:
        self.block_type = block_type
        self.text: list[str] = []
        self.arguments: list[str] = []
        self.call_id = ""
        self.name = ""


class BlockAssembler:
    """Assemble the chunks of one model stream into content blocks.

    See docs/providers.md#the-block-assembler.

    Push every chunk in stream order, then read `finish`, `usage`, `blocks()` or
    `message(...)`. One assembler per model attempt.
    """

    def __init__(self) -> None:
        self._order: list[int] = []
        self._partials: dict[int, _Partial] = {}
        self._closed: dict[int, ContentBlock] = {}
        self._usage: TokenUsage | None = None
        self._finish: FinishReason | None = None
        self._replay_state: JsonValue = None

    def push(self, chunk: StreamChunk) -> None:
        """Fold one chunk into the assembly.

        Args:
            chunk: the next stream chunk.

        Raises:
            LlmError: `MALFORMED_RESPONSE` if a delta addresses a block of another type.
        """
        if chunk["type"] == TEXT_DELTA:
            partial = self._open(chunk["index"], "text")
            if partial is not None:
                partial.text.append(chunk["text"])
        elif chunk["type"] == REASONING_DELTA:
            partial = self._open(chunk["index"], "reasoning")
            if partial is not None:
                partial.text.append(chunk["text"])
        elif chunk["type"] == TOOL_CALL_DELTA:
            partial = self._open(chunk["index"], BLOCK_TOOL_CALL)
            if partial is not None:
                if chunk["id"]:
                    partial.call_id = chunk["id"]
                name = chunk.get("name")
                if name:
                    partial.name = name
                partial.arguments.append(chunk["argumentsDelta"])
        elif chunk["type"] == BLOCK_START:
            index = chunk["index"]
            if index not in self._partials and index not in self._closed:
                self._order.append(index)
                self._partials[index] = _Partial(chunk["blockType"])
        elif chunk["type"] == BLOCK_END:
            index = chunk["index"]
            if index not in self._closed:
                if index not in self._partials:
                    self._order.append(index)
                self._closed[index] = chunk["block"]
        elif chunk["type"] == USAGE:
            self._usage = chunk["usage"]
        elif chunk["type"] == FINISH:
            self._finish = chunk["reason"]
            self._replay_state = chunk.get("replayState")
        else:
            assert_never(chunk)

    def _open(self, index: int, block_type: str) -> _Partial | None:
        if index in self._closed:
            return None  # docs/providers.md#the-block-assembler: deltas after block-end are ignored
        partial = self._partials.get(index)
        if partial is None:
            partial = _Partial(block_type)
            self._partials[index] = partial
            self._order.append(index)
        elif partial.block_type != block_type:
            raise LlmError(
                f"stream sent a {block_type} delta for block {index}, "
                f"which was opened as {partial.block_type}",
                code=MALFORMED_RESPONSE,
            )
        return partial

    @property
    def finish(self) -> FinishReason:
        """The finish reason; `{"kind": "stop"}` when no finish chunk arrived."""
        return _STOP if self._finish is None else self._finish

    @property
    def usage(self) -> TokenUsage | None:
        """The last `usage` chunk's counts, or None when the stream reported none."""
        return self._usage

    def _all_blocks(self) -> list[ContentBlock]:
        return [self._block(index) for index in self._order]

    def _block(self, index: int) -> ContentBlock:
        closed = self._closed.get(index)
        if closed is not None:
            return closed
        partial = self._partials[index]
        if partial.block_type in (BLOCK_TEXT, BLOCK_REASONING):
            return {"type": partial.block_type, "text": "".join(partial.text)}
        if partial.block_type == BLOCK_TOOL_CALL:
            return {
                "type": BLOCK_TOOL_CALL,
                "id": partial.call_id or f"call-{index}",
                "name": partial.name,
                "arguments": "".join(partial.arguments),
            }
        raise LlmError(
            f"stream left block {index} of type {partial.block_type!r} open; "
            "only text, reasoning and tool-call blocks can be assembled from deltas",
            code=MALFORMED_RESPONSE,
        )

    def blocks(self) -> list[ContentBlock]:
        """Return the assembled blocks, one per seen index in first-seen order.

        A closed block is its `block-end` block; an open one is assembled from its deltas (a
        tool call without an id gets `call-<index>`, without a name `""`). When the finish is
        `max-tokens`, every tool-call block is dropped. Tool-call ids are made unique within
        the message (see `unique_tool_call_ids`).

        Returns:
            A new list of content-block dicts.

        Raises:
            LlmError: `MALFORMED_RESPONSE` if a block of another type was left open.
        """
        blocks = self._all_blocks()
        if self.finish["kind"] == FINISH_MAX_TOKENS:
            return [block for block in blocks if block.get("type") != BLOCK_TOOL_CALL]
        return unique_tool_call_ids(blocks)

    @property
    def replay_state(self) -> JsonValue:
        """The finish's replay envelope, pruned like `blocks()`; None when absent or unusable.

        An envelope whose `blocks` list does not have one entry per emitted block is
        discarded entirely (docs/providers.md#the-block-assembler).
        """
        envelope = self._replay_state
        if not isinstance(envelope, dict) or "blocks" not in envelope:
            return envelope
        entries = envelope["blocks"]
        if not isinstance(entries, list) or len(entries) != len(self._order):
            return None
        if self.finish["kind"] != FINISH_MAX_TOKENS:
            return envelope
        all_blocks = self._all_blocks()
        kept = [
            e for e, b in zip(entries, all_blocks, strict=True) if b.get("type") != BLOCK_TOOL_CALL
        ]
        return {**envelope, "blocks": kept}

    def interrupted_blocks(self) -> list[ContentBlock]:
        """Return the text and reasoning blocks worth keeping after a user cancellation.

        Returns:
            Closed or open `text`/`reasoning` blocks with non-whitespace text, in order;
            tool calls and other blocks are omitted.
        """
        out: list[ContentBlock] = []
        for index in self._order:
            closed = self._closed.get(index)
            block: dict[str, Any]
            if closed is not None:
                block = closed
            else:
                partial = self._partials[index]
                if partial.block_type not in (BLOCK_TEXT, BLOCK_REASONING):
                    continue
                block = {"type": partial.block_type, "text": "".join(partial.text)}
            if (
                block.get("type") in (BLOCK_TEXT, BLOCK_REASONING)
                and str(block.get("text", "")).strip()
            ):
                out.append(block)
        return out

    def message(self, provider: str, model: str) -> Message:
        """Build the assistant message from `blocks()` with a model source.

        Args:
            provider: the provider route, e.g. `openai`, `scripted`.
            model: the model id.

        Returns:
            `{id, role: "assistant", content, source: {kind: "model", provider, model,
            replayState?}}` with a fresh id.

        Raises:
            LlmError: `MALFORMED_RESPONSE` if a block of another type was left open.
        """
        return assistant_message(
            self.blocks(), provider=provider, model=model, replay_state=self.replay_state
        )


def unique_tool_call_ids(blocks: list[ContentBlock]) -> list[ContentBlock]:
    """Rename repeated tool-call ids within one message so each call can be answered.

    Some OpenAI-compatible servers give several parallel calls the same id (e.g. `call_0`).
    Left alone, two calls with one id cannot each get exactly one result, and the session
    could never be sent again (pairing rule: OpenAI Chat Completions, Anthropic Messages).
    The second and later uses become `<id>_2`, `<id>_3`, ... (skipping ids already in use),
    and a WARNING names them. The raw `assistant/chunk` events keep the provider's ids.

    Args:
        blocks: the assembled content blocks, in order.

    Returns:
        `blocks` itself when every tool-call id is unique, else a new list in which the
        renamed tool-call blocks are copies.
    """
    ids = [block.get("id") for block in blocks if block.get("type") == BLOCK_TOOL_CALL]
    if len(ids) == len(set(ids)):
        return blocks
    taken = set(ids)
    seen: set[object] = set()
    out: list[ContentBlock] = []
    for block in blocks:
        call_id = block.get("id")
        if block.get("type") == BLOCK_TOOL_CALL and call_id in seen:
            suffix = 2
            while f"{call_id}_{suffix}" in taken:
                suffix += 1
            renamed = f"{call_id}_{suffix}"
            taken.add(renamed)
            logger.warning(
                "model reused tool-call id %r in one message; renamed to %r", call_id, renamed
            )
            block = {**block, "id": renamed}
        seen.add(block.get("id"))
        out.append(block)
    return out
