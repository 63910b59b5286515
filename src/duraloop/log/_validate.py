"""Seed and load validation: legacy vocabulary and payload shapes.

See docs/log.md#seeds-and-end-seed, docs/store.md#legacy-import.

The shapes checked are the ones the adapters and the loop read without a fallback: every
content block is an object with a string `type`; a known block type has its required fields
with their types (docs/log.md#messages-and-content-blocks); a `tool/result` block has a boolean
`isError` (dsh's `createToolResultMessage` always writes one); a `turn/end` has a `reason` with a
string `kind`, and a known kind its required fields (docs/log.md#event-types). Unknown block types,
unknown reason kinds and extra keys are tolerated (merge-extensible).
"""

from __future__ import annotations

from typing import Any

from ..errors import EventRejectedError
from ._event import Event
from ._messages import result_call_id
from .vocabulary import (
    ASSISTANT_MESSAGE,
    BLOCK_TOOL_CALL,
    BLOCK_TOOL_RESULT,
    LEGACY_REJECTED_TYPES,
    REASON_ABORTED,
    REASON_ERROR,
    REQUEST_HEADER,
    TOOL_RESULT,
    TURN_END,
    USER_MESSAGE,
)


def check_vocabulary(event: Event) -> None:
    """Reject legacy vocabulary that must not be silently accepted (docs/log.md#request-headers).

    Raises:
        EventRejectedError: for `request/header-delta`, `mode/set`, or a `request/header`
            with reason `fallback`.
    """
    if event.type in LEGACY_REJECTED_TYPES:
        raise EventRejectedError(
            f'legacy event type "{event.type}" at seq {event.seq} is not supported'
        )
    if event.type == REQUEST_HEADER and isinstance(event.data, dict):
        if event.data.get("reason") == "fallback":
            raise EventRejectedError(f"legacy request/header reason fallback at seq {event.seq}")


def check_message_shape(event: Event) -> None:
    """Check the payload shape of a seed's event (docs/store.md#legacy-import, last paragraph).

    Message events get their message and content blocks checked, `turn/end` its reason and
    `request/header` its provider/model; other events are left to the surface and invariant
    checks.

    Raises:
        EventRejectedError: naming the seq and the missing or malformed field.
    """
    data = event.data
    if event.type == USER_MESSAGE:
        _check_message(event, data, role="user")
    elif event.type == ASSISTANT_MESSAGE:
        message = data.get("message") if isinstance(data, dict) else None
        if not isinstance(message, dict):
            raise EventRejectedError(
                f"assistant/message at seq {event.seq} lacks an identified message"
            )
        _check_message(event, message, role="assistant")
        source = message["source"]
        if (
            source.get("kind") != "model"
            or not _nonempty(source.get("provider"))
            or not _nonempty(source.get("model"))
        ):
            raise EventRejectedError(
                f"assistant/message at seq {event.seq} needs source kind model with provider/model"
            )
    elif event.type == TOOL_RESULT:
        message = data.get("message") if isinstance(data, dict) else None
        if not isinstance(message, dict):
            raise EventRejectedError(f"tool/result at seq {event.seq} lacks an identified message")
        _check_message(event, message, role="user")
        call_id = result_call_id(message)
        content = message["content"]
        if message["source"].get("kind") != "tool" or not _nonempty(call_id):
            raise EventRejectedError(
                f"tool/result at seq {event.seq} needs source kind tool with a callId"
            )
        if (
            len(content) != 1
            or not isinstance(content[0], dict)
            or content[0].get("type") != BLOCK_TOOL_RESULT
            or content[0].get("toolCallId") != call_id
            or not isinstance(content[0].get("content"), list)
        ):
            raise EventRejectedError(
                f"tool/result at seq {event.seq} must hold exactly one tool-result block "
                f"for {call_id!r}"
            )
        if type(content[0].get("isError")) is not bool:
            raise EventRejectedError(
                f"tool/result at seq {event.seq}: its tool-result block needs a boolean isError"
            )
    elif event.type == TURN_END:
        _check_turn_end_reason(event)
    elif event.type == REQUEST_HEADER:
        header = data.get("header") if isinstance(data, dict) else None
        config = header.get("config") if isinstance(header, dict) else None
        if (
            not isinstance(config, dict)
            or not _nonempty(config.get("provider"))
            or not _nonempty(config.get("model"))
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
    content = message.get("content")
    if not isinstance(content, list):
        raise EventRejectedError(f"{event.type} at seq {event.seq} needs a content array")
    _check_blocks(event, content, "content")


# The fields a known content block type requires, with their types
# (docs/log.md#messages-and-content-blocks).
_BLOCK_FIELDS: dict[str, tuple[tuple[str, type, bool], ...]] = {
    # (field, type, must be non-empty)
    "text": (("text", str, False),),
    "reasoning": (("text", str, False),),
    BLOCK_TOOL_CALL: (("id", str, True), ("name", str, True), ("arguments", str, False)),
    BLOCK_TOOL_RESULT: (("toolCallId", str, True), ("content", list, False)),
    "image": (("attachment", dict, False),),
}


def _check_blocks(event: Event, blocks: list[Any], where: str) -> None:
    for index, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, dict) else None
        if type(kind) is not str:
            raise EventRejectedError(
                f"{event.type} at seq {event.seq}: {where}[{index}] must be an object with a "
                "string type"
            )
        for name, expected, nonempty in _BLOCK_FIELDS.get(kind, ()):
            value = block.get(name)
            if not isinstance(value, expected) or (nonempty and not value):
                raise EventRejectedError(
                    f"{event.type} at seq {event.seq}: {kind} block {where}[{index}] needs "
                    f"{name!r} as {_wanted(expected, nonempty=nonempty)}"
                )
        if kind == BLOCK_TOOL_RESULT:
            if "isError" in block and type(block["isError"]) is not bool:
                raise EventRejectedError(
                    f"{event.type} at seq {event.seq}: tool-result block {where}[{index}] has a "
                    "non-boolean isError"
                )
            _check_blocks(event, block["content"], f"{where}[{index}].content")


def _wanted(expected: type, *, nonempty: bool) -> str:
    if expected is str:
        return "a non-empty string" if nonempty else "a string"
    return "an array" if expected is list else "an object"


def _check_turn_end_reason(event: Event) -> None:
    data = event.data
    reason = data.get("reason") if isinstance(data, dict) else None
    if not isinstance(reason, dict) or not _nonempty(reason.get("kind")):
        raise EventRejectedError(
            f"turn/end at seq {event.seq} needs a reason object with a string kind"
        )
    kind = reason["kind"]
    if kind == REASON_ABORTED:
        cause = reason.get("reason")
        if not isinstance(cause, dict) or not _nonempty(cause.get("kind")):
            raise EventRejectedError(
                f"turn/end at seq {event.seq}: an aborted reason needs a reason object with a kind"
            )
    elif kind == REASON_ERROR:
        failure = reason.get("error")
        if (
            not isinstance(failure, dict)
            or not isinstance(failure.get("message"), str)
            or not (_nonempty(failure.get("code")))
        ):
            raise EventRejectedError(
                f"turn/end at seq {event.seq}: an error reason needs an error with message and code"
            )


def _nonempty(value: object) -> bool:
    return isinstance(value, str) and bool(value)
