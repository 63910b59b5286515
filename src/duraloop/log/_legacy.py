"""What a read accepts: legacy import, then the vocabulary refusal (1.5).

See docs/store.md#legacy-import.

Every store read path (load, inspect, read, list, the claim comparison) and `read_log_file`
pass the stored events through `readable_events`. Storage is never rewritten: the import is
a pure function of the stored events and the session id, the same on every read, so a log
written partly by an older harness and partly by duraloop reads the same each time.

Legacy import, exactly as 6.7: `request/header-delta`, `mode/set` and a `request/header` with
reason `fallback` are refused; `turn/start {turn, trigger}` loses the trigger; old `turn/end`
reasons map to current ones (unknown kinds pass unchanged); `steering/message` becomes a
`user/message`; pre-identity `user/message`, `assistant/message` and `tool/result` get their
current shapes with deterministic ids `legacy-message:<sessionId>:<seq>`. Current-looking
but malformed events are not repaired here (a `Session` seed rejects them); a legacy shape
that is malformed is a `CorruptLogError` naming its seq.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from ..errors import CorruptLogError, EventRejectedError, SessionFormatUnsupportedError
from . import vocabulary as v
from ._event import Event
from ._validate import check_vocabulary

READABLE_EVENT_TYPES: Final = v.KNOWN_EVENT_TYPES
"""Types a read accepts without `ignorable: true`: dsh's vocabulary, which covers every
type duraloop writes."""

_IMPORTED_TYPES: Final = frozenset(
    {
        v.TURN_START,
        v.TURN_END,
        v.STEERING_MESSAGE,
        v.USER_MESSAGE,
        v.ASSISTANT_MESSAGE,
        v.TOOL_RESULT,
        v.REQUEST_HEADER,
        *v.LEGACY_REJECTED_TYPES,
    }
)
"""The only types the import may touch; every other event is returned as it is."""


def readable_events(events: list[Event], *, session_id: str, path: str | None) -> list[Event]:
    """Import legacy shapes, then refuse unknown types that are not marked ignorable.

    Args:
        events: the stored events, seq 0..n-1.
        session_id: the session's id (the header id), for legacy message ids and messages.
        path: the raw log file, or None for a backend without one.

    Returns:
        `events` itself when nothing is legacy, else a new list of the same length.

    Raises:
        SessionFormatUnsupportedError: for rejected legacy vocabulary, or an unknown event
            type without `ignorable: true` (docs/log.md#the-session-header, plus ` (raw log:
            <path>)`).
        CorruptLogError: if a legacy shape is malformed (the message names the seq).
    """
    imported, all_readable = _import(events, session_id=session_id, path=path)
    if not all_readable:  # the import's own pass saw a type to look at (one pass, not two)
        check_known_types(imported, session_id=session_id, path=path)
    return imported


def check_known_types(events: list[Event], *, session_id: str, path: str | None) -> None:
    """Refuse the first event of an unknown type that is not marked ignorable (spec 1.5).

    Raises:
        SessionFormatUnsupportedError: with the exact docs/log.md#the-session-header.
    """
    if {event.type for event in events} <= READABLE_EVENT_TYPES:
        return
    for event in events:
        if event.type not in READABLE_EVENT_TYPES and event.ignorable is not True:
            text = (
                f'session "{session_id}" contains event type "{event.type}" (seq {event.seq}) '
                "unknown to this harness and not marked ignorable; refusing to interpret the log "
                "— it was likely written by a newer harness"
            )
            raise SessionFormatUnsupportedError(_with_path(text, path))


def import_legacy(events: list[Event], *, session_id: str, path: str | None) -> list[Event]:
    """Return `events` with every legacy shape in its current form (docs/store.md#legacy-import).

    Args:
        events: the stored events, seq 0..n-1.
        session_id: the session's id, for `legacy-message:<sessionId>:<seq>` ids.
        path: the raw log file, for messages.

    Returns:
        `events` itself when nothing changed, else a copy with the imported events replaced.

    Raises:
        SessionFormatUnsupportedError: for `request/header-delta`, `mode/set` or a
            `request/header` with reason `fallback`.
        CorruptLogError: if a legacy shape is malformed.
    """
    return _import(events, session_id=session_id, path=path)[0]


def _import(events: list[Event], *, session_id: str, path: str | None) -> tuple[list[Event], bool]:
    """`import_legacy`, also returning whether every stored type is readable as it is."""
    imported: list[Event] | None = None
    all_readable = True
    for index, event in enumerate(events):
        kind = event.type
        if kind not in READABLE_EVENT_TYPES:
            all_readable = False
        if kind not in _IMPORTED_TYPES:
            continue
        try:
            check_vocabulary(event)
        except EventRejectedError as exc:
            raise SessionFormatUnsupportedError(
                _with_path(f'session "{session_id}": {exc}', path)
            ) from exc
        data = event.data
        if not isinstance(data, dict):
            continue
        try:
            current = _IMPORTERS[kind](event, data, imported or events, session_id)
        except _MalformedError as exc:
            raise CorruptLogError(
                f"malformed legacy {kind} at seq {event.seq}: {exc}", path=path
            ) from exc
        if current is not event:
            all_readable = False  # an imported event has a new type: look at it again
            if imported is None:
                imported = list(events)
            imported[index] = current
    return (events if imported is None else imported), all_readable


class _MalformedError(Exception):
    """A legacy shape that cannot be imported; becomes a CorruptLogError naming the seq."""


def _unchanged(event: Event, data: dict[str, Any], events: list[Event], session_id: str) -> Event:
    return event


def _turn_start(event: Event, data: dict[str, Any], events: list[Event], session_id: str) -> Event:
    if "trigger" not in data:
        return event
    turn, trigger = data.get("turn"), data["trigger"]
    if data.keys() != {"turn", "trigger"}:
        raise _MalformedError(f"expected exactly the keys turn and trigger, got {sorted(data)}")
    if type(turn) is not int or turn < 1:
        raise _MalformedError(f"turn must be an integer >= 1, got {turn!r}")
    if not isinstance(trigger, dict) or not _nonempty(trigger.get("kind")):
        raise _MalformedError(f"trigger must be an object with a non-empty kind, got {trigger!r}")
    return msgspec.structs.replace(event, data={"turn": turn})


def _turn_end(event: Event, data: dict[str, Any], events: list[Event], session_id: str) -> Event:
    reason = data.get("reason")
    if not isinstance(reason, dict):
        return event
    kind = reason.get("kind")
    if kind == v.REASON_ABORTED and "reason" not in reason:
        current = _exact_kind(
            reason, {"kind": v.REASON_ABORTED, "reason": {"kind": v.LEGACY_ABORT_CAUSE}}
        )
    elif kind == v.DISPOSED:
        current = _exact_kind(reason, {"kind": v.REASON_ABORTED, "reason": {"kind": v.DISPOSED}})
    elif kind == v.REASON_ERROR and "error" not in reason:
        current = {"kind": v.REASON_ERROR, "error": _legacy_failure(reason)}
    else:
        return event  # a current kind, or an unknown one: preserved unchanged
    return msgspec.structs.replace(event, data={**data, "reason": current})


def _exact_kind(reason: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    if reason.keys() != {"kind"}:
        raise _MalformedError(f"reason {reason['kind']!r} carries unexpected keys {sorted(reason)}")
    return current


def _legacy_failure(reason: dict[str, Any]) -> dict[str, Any]:
    """Return the `LlmFailure` of an old `{kind: error, step, failure | message, code?}`."""
    keys = reason.keys()
    if keys == {"kind", "step", "failure"}:
        failure = reason["failure"]
        if (
            not isinstance(failure, dict)
            or not isinstance(failure.get("message"), str)
            or not isinstance(failure.get("code"), str)
        ):
            raise _MalformedError(
                f"failure must be an object with message and code, got {failure!r}"
            )
        return failure
    if keys in ({"kind", "step", "message"}, {"kind", "step", "message", "code"}):
        message, code = reason["message"], reason.get("code", v.UNKNOWN)
        if not isinstance(message, str) or not isinstance(code, str):
            raise _MalformedError(f"message and code must be strings, got {message!r} and {code!r}")
        return {"message": message, "code": code}
    raise _MalformedError(f"error reason has keys {sorted(keys)}, not a known legacy shape")


def _steering_message(
    event: Event, data: dict[str, Any], events: list[Event], session_id: str
) -> Event:
    if data.keys() == {"turn", "message"}:
        message = data["message"]
        if not isinstance(message, dict):
            raise _MalformedError(f"message must be an object, got {message!r}")
    elif data.keys() == {"turn", "content", "source"}:
        message = {
            "content": data["content"],
            "source": data["source"],
            "id": _legacy_id(session_id, event.seq),
            "role": "user",
        }
    else:
        raise _MalformedError(
            f"expected keys turn and message, or turn, content and source, got {sorted(data)}"
        )
    surface_op = v.SURFACE_APPEND if event.surface_op is None else event.surface_op
    return msgspec.structs.replace(event, type=v.USER_MESSAGE, data=message, surface_op=surface_op)


def _user_message(
    event: Event, data: dict[str, Any], events: list[Event], session_id: str
) -> Event:
    if not {"id", "role", "message"}.isdisjoint(data) or not {"content", "source"} <= data.keys():
        return event  # current (or current-looking and malformed: the seed check rejects it)
    return msgspec.structs.replace(
        event, data={**data, "id": _legacy_id(session_id, event.seq), "role": "user"}
    )


def _assistant_message(
    event: Event, data: dict[str, Any], events: list[Event], session_id: str
) -> Event:
    if "message" in data or "provenance" not in data:
        return event
    content, provenance = data.get("content"), data["provenance"]
    if not isinstance(content, list):
        raise _MalformedError(f"content must be an array, got {content!r}")
    if not isinstance(provenance, dict):
        raise _MalformedError(f"provenance must be an object, got {provenance!r}")
    rest = {key: value for key, value in data.items() if key not in ("content", "provenance")}
    message = {
        "id": _legacy_id(session_id, event.seq),
        "role": "assistant",
        "content": content,
        "source": {**provenance, "kind": "model"},
    }
    return msgspec.structs.replace(event, data={**rest, "message": message})


def _tool_result(event: Event, data: dict[str, Any], events: list[Event], session_id: str) -> Event:
    if "message" in data or "callId" not in data:
        return event
    call_id, content = data["callId"], data.get("content")
    if not _nonempty(call_id):
        raise _MalformedError(f"callId must be a non-empty string, got {call_id!r}")
    if not isinstance(content, list):
        raise _MalformedError(f"content must be an array, got {content!r}")
    block: dict[str, Any] = {"type": v.BLOCK_TOOL_RESULT, "toolCallId": call_id, "content": content}
    if "isError" in data:
        block["isError"] = data["isError"]
    rest = {
        key: value for key, value in data.items() if key not in ("callId", "content", "isError")
    }
    message = {
        "id": _replaced_id(event, events) or _legacy_id(session_id, event.seq),
        "role": "user",
        "content": [block],
        "source": {"kind": "tool", "callId": call_id},
    }
    return msgspec.structs.replace(event, data={**rest, "message": message})


def _replaced_id(event: Event, events: list[Event]) -> str | None:
    """Return the (imported) message id of a replace event's target `surfaceOp.start`."""
    op = event.surface_op
    start = op.get("start") if isinstance(op, dict) and op.get("op") == "replace" else None
    if type(start) is not int or not 0 <= start < event.seq or start >= len(events):
        return None  # not a replace, or an invalid one the seed check rejects
    target = events[start].data
    if not isinstance(target, dict):
        return None
    message = target if events[start].type == v.USER_MESSAGE else target.get("message")
    message_id = message.get("id") if isinstance(message, dict) else None
    return message_id if _nonempty(message_id) else None


_IMPORTERS: Final = {
    v.TURN_START: _turn_start,
    v.TURN_END: _turn_end,
    v.STEERING_MESSAGE: _steering_message,
    v.USER_MESSAGE: _user_message,
    v.ASSISTANT_MESSAGE: _assistant_message,
    v.TOOL_RESULT: _tool_result,
    v.REQUEST_HEADER: _unchanged,
    **dict.fromkeys(v.LEGACY_REJECTED_TYPES, _unchanged),
}


def _legacy_id(session_id: str, seq: int) -> str:
    return f"{v.LEGACY_MESSAGE_ID_PREFIX}{session_id}:{seq}"


def _nonempty(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def _with_path(text: str, path: str | None) -> str:
    return text if path is None else f"{text} (raw log: {path})"
