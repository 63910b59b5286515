"""Packed chunk rows (docs/store.md#jsonl-records, case 65): which runs pack, and exact round trips.

The typed row decoder (the load's fast path) must build exactly what the strict dict decoder
builds and must leave every malformed row to it, so its messages stay the strict ones.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duraloop.log import Event
from duraloop.store._codec._packing import MalformedRowError, decode_row_line, unpack_row
from duraloop.store._codec._records import RecordError, decode_record, encode_batch, encode_header
from duraloop.store._jsonl._scan import scan_log

from ._builders import ev, meta, se, ss, te, text_chunk, ts


def rows(events: list[Event], *, pack: bool = True) -> list[dict[str, Any]]:
    return [
        msgspec.json.decode(line) for line in encode_batch(events, pack_chunks=pack).splitlines()
    ]


def decoded(events: list[Event], *, pack: bool = True) -> list[Event]:
    data = encode_batch(events, pack_chunks=pack)
    return [event for line in data.splitlines() for event in decode_record(line)]


def five_chunk_turn() -> list[Event]:
    chunks = [text_chunk(2 + k, 10 + k, f"t{k}") for k in range(5)]
    return [
        ts(0, 1),
        ss(1, 1, 1),
        *chunks,
        ev("assistant/message", 7, 20, {"x": 1}, op="append"),
        se(8, 1, 1),
        te(9, 1),
    ]


def test_case_65_five_text_deltas_pack_into_one_row() -> None:
    events = five_chunk_turn()
    assert [row["type"] for row in rows(events)] == [
        "turn/start",
        "step/start",
        "text-chunks",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    row = rows(events)[2]
    assert row == {
        "type": "text-chunks",
        "seq0": 2,
        "time0": 10,
        "data": {
            "turn": 1,
            "step": 1,
            "index": 0,
            "dt": [1, 1, 1, 1],
            "texts": ["t0", "t1", "t2", "t3", "t4"],
        },
    }
    assert decoded(events) == events


def test_case_65_pack_chunks_false_writes_verbatim_lines() -> None:
    events = five_chunk_turn()
    assert [row["type"] for row in rows(events, pack=False)].count("assistant/chunk") == 5
    assert decoded(events, pack=False) == events


def tool_delta(
    seq: int, time: int, args: str, *, call_id: str = "c", name: str | None = "bash"
) -> Event:
    chunk: dict[str, Any] = {"type": "tool-call-delta", "index": 1, "id": call_id}
    if name is not None:
        chunk["name"] = name
    chunk["argumentsDelta"] = args
    return ev("assistant/chunk", seq, time, {"turn": 1, "step": 1, "chunk": chunk})


def test_case_65_tool_call_and_reasoning_runs_pack_and_round_trip() -> None:
    reasoning = [
        ev(
            "assistant/chunk",
            k,
            100 - k,
            {
                "turn": 1,
                "step": 1,
                "chunk": {"type": "reasoning-delta", "index": 0, "text": str(k)},
            },
        )
        for k in range(3)
    ]
    tools = [tool_delta(3 + k, 5, "{}"[: k % 2]) for k in range(4)]
    events = reasoning + tools
    assert [row["type"] for row in rows(events)] == ["reasoning-chunks", "tool-call-chunks"]
    assert rows(events)[0]["data"]["dt"] == [-1, -1], "negative gaps round-trip"
    assert decoded(events) == events


@pytest.mark.parametrize(
    "events",
    [
        [text_chunk(0, 0, "a"), text_chunk(1, 0, "b")],
        [text_chunk(0, 0, "a"), text_chunk(1, 0, "b"), text_chunk(3, 0, "c")],
        [text_chunk(0, 0, "a"), text_chunk(1, 0, "b"), text_chunk(2, 0, "c", index=1)],
        [text_chunk(0, 0, "a"), text_chunk(1, 0, "b"), text_chunk(2, 0, "c", step=2)],
        [tool_delta(0, 0, "a"), tool_delta(1, 0, "b"), tool_delta(2, 0, "c", call_id="d")],
        [tool_delta(0, 0, "a"), tool_delta(1, 0, "b"), tool_delta(2, 0, "c", name=None)],
        [
            text_chunk(0, 0, "a"),
            text_chunk(1, 0, "b"),
            ev(
                "assistant/chunk",
                2,
                0,
                {
                    "turn": 1,
                    "step": 1,
                    "chunk": {"type": "text-delta", "index": 0, "text": "c", "extra": 1},
                },
            ),
        ],
        [text_chunk(0, 0, "a"), text_chunk(1, -(2**53 - 1), "b"), text_chunk(2, 2**53 - 1, "c")],
    ],
    ids=[
        "short-run",
        "seq-gap",
        "index-switch",
        "step-switch",
        "call-id-change",
        "name-presence",
        "off-whitelist",
        "unsafe-gap",
    ],
)
def test_case_65_ineligible_runs_stay_verbatim(events: list[Event]) -> None:
    assert not [row for row in rows(events) if row["type"].endswith("-chunks")]
    assert decoded(events) == events


def test_case_65_short_run_stays_verbatim_exactly() -> None:
    assert [row["type"] for row in rows([text_chunk(0, 0, "a"), text_chunk(1, 0, "b")])] == [
        "assistant/chunk"
    ] * 2


def test_case_65_mixed_layout_loads_identically() -> None:
    events = five_chunk_turn()
    packed = encode_batch(events[:5], pack_chunks=True) + encode_batch(
        events[5:], pack_chunks=False
    )
    assert [e for line in packed.splitlines() for e in decode_record(line)] == events


@pytest.mark.parametrize(
    ("row", "detail"),
    [
        (
            {
                "type": "text-chunks",
                "seq0": -1,
                "time0": 0,
                "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": ["a"]},
            },
            "seq0",
        ),
        (
            {
                "type": "text-chunks",
                "seq0": 0,
                "time0": 0.5,
                "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": ["a"]},
            },
            "time0",
        ),
        (
            {
                "type": "text-chunks",
                "seq0": 0,
                "time0": 0,
                "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": []},
            },
            "non-empty",
        ),
        (
            {
                "type": "text-chunks",
                "seq0": 0,
                "time0": 0,
                "data": {"turn": 1, "step": 1, "index": 0, "dt": [1, 2], "texts": ["a", "b"]},
            },
            "dt",
        ),
        ({"type": "text-chunks", "seq0": 0, "time0": 0, "extra": 1, "data": {}}, "keys"),
        (
            {
                "type": "tool-call-chunks",
                "seq0": 0,
                "time0": 0,
                "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "args": ["a"]},
            },
            "data keys",
        ),
    ],
)
def test_malformed_rows_are_rejected_strictly(row: dict[str, Any], detail: str) -> None:
    with pytest.raises(ValueError, match=f"malformed {row['type']} storage row: .*{detail}"):
        unpack_row(row)


WELL_FORMED_ROWS = [
    {
        "type": "text-chunks",
        "seq0": 2,
        "time0": 10,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [1, -3], "texts": ["a", "", "c"]},
    },
    {
        "type": "reasoning-chunks",
        "seq0": 0,
        "time0": -5,
        "data": {"turn": 2, "step": 3, "index": 1, "dt": [], "texts": ["only"]},
    },
    {
        "type": "tool-call-chunks",
        "seq0": 7,
        "time0": 0,
        "data": {
            "turn": 1,
            "step": 1,
            "index": 2,
            "dt": [0, 0],
            "id": "c",
            "name": "bash",
            "args": ["{", "}", ""],
        },
    },
    {
        "type": "tool-call-chunks",
        "seq0": 7,
        "time0": 0,
        "data": {"turn": 1, "step": 1, "index": 2, "dt": [0], "id": "c", "args": ["{", "}"]},
    },
    {
        "type": "text-chunks",
        "seq0": 2**53 - 3,
        "time0": 2**53 - 3,
        "data": {"turn": 1.5, "step": "x", "index": None, "dt": [1, 1], "texts": ["a", "b", "c"]},
    },
]


@pytest.mark.parametrize("row", WELL_FORMED_ROWS)
def test_typed_row_decoder_builds_exactly_what_the_strict_decoder_builds(
    row: dict[str, Any],
) -> None:
    line = msgspec.json.encode(row)
    members = decode_row_line(line)
    assert members is not None
    assert members == unpack_row(msgspec.json.decode(line))
    assert [msgspec.json.encode(e.data) for e in members] == [
        msgspec.json.encode(e.data) for e in unpack_row(msgspec.json.decode(line))
    ], "chunk keys in the same order"


MALFORMED_ROWS = [
    {
        "type": "text-chunks",
        "seq0": -1,
        "time0": 0,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": ["a"]},
    },
    {
        "type": "text-chunks",
        "seq0": 0,
        "time0": 2**53,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": ["a"]},
    },
    {
        "type": "text-chunks",
        "seq0": 2**53 - 1,
        "time0": 0,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [0], "texts": ["a", "b"]},
    },
    {
        "type": "text-chunks",
        "seq0": 0,
        "time0": 2**53 - 1,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [1], "texts": ["a", "b"]},
    },
    {
        "type": "text-chunks",
        "seq0": 0,
        "time0": 0,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [2**53], "texts": ["a", "b"]},
    },
    {
        "type": "text-chunks",
        "seq0": 0,
        "time0": 0,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [1.0], "texts": ["a", "b"]},
    },
    {
        "type": "text-chunks",
        "seq0": 0,
        "time0": 0,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [True], "texts": ["a", "b"]},
    },
    {
        "type": "text-chunks",
        "seq0": 0,
        "time0": 0,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": []},
    },
    {
        "type": "text-chunks",
        "seq0": 0,
        "time0": 0,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": [1]},
    },
    {
        "type": "text-chunks",
        "seq0": 0,
        "time0": 0,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": ["a"], "name": "x"},
    },
    {
        "type": "tool-call-chunks",
        "seq0": 0,
        "time0": 0,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "id": 5, "args": ["a"]},
    },
    {
        "type": "tool-call-chunks",
        "seq0": 0,
        "time0": 0,
        "data": {
            "turn": 1,
            "step": 1,
            "index": 0,
            "dt": [],
            "id": "c",
            "name": None,
            "args": ["a"],
        },
    },
    {
        "type": "reasoning-chunks",
        "seq0": 0,
        "time0": 0,
        "data": {"turn": 1, "step": 1, "dt": [], "texts": ["a"]},
    },
    {"type": "text-chunks", "seq0": 0, "time0": 0, "data": []},
    {
        "type": "text-chunks",
        "seq0": 0,
        "time0": 0,
        "extra": 1,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": ["a"]},
    },
    {
        "type": "text-chunks",
        "seq0": 2**64,
        "time0": 0,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": ["a"]},
    },
]


@pytest.mark.parametrize("row", MALFORMED_ROWS)
def test_typed_row_decoder_leaves_every_malformed_row_to_the_strict_decoder(
    row: dict[str, Any],
) -> None:
    line = msgspec.json.encode(row)
    assert decode_row_line(line) is None
    with pytest.raises(MalformedRowError) as strict:
        unpack_row(msgspec.json.decode(line))
    with pytest.raises(RecordError) as via_record:
        decode_record(line)
    assert str(via_record.value) == str(strict.value)


chunk_kinds = st.sampled_from(
    ["text-delta", "reasoning-delta", "tool-call-delta", "tool-call-delta-unnamed"]
)


@st.composite
def chunk_runs(draw: st.DrawFn) -> list[Event]:
    events: list[Event] = []
    time = draw(st.integers(-(2**53 - 1), 2**53 - 1))
    for seq in range(draw(st.integers(0, 12))):
        kind = draw(chunk_kinds)
        index = draw(st.integers(0, 1))
        text = draw(st.text(max_size=3))
        step_gap = draw(st.integers(-3, 3))
        time = max(-(2**53 - 1), min(2**53 - 1, time + step_gap))
        if kind.startswith("tool-call-delta"):
            chunk: dict[str, Any] = {"type": "tool-call-delta", "index": index, "id": "c"}
            if kind == "tool-call-delta":
                chunk["name"] = "bash"
            chunk["argumentsDelta"] = text
        else:
            chunk = {"type": kind, "index": index, "text": text}
        events.append(ev("assistant/chunk", seq, time, {"turn": 1, "step": 1, "chunk": chunk}))
    return events


@settings(max_examples=200, deadline=None)
@given(chunk_runs())
def test_packed_batches_decode_back_to_the_same_events(events: list[Event]) -> None:
    data = encode_batch(events, pack_chunks=True)
    assert [e for line in data.splitlines() for e in decode_record(line)] == events
    header = encode_header(meta("s"))
    assert scan_log(header + data, path="p").events == events
