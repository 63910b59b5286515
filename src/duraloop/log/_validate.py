"""Seed and load validation: legacy vocabulary and message shapes (session-spec 5.1, 6.7)."""

from __future__ import annotations

from typing import Any

from ..errors import EventRejectedError
from ._event import Event
from ._vocabulary import (
    ASSISTANT_MESSAGE,
    LEGACY_REJECTED_TYPES,
    REQUEST_HEADER,
    TOOL_RESULT,
    USER_MESSAGE,
)


def check_vocabulary(event: Event) -> None:
    """Reject legacy vocabulary that must not be silently accepted (session-spec 2.4).

    Raises:
        EventRejectedError: for `request/header-delta`, `mode/set`, or a `request/header`
            with reason `fallback`.
    """
    if event.type in LEGACY_REJECTED_TYPES:
        raise EventRejectedError(f'legacy event type "{event.type}" at seq {event.seq} is not supported')
    if event.type == REQUEST_HEADER and isinstance(event.data, dict):
        if event.data.get("reason") == "fallback":
            raise EventRejectedError(f"legacy request/header reason fallback at seq {event.seq}")


def check_message_shape(event: Event) -> None:
    """Check the message shape of a seed's message event (session-spec 6.7, last paragraph).

    Raises:
        EventRejectedError: naming the seq and the missing or malformed field.
    """
    data = event.data
    if event.type == USER_MESSAGE:
        _check_message(event, data, role="user")
    elif event.type == ASSISTANT_MESSAGE:
        message = data.get("message") if isinstance(data, dict) else None
        if not isinstance(message, dict):
            raise EventRejectedError(f"assistant/message at seq {event.seq} lacks an identified message")
        _check_message(event, message, role="assistant")
        source = message["source"]
        if source.get("kind") != "model" or not _nonempty(source.get("provider")) or not _nonempty(
            source.get("model")
        ):
            raise EventRejectedError(
                f"assistant/message at seq {event.seq} needs source kind model with provider/model"
            )
    elif event.type == TOOL_RESULT:
        message = data.get("message") if isinstance(data, dict) else None
        if not isinstance(message, dict):
            raise EventRejectedError(f"tool/result at seq {event.seq} lacks an identified message")
        _check_message(event, message, role="user")
        call_id = message["source"].get("callId")
        content = message["content"]
        if message["source"].get("kind") != "tool" or not _nonempty(call_id):
            raise EventRejectedError(f"tool/result at seq {event.seq} needs source kind tool with a callId")
        if (
            len(content) != 1
            or not isinstance(content[0], dict)
            or content[0].get("type") != "tool-result"
            or content[0].get("toolCallId") != call_id
            or not isinstance(content[0].get("content"), list)
        ):
            raise EventRejectedError(
                f"tool/result at seq {event.seq} must hold exactly one tool-result block for {call_id!r}"
            )
    elif event.type == REQUEST_HEADER:
        header = data.get("header") if isinstance(data, dict) else None
        config = header.get("config") if isinstance(header, dict) else None
        if not isinstance(config, dict) or not _nonempty(config.get("provider")) or not _nonempty(
            config.get("model")
        ):
            raise EventRejectedError(f"request/header at seq {event.seq} lacks provider/model")


def _check_message(event: Event, message: Any, *, role: str) -> None:
    if not isinstance(message, dict) or not _nonempty(message.get("id")):
        raise EventRejectedError(f"{event.type} at seq {event.seq} lacks an identified message")
    if message.get("role") != role:
        raise EventRejectedError(f"{event.type} at seq {event.seq} must have role {role!r}")
    source = message.get("source")
    if not isinstance(source, dict) or not _nonempty(source.get("kind")):
        raise EventRejectedError(f"{event.type} at seq {event.seq} needs a source with a kind")
    if not isinstance(message.get("content"), list):
        raise EventRejectedError(f"{event.type} at seq {event.seq} needs a content array")


def _nonempty(value: object) -> bool:
    return isinstance(value, str) and bool(value)
