"""The event envelope codec: dsh key names on disk, unknown types kept as opaque JSON.

duraloop and dsh read each other's logs (docs/architecture.md), so an event must decode and
re-encode without loss: known fields under dsh's camelCase names, absent optional keys
omitted, and an unknown event type's nested data byte-identical after a round trip.
"""

from __future__ import annotations

import pytest

from duraloop.errors import EventRejectedError
from duraloop.log import Event, decode_event, encode_event, encode_events_lines, event_to_json


def test_surface_event_uses_dsh_key_names() -> None:
    event = Event("tool/result", 5, 1700000000000, {"turn": 1}, [4], "append")
    assert event_to_json(event) == {
        "type": "tool/result",
        "seq": 5,
        "time": 1700000000000,
        "data": {"turn": 1},
        "sourceEventSeqs": [4],
        "surfaceOp": "append",
    }
    assert encode_event(event) == (
        b'{"type":"tool/result","seq":5,"time":1700000000000,"data":{"turn":1},'
        b'"sourceEventSeqs":[4],"surfaceOp":"append"}'
    )


def test_log_only_event_omits_surface_keys() -> None:
    encoded = encode_event(Event("turn/start", 0, 1, {"turn": 1}))
    assert encoded == b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}'


def test_null_data_is_kept() -> None:
    event = decode_event(b'{"type":"vendor/x","seq":0,"time":1,"data":null}')
    assert event.data is None
    assert encode_event(event) == b'{"type":"vendor/x","seq":0,"time":1,"data":null}'


@pytest.mark.parametrize(
    "raw",
    [
        b'{"type":"vendor/plugin-thing","seq":3,"time":1712345678901,"data":{"z":1,"a":[1,2.5,'
        b'{"deep":{"list":[null,true,false,"text \xe2\x9c\x93",-7,1.0,0.001]}}],"empty":{}}}',
        b'{"type":"unknown/type","seq":0,"time":-5,"data":[["nested"],{"k":{"k":{"k":0}}}],'
        b'"ignorable":true}',
        b'{"type":"tool/result","seq":9,"time":2,"data":{"message":{"id":"x","meta":{"b":1,'
        b'"a":2}}},'
        b'"sourceEventSeqs":[1,8],"surfaceOp":{"op":"replace","start":8,"end":1}}',
    ],
)
def test_round_trip_is_byte_identical(raw: bytes) -> None:
    assert encode_event(decode_event(raw)) == raw


def test_decoded_unknown_type_keeps_data_as_plain_json() -> None:
    event = decode_event(b'{"type":"a/b","seq":0,"time":0,"data":{"x":[{"y":1}]}}')
    assert event.data == {"x": [{"y": 1}]}
    assert type(event.data["x"][0]) is dict


def test_encode_events_lines_writes_one_line_per_event() -> None:
    events = [Event("x/a", 0, 1, {}), Event("x/b", 1, 2, {"k": "v"})]
    lines = encode_events_lines(events)
    assert lines.endswith(b"\n")
    assert [decode_event(line) for line in lines.splitlines()] == events


@pytest.mark.parametrize(
    "raw",
    [
        b'{"type":"x","seq":9007199254740992,"time":0,"data":{}}',
        b'{"type":"x","seq":0,"time":9007199254740992,"data":{}}',
        b'{"type":"x","seq":true,"time":0,"data":{}}',
        b'["type","x"]',
    ],
)
def test_decode_rejects_unsafe_or_malformed_envelopes(raw: bytes) -> None:
    with pytest.raises(EventRejectedError, match="invalid event envelope"):
        decode_event(raw)


@pytest.mark.parametrize("raw", [b'{"type":"x","seq":0,"time":0,"data":{}', b"", b"\xff", "nope"])
def test_decode_rejects_text_that_is_not_json_with_a_typed_error(raw: bytes | str) -> None:
    # Law 9 / style rule D14: a codec error becomes a duraloop error, never a bare msgspec one.
    with pytest.raises(EventRejectedError, match="not valid JSON"):
        decode_event(raw)


def test_events_are_frozen() -> None:
    event = Event("x/a", 0, 1, {})
    with pytest.raises(AttributeError):
        event.type = "x/b"  # type: ignore[misc]
