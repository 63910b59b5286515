"""Chat Completions message conversion: one history message into its wire messages.

Wire rules (docs/providers.md#chat-completions-wire, the pairing rule of 3.1 and the
error-result rule of section 4): an assistant message carries all its tool calls (raw
argument strings) and string `content` (never null, `""` without text); each tool result
becomes one `tool` message, in call order, whose text says when the call failed and is never
empty (`(no output)`); tool messages come before any user text of the same message.

A cold encoder cache converts a whole history at once (after a resume, a replaced history,
a provider switch), so the common shapes take the shortest path: a user message of one
successful text tool result is converted inline, without the general loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal, TypeAlias

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

NO_OUTPUT: Final = "(no output)"
ERROR_PREFIX: Final = "Error: "

ReasoningEcho: TypeAlias = Literal["never", "present", "always"]
"""How an assistant's reasoning goes back as `reasoning_content`: `never` (OpenAI, which
has no such field), `present` (only when the message has reasoning), `always` (as
`present`, and `""` when it has none: DeepSeek in thinking mode)."""


def convert_message(
    message: Message, *, echo: ReasoningEcho, wire_id: Callable[[str], str]
) -> list[JsonObject]:
    """Convert one history message into its Chat Completions wire messages.

    Args:
        message: a user, assistant or system message.
        echo: how the assistant's reasoning blocks are sent back (see `ReasoningEcho`;
            DeepSeek's rule is docs/providers.md#deepseek-thinking-mode).
        wire_id: maps a history tool-call id to the id sent (a `ToolIdMap.to_wire`).

    Returns:
        One wire message, or for a user message holding tool results one `tool` message
        per result (then a `user` message if it also holds text); never empty.

    Raises:
        LlmError: `UNSUPPORTED_CONTENT` if the message holds an image or has an unknown role.
        WirePairingError: `TOOL_ID_COLLISION` if two history ids map to one wire id.
    """
    role = message["role"]
    if role == "user":
        blocks = message.get("content", ())
        if len(blocks) == 1:
            # The common case inlined (a cold cache converts thousands of these): one
            # successful tool result of one non-empty text block becomes one tool message.
            block = blocks[0]
            if block.get("type") == BLOCK_TOOL_RESULT and not block.get("isError"):
                inner = block.get("content", ())
                if len(inner) == 1:
                    part = inner[0]
                    text = part.get("text") if part.get("type") == BLOCK_TEXT else None
                    if type(text) is str and text:
                        call_id = wire_id(block["toolCallId"])
                        return [{"role": "tool", "tool_call_id": call_id, "content": text}]
        return _convert_user(message, wire_id)
    if role == "assistant":
        return [_convert_assistant(message, echo, wire_id)]
    if role == "system":
        content = joined_text(message.get("content", ()), message, sep="", image=_unsupported_image)
        return [{"role": "system", "content": content}]
    raise LlmError(
        f"message {message['id']} has role {role!r}, which Chat Completions cannot carry",
        code=UNSUPPORTED_CONTENT,
    )


def _convert_assistant(
    message: Message, echo: ReasoningEcho, wire_id: Callable[[str], str]
) -> JsonObject:
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[JsonObject] = []
    for block in message.get("content", ()):
        kind = block.get("type")
        if kind == BLOCK_TOOL_CALL:
            calls.append(
                {
                    "id": wire_id(block["id"]),
                    "type": "function",
                    "function": {"name": block["name"], "arguments": block["arguments"]},
                }
            )
        elif kind == BLOCK_TEXT:
            text.append(block["text"])
        elif kind == BLOCK_REASONING:
            reasoning.append(block["text"])
        elif kind == BLOCK_IMAGE:
            raise _unsupported_image(message)
    out: JsonObject = {"role": "assistant", "content": "".join(text)}
    if echo != "never" and (reasoning or echo == "always"):
        out["reasoning_content"] = "".join(reasoning)
    if calls:
        out["tool_calls"] = calls
    return out


def _convert_user(message: Message, wire_id: Callable[[str], str]) -> list[JsonObject]:
    # Tool messages first, then any text: keeps the pairing rule of
    # docs/providers.md#chat-completions-pairing even if a user message mixes text and tool results
    # (docs/providers.md#chat-completions-wire).
    blocks = message.get("content", ())
    if len(blocks) == 1 and (block := blocks[0]).get("type") == BLOCK_TOOL_RESULT:
        return [_tool_message(block, message, wire_id)]  # the common case, without the loop
    out: list[JsonObject] = []
    text: list[str] = []
    has_results = False
    for block in blocks:
        kind = block.get("type")
        if kind == BLOCK_TOOL_RESULT:
            has_results = True
            out.append(_tool_message(block, message, wire_id))
        elif kind == BLOCK_TEXT:
            text.append(block["text"])
        elif kind == BLOCK_IMAGE:
            raise _unsupported_image(message)
    if text or not has_results:
        out.append({"role": "user", "content": "".join(text)})
    return out


def _tool_message(block: Any, message: Message, wire_id: Callable[[str], str]) -> JsonObject:
    content = (
        joined_text(block.get("content", ()), message, sep="\n", image=_unsupported_image)
        or NO_OUTPUT
    )
    if block.get("isError") and not content.startswith("Error"):
        content = ERROR_PREFIX + content
    return {"role": "tool", "tool_call_id": wire_id(block["toolCallId"]), "content": content}


def _unsupported_image(message: Message) -> LlmError:
    return LlmError(
        f"message {message['id']} holds an image; the Chat Completions adapters send text "
        "only; remove the image or use a provider that accepts images",
        code=UNSUPPORTED_CONTENT,
    )
