"""The Message / ContentBlock / MessageSource vocabulary (docs/providers.md#messages).

Messages are plain JSON dicts, exactly as they sit in the log, so the log, derived history
and provider requests share one value without conversion. The TypedDicts below document
their shape for type checkers; readers must tolerate extra keys and unknown block types and
source kinds (they are merge-extensible).

There is no `tool` role: a tool result is a `user`-role message whose content is exactly one
`tool-result` block and whose source is `{"kind": "tool", "callId": ...}`.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypeAlias, TypedDict

from ._json import JsonObject
from .vocabulary import (
    ASSISTANT_MESSAGE,
    BLOCK_TEXT,
    BLOCK_TOOL_CALL,
    BLOCK_TOOL_RESULT,
    TOOL_RESULT,
    USER_MESSAGE,
)

if TYPE_CHECKING:
    from ._event import Event


class TextBlock(TypedDict):
    """Visible text: `{"type": "text", "text": str}`."""

    type: Literal["text"]
    text: str


class ReasoningBlock(TypedDict):
    """Model thinking, distinct from visible text: `{"type": "reasoning", "text": str}`."""

    type: Literal["reasoning"]
    text: str


class ToolCallBlock(TypedDict):
    """A tool call requested by the model; `arguments` is the raw JSON text, unparsed."""

    type: Literal["tool-call"]
    id: str
    name: str
    arguments: str


class ToolResultBlock(TypedDict):
    """The answer to one tool call; `content` holds nested blocks (usually text)."""

    type: Literal["tool-result"]
    toolCallId: str
    content: list[Any]
    isError: NotRequired[bool]


ContentBlock: TypeAlias = dict[str, Any]
"""Any content block: one of the TypedDicts above, or an unknown block kept as JSON."""


class Message(TypedDict):
    """One immutable message: `{id, role, content, source}` (extra keys tolerated)."""

    id: str
    role: Literal["user", "assistant", "system"]
    content: list[Any]
    source: JsonObject


USER_SOURCE: JsonObject = {"kind": "user"}


def new_message_id() -> str:
    """Return a fresh message id: a random version-4 UUID string (122 random bits)."""
    bits = (_random_bits(128) & _UUID4_CLEAR) | _UUID4_SET
    hexed = f"{bits:032x}"
    return f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:]}"


# The version (4) and variant (RFC 4122) bits of a UUID4, as in `uuid.uuid4()`; the random
# bits come from a `random.SystemRandom`-seeded generator, which is several times faster
# than `os.urandom` per id and still unpredictable enough for ids (not for secrets).
_UUID4_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_UUID4_SET = (0x4000 << 64) | (0x8000 << 48)
_random_bits = random.Random(uuid.uuid4().int).getrandbits


def user_message(content: str | list[Any], *, source: JsonObject | None = None) -> Message:
    """Build a user message.

    Args:
        content: plain text (becomes one text block) or a list of content blocks.
        source: the provenance; defaults to `{"kind": "user"}` (a human prompt).

    Returns:
        `{id, role: "user", content, source}` with a fresh id.
    """
    blocks = [{"type": BLOCK_TEXT, "text": content}] if isinstance(content, str) else list(content)
    return {
        "id": new_message_id(),
        "role": "user",
        "content": blocks,
        "source": dict(USER_SOURCE if source is None else source),
    }


def assistant_message(
    content: list[Any], *, provider: str, model: str, replay_state: Any = None
) -> Message:
    """Build an assistant message with a `{"kind": "model", provider, model}` source.

    Args:
        content: the assembled content blocks, in stream order.
        provider: the provider route, e.g. `openai`, `scripted`.
        model: the model id.
        replay_state: opaque adapter JSON kept for replay, or None.

    Returns:
        `{id, role: "assistant", content, source}` with a fresh id.
    """
    source: JsonObject = {"kind": "model", "provider": provider, "model": model}
    if replay_state is not None:
        source["replayState"] = replay_state
    return {"id": new_message_id(), "role": "assistant", "content": content, "source": source}


def tool_result_message(
    call_id: str, content: list[Any], *, is_error: bool, message_id: str | None = None
) -> Message:
    """Build the user-role message that answers tool call `call_id`.

    Args:
        call_id: the id of the tool-call block being answered.
        content: the result's content blocks (usually one text block).
        is_error: whether the call failed.
        message_id: the id to use; a fresh UUID when None.

    Returns:
        `{id, role: "user", content: [tool-result block], source: {kind: "tool", callId}}`.
    """
    return {
        "id": message_id or new_message_id(),
        "role": "user",
        "content": [
            {
                "type": BLOCK_TOOL_RESULT,
                "toolCallId": call_id,
                "content": content,
                "isError": is_error,
            }
        ],
        "source": {"kind": "tool", "callId": call_id},
    }


def result_call_id(message: object) -> Any:
    """Return the id of the call a tool-result message answers: its `source.callId`.

    The one reading of the id `tool_result_message` writes; every reader of a `tool/result`
    (the pending-call tracker, the invariants, the pairing check, the torn-tail rule) asks
    here.

    Args:
        message: a message as stored, or any JSON value (a malformed event's `message`).

    Returns:
        `message["source"]["callId"]` exactly as stored (any JSON value: callers that need
        a string check it), or None when the message or its source is not an object.
    """
    source = message.get("source") if isinstance(message, dict) else None
    return source.get("callId") if isinstance(source, dict) else None


def tool_calls_of(message: Mapping[str, Any]) -> list[ToolCallBlock]:
    """Return the tool-call blocks of an assistant message, in content (model) order."""
    return [block for block in message.get("content", ()) if block.get("type") == BLOCK_TOOL_CALL]


def text_of(message: Mapping[str, Any]) -> str:
    """Return the concatenated text blocks of a message (reasoning excluded)."""
    return "".join(
        b.get("text", "") for b in message.get("content", ()) if b.get("type") == BLOCK_TEXT
    )


def project(event: Event) -> Message | None:
    """Return the model-visible message of one surface event, or None.

    See docs/log.md#surface-and-derived-messages.
    """
    kind = event.type
    if kind == USER_MESSAGE:
        return event.data  # type: ignore[no-any-return]
    if kind == ASSISTANT_MESSAGE:
        message = event.data.get("message")
        return message if message and message.get("content") else None
    if kind == TOOL_RESULT:
        return event.data.get("message")  # type: ignore[no-any-return]
    return None
