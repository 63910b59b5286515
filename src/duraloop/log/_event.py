"""The event envelope (docs/log.md#events) and its strict JSON codec.

An `Event` is immutable: `type`, `seq` (its index in the log), `time` (epoch milliseconds),
`data` (the type's JSON payload), and on surface types `surface_op` (`"append"` or
`{"op": "replace", "start": int, "end": int}`) and optional `source_event_seqs`. On disk the
keys are dsh's: `type, seq, time, data, sourceEventSeqs, surfaceOp, ignorable`.
Unknown event types are kept as they are: `data` is opaque JSON that round-trips unchanged.
"""

from __future__ import annotations

import time as _time
from typing import Any, Literal

import msgspec

from ..errors import EventRejectedError
from ._json import JsonValue, is_safe_int


class Event(
    msgspec.Struct,
    frozen=True,
    omit_defaults=True,
    forbid_unknown_fields=True,
    gc=False,
    rename={"source_event_seqs": "sourceEventSeqs", "surface_op": "surfaceOp"},
):
    """One log entry (docs/log.md#events).

    Args:
        type: the slash-namespaced event type, e.g. `tool/call`.
        seq: the 0-based position in the log.
        time: epoch milliseconds at append.
        data: the JSON payload; treat it as immutable.
        source_event_seqs: seqs of earlier events this surface event cites, or None.
        surface_op: `"append"`, a replace dict, or None on non-surface types.
        ignorable: True marks an unknown type a reader may keep without interpreting.
    """

    type: str
    seq: int
    time: int
    data: JsonValue
    source_event_seqs: list[int] | None = None
    surface_op: Any = None
    ignorable: Literal[True] | None = None


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Event)


def encode_event(event: Event) -> bytes:
    """Encode one event as compact UTF-8 JSON (no trailing newline)."""
    return _encoder.encode(event)


def encode_events_lines(events: list[Event]) -> bytes:
    """Encode events as JSONL: one line per event, each ending in a newline."""
    buffer = bytearray()
    for event in events:
        _encoder.encode_into(event, buffer, len(buffer))
        buffer += b"\n"
    return bytes(buffer)


def decode_event(raw: bytes | str) -> Event:
    """Decode and envelope-check one event.

    Raises:
        EventRejectedError: "invalid event envelope" when a key is extra or missing, a type is
            wrong, or `seq`/`time` are out of range; "event is not valid JSON" when `raw`
            does not parse.
    """
    try:
        event = _decoder.decode(raw)
    except msgspec.ValidationError as exc:
        raise EventRejectedError(f"invalid event envelope: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise EventRejectedError(f"event is not valid JSON: {exc}") from exc
    check_envelope(event)
    return event


def check_envelope(event: Event) -> None:
    """Check `seq` is a non-negative safe integer and `time` a safe integer.

    Raises:
        EventRejectedError: naming the bad field and its value.
    """
    if not is_safe_int(event.seq):
        raise EventRejectedError(f"invalid event envelope: seq {event.seq!r} is not a safe integer")
    if type(event.time) is not int or abs(event.time) > 2**53 - 1:
        raise EventRejectedError(
            f"invalid event envelope: time {event.time!r} is not a safe integer"
        )


def event_to_json(event: Event) -> dict[str, Any]:
    """Return the event as the JSON object written to disk (dsh key names)."""
    return msgspec.json.decode(_encoder.encode(event))  # type: ignore[no-any-return]


def now_ms() -> int:
    """Return the current time as integer epoch milliseconds."""
    return _time.time_ns() // 1_000_000
