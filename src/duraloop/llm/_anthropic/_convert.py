"""Anthropic Messages message conversion: one history message into wire blocks.

Wire rules (docs/providers.md#anthropic-wire, #anthropic-pairing, #error-tool-results, #adapters):

- The system prompt goes in the top-level `system` string; a `system` message in the
  history becomes user text (Messages has no system role).
- Assistant blocks: `text` (whitespace-only text is skipped, the API rejects it);
  `reasoning` becomes `thinking {thinking, signature}` (or `redacted_thinking {data}`) only
  when the message came from this provider and model and its replay state carries the
  signature; otherwise reasoning is another model's (or was never signed), and it becomes
  plain `text`, as pi-ai does (docs/providers.md#anthropic-wire, #deepseek), so
  the chain of thought is not lost; empty reasoning is dropped. Tool calls become
  `tool_use {id, name, input}` with `input` parsed from the raw argument text (invalid
  JSON, or JSON that is not an object, becomes `{}`, docs/providers.md#anthropic-wire).
- Thinking placement, from the API's own 400s: thinking blocks are only sent as the
  leading run of an assistant message ("If an assistant message contains any thinking
  blocks, the first block must be thinking"), never as its last block ("The final block in
  an assistant message cannot be thinking"); a misplaced one is treated as foreign, and a
  message of nothing but thinking is not sent.
- A tool result becomes `tool_result {tool_use_id, content}` (`is_error: true` on error
  results, absent otherwise as the API defaults it to false; empty content becomes
  `(no output)`, docs/providers.md#error-tool-results), kept apart from the message's other blocks
  so the encoder can put every result first (`_request`).
- Tool-call ids go through the encoder's one `ToolIdMap(ANTHROPIC_IDS)`, so a call and its
  result always carry the same wire id; durable history keeps the original ids.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from ...errors import LlmError
from ...log import JsonObject, Message
from ...log.vocabulary import (
    BLOCK_IMAGE,
    BLOCK_REASONING,
    BLOCK_TEXT,
    BLOCK_TOOL_CALL,
    BLOCK_TOOL_RESULT,
    UNSUPPORTED_CONTENT,
)
from .._content import joined_text
from .._tool_ids import ToolIdMap

logger = logging.getLogger(__name__)

NO_OUTPUT: Final = "(no output)"
THINKING_TYPES: Final = frozenset({"thinking", "redacted_thinking"})

_decode = msgspec.json.decode


class ConvertedMessage:
    """One history message converted: its role and wire blocks (results kept apart)."""

    __slots__ = ("blocks", "results", "role", "thinking")

    def __init__(
        self,
        role: str,
        *,
        results: list[JsonObject] | None = None,
        blocks: list[JsonObject] | None = None,
        thinking: bool = False,
    ) -> None:
        self.role = role
        self.results = results if results is not None else []
        self.blocks = blocks if blocks is not None else []
        self.thinking = thinking  # whether `blocks` holds a thinking block


class MessageConverter:
    """Convert history messages into Messages wire blocks for one provider route and model.

    Args:
        provider: the route whose replay state this adapter reads (`anthropic`).
        model: the model id; replay state is used only for messages of this exact model.
        ids: the tool-call id map shared by every message of the encoder.
    """

    def __init__(self, provider: str, model: str, ids: ToolIdMap) -> None:
        self.provider = provider
        self.model = model
        self.ids = ids

    def convert(self, message: Message) -> ConvertedMessage:
        """Convert one history message.

        Args:
            message: a user, assistant or system message.

        Returns:
            The role (`user` or `assistant`) and the wire blocks, tool results apart.

        Raises:
            LlmError: `UNSUPPORTED_CONTENT` if the message holds an image or has an unknown
                role.
            WirePairingError: `TOOL_ID_COLLISION` if two ids map to one wire id.
        """
        role = message["role"]
        if role == "assistant":
            blocks = self._assistant_blocks(message)
            thinking = any(block["type"] in THINKING_TYPES for block in blocks)
            if thinking:
                blocks = place_thinking(blocks)
            return ConvertedMessage("assistant", blocks=blocks, thinking=thinking)
        if role in ("user", "system"):
            return self._user_part(message)
        raise LlmError(
            f"message {message['id']} has role {role!r}, which Anthropic Messages cannot carry",
            code=UNSUPPORTED_CONTENT,
        )

    def _assistant_blocks(self, message: Message) -> list[JsonObject]:
        entries = self._replay_entries(message)
        out: list[JsonObject] = []
        for position, block in enumerate(message.get("content", [])):
            kind = block.get("type")
            if kind == BLOCK_TEXT:
                _append_text(out, block.get("text", ""))
            elif kind == BLOCK_REASONING:
                entry = entries[position] if entries is not None else None
                out.append(_reasoning_block(block.get("text", ""), entry))
            elif kind == BLOCK_TOOL_CALL:
                out.append(
                    {
                        "type": "tool_use",
                        "id": self.ids.to_wire(block["id"]),
                        "name": block["name"],
                        "input": parse_input(block.get("arguments", ""), block["id"]),
                    }
                )
            elif kind == BLOCK_IMAGE:
                raise _unsupported_image(message)
        return [block for block in out if block]

    def _replay_entries(self, message: Message) -> list[Any] | None:
        source = message.get("source")
        if not isinstance(source, Mapping):
            return None
        if source.get("provider") != self.provider or source.get("model") != self.model:
            return None
        state = source.get("replayState")
        if state is None:
            return None
        entries = state.get("blocks") if isinstance(state, Mapping) else None
        content = message.get("content", [])
        if not isinstance(entries, list) or len(entries) != len(content):
            logger.warning(
                "message %s: replay state does not match its content blocks; its reasoning "
                "is sent as text (docs/providers.md#replay-state)",
                message["id"],
            )
            return None
        return entries

    def _user_part(self, message: Message) -> ConvertedMessage:
        part = ConvertedMessage("user")
        for block in message.get("content", []):
            kind = block.get("type")
            if kind == BLOCK_TOOL_RESULT:
                text = joined_text(
                    block.get("content", []), message, sep="\n", image=_unsupported_image
                )
                result: JsonObject = {
                    "type": "tool_result",
                    "tool_use_id": self.ids.to_wire(block["toolCallId"]),
                    # Whitespace-only is a blank text block to the API, which rejects it.
                    "content": text if text.strip() else NO_OUTPUT,
                }
                if block.get("isError"):
                    result["is_error"] = True  # absent means false (Messages API)
                part.results.append(result)
            elif kind == BLOCK_TEXT:
                _append_text(part.blocks, block.get("text", ""))
            elif kind == BLOCK_IMAGE:
                raise _unsupported_image(message)
        return part


def _reasoning_block(text: str, entry: object) -> JsonObject:
    if isinstance(entry, Mapping):
        kind = entry.get("type")
        signature = entry.get("signature")
        if kind == "thinking" and isinstance(signature, str) and signature:
            return {"type": "thinking", "thinking": text, "signature": signature}
        data = entry.get("data")
        if kind == "redacted_thinking" and isinstance(data, str) and data:
            return {"type": "redacted_thinking", "data": data}
    # Another model's reasoning, or never signed: plain text (docs/providers.md#anthropic-wire), or
    # nothing.
    return {"type": "text", "text": text} if text.strip() else {}


def place_thinking(blocks: list[JsonObject]) -> list[JsonObject]:
    """Keep thinking blocks only where the API accepts them.

    Thinking blocks may only form the leading run of an assistant message and may not be
    its last block (Anthropic 400s: "the first block must be thinking or
    redacted_thinking", "The final block in an assistant message cannot be thinking").
    A thinking block after another block becomes text (a redacted one is dropped); a
    message of nothing but thinking has no valid form and becomes empty (it is not sent).

    Args:
        blocks: an assistant message's wire blocks.

    Returns:
        `blocks` itself when already valid, else a new list.
    """
    lead = 0
    while lead < len(blocks) and blocks[lead]["type"] in THINKING_TYPES:
        lead += 1
    if lead == len(blocks):
        return []  # nothing but thinking: no final block the API accepts
    rest = blocks[lead:]
    if not any(block["type"] in THINKING_TYPES for block in rest):
        return blocks
    out = blocks[:lead]
    for block in rest:
        if block["type"] == "thinking":
            _append_text(out, block["thinking"])
        elif block["type"] != "redacted_thinking":
            out.append(block)
    return out


def _append_text(out: list[JsonObject], text: object) -> None:
    if isinstance(text, str) and text.strip():  # the API rejects empty text blocks
        out.append({"type": "text", "text": text})


def parse_input(arguments: str, call_id: str) -> JsonObject:
    """Parse a tool call's raw argument text into the `tool_use.input` object.

    Args:
        arguments: the raw JSON text the model produced (docs/providers.md#messages).
        call_id: the call's id, for the log.

    Returns:
        The parsed object; `{}` when the text is empty, not JSON, or not a JSON object
        (`input` must be an object, docs/providers.md#anthropic-wire).
    """
    if not arguments.strip():
        return {}
    try:
        value = _decode(arguments)
    except ValueError:  # msgspec.DecodeError is a ValueError
        value = None
    if isinstance(value, dict):
        return value
    logger.warning("tool call %s has arguments that are not a JSON object; sent as {}", call_id)
    return {}


def _unsupported_image(message: Message) -> LlmError:
    return LlmError(
        f"message {message['id']} holds an image; the Anthropic adapter sends text only",
        code=UNSUPPORTED_CONTENT,
    )
