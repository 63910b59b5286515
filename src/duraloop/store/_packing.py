"""Packed chunk rows: a storage encoding for runs of `assistant/chunk` events (session-spec 6.4).

A run of at least three consecutive eligible chunk events of one kind (same turn, step,
index, and for tool-call deltas the same id and name) is stored as one row
`{"type": "text-chunks" | "reasoning-chunks" | "tool-call-chunks", "seq0", "time0", "data"}`.
Decoding rebuilds the logical events exactly; it validates strictly and raises
`MalformedRowError` ("malformed <tag> storage row: ...") on any violation.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from duraloop.log import Event
from duraloop.log import vocabulary as v

TEXT_ROW = "text-chunks"
REASONING_ROW = "reasoning-chunks"
TOOL_CALL_ROW = "tool-call-chunks"
ROW_TYPES = frozenset({TEXT_ROW, REASONING_ROW, TOOL_CALL_ROW})
MIN_RUN_EVENTS = 3
_MAX_SAFE = 2**53 - 1
_ROW_OF_DELTA = {"text-delta": TEXT_ROW, "reasoning-delta": REASONING_ROW, "tool-call-delta": TOOL_CALL_ROW}
_DELTA_OF_ROW = {row: delta for delta, row in _ROW_OF_DELTA.items()}
_TEXT_KEYS = frozenset({"type", "index", "text"})
_TOOL_KEYS = frozenset({"type", "index", "id", "argumentsDelta"})
_ROW_KEYS = frozenset({"type", "seq0", "time0", "data"})


class MalformedRowError(ValueError):
    """Raised when a packed chunk row breaks the strict row shape."""


def _safe(value: object, *, signed: bool) -> bool:
    if type(value) is not int:
        return False
    return abs(value) <= _MAX_SAFE if signed else 0 <= value <= _MAX_SAFE


def _number(value: object) -> bool:
    return type(value) is int or type(value) is float


def _run_key(event: Event) -> tuple[Any, ...] | None:
    """Return what must stay equal along a run, or None if the event is not packable."""
    if (
        event.type != v.ASSISTANT_CHUNK
        or event.source_event_seqs is not None
        or event.surface_op is not None
        or event.ignorable is not None
    ):
        return None
    data = event.data
    if type(data) is not dict or len(data) != 3 or not {"turn", "step", "chunk"} <= data.keys():
        return None
    chunk = data["chunk"]
    if not _number(data["turn"]) or not _number(data["step"]) or type(chunk) is not dict:
        return None
    kind = chunk.get("type")
    if type(chunk.get("index")) is not int:
        return None
    if kind in ("text-delta", "reasoning-delta"):
        if chunk.keys() != _TEXT_KEYS or type(chunk["text"]) is not str:
            return None
        return (kind, data["turn"], data["step"], chunk["index"])
    if kind == "tool-call-delta":
        keys = chunk.keys() - {"name"}
        name = chunk.get("name", _ABSENT)
        if keys != _TOOL_KEYS or type(chunk["id"]) is not str or type(chunk["argumentsDelta"]) is not str:
            return None
        if name is not _ABSENT and type(name) is not str:
            return None
        return (kind, data["turn"], data["step"], chunk["index"], chunk["id"], name)
    return None


_ABSENT = object()


def pack_events(events: Sequence[Event]) -> Iterator[Event | dict[str, Any]]:
    """Yield each event verbatim, or a packed row dict in place of a run of >= 3 chunks.

    Args:
        events: one written batch, in seq order.

    Returns:
        An iterator of events to encode verbatim and row dicts to encode as JSON.
    """
    index = 0
    count = len(events)
    while index < count:
        key = _run_key(events[index])
        end = index + 1
        if key is not None:
            while end < count:
                prev, cur = events[end - 1], events[end]
                if cur.seq != prev.seq + 1 or not _safe(cur.time - prev.time, signed=True):
                    break
                if _run_key(cur) != key:
                    break
                end += 1
        if key is not None and end - index >= MIN_RUN_EVENTS:
            yield _row(events[index:end])
        else:
            yield from events[index:end]
        index = end


def _row(run: Sequence[Event]) -> dict[str, Any]:
    first = run[0]
    first_data = first.data
    chunk = first_data["chunk"]
    tag = _ROW_OF_DELTA[chunk["type"]]
    dt = [run[k].time - run[k - 1].time for k in range(1, len(run))]
    data: dict[str, Any] = {
        "turn": first_data["turn"],
        "step": first_data["step"],
        "index": chunk["index"],
        "dt": dt,
    }
    if tag == TOOL_CALL_ROW:
        data["id"] = chunk["id"]
        if "name" in chunk:
            data["name"] = chunk["name"]
        data["args"] = [event.data["chunk"]["argumentsDelta"] for event in run]
    else:
        data["texts"] = [event.data["chunk"]["text"] for event in run]
    return {"type": tag, "seq0": first.seq, "time0": first.time, "data": data}


def unpack_row(row: dict[str, Any]) -> list[Event]:
    """Expand one packed chunk row into its logical `assistant/chunk` events.

    Args:
        row: the decoded JSON object whose `type` is one of `ROW_TYPES`.

    Returns:
        The member events, `seq = seq0 + k`, `time = time0 + dt[0] + ... + dt[k-1]`.

    Raises:
        MalformedRowError: "malformed <tag> storage row: ..." for any shape violation.
    """
    tag = row.get("type")

    def bad(detail: str) -> MalformedRowError:
        return MalformedRowError(f"malformed {tag} storage row: {detail}")

    if row.keys() != _ROW_KEYS:
        raise bad(f"keys must be exactly {sorted(_ROW_KEYS)}, got {sorted(row)}")
    seq0, time0, data = row["seq0"], row["time0"], row["data"]
    if not _safe(seq0, signed=False):
        raise bad(f"seq0 {seq0!r} is not a non-negative safe integer")
    if not _safe(time0, signed=True):
        raise bad(f"time0 {time0!r} is not a safe integer")
    if type(data) is not dict:
        raise bad("data must be an object")
    members_key = "args" if tag == TOOL_CALL_ROW else "texts"
    required = {"turn", "step", "index", "dt", members_key}
    if tag == TOOL_CALL_ROW:
        required.add("id")
    allowed = required | ({"name"} if tag == TOOL_CALL_ROW else set())
    if not required <= data.keys() or not data.keys() <= allowed:
        raise bad(f"data keys must be {sorted(required)} (+name on tool-call rows), got {sorted(data)}")
    members, dt = data[members_key], data["dt"]
    if type(members) is not list or not members or any(type(m) is not str for m in members):
        raise bad(f"{members_key} must be a non-empty array of strings")
    if type(dt) is not list or len(dt) != len(members) - 1:
        raise bad(f"dt must be an array of {len(members) - 1} safe integers")
    if tag == TOOL_CALL_ROW and (type(data["id"]) is not str or type(data.get("name", "")) is not str):
        raise bad("id and name must be strings")
    delta = _DELTA_OF_ROW[str(tag)]
    turn, step, index = data["turn"], data["step"], data["index"]
    events: list[Event] = []
    time = time0
    for k, member in enumerate(members):
        if k:
            gap = dt[k - 1]
            if not _safe(gap, signed=True):
                raise bad(f"dt[{k - 1}] {gap!r} is not a safe integer")
            time += gap
            if not _safe(time, signed=True):
                raise bad(f"member {k} time leaves the safe integer range")
        seq = seq0 + k
        if not _safe(seq, signed=False):
            raise bad(f"member {k} seq leaves the safe integer range")
        if tag == TOOL_CALL_ROW:
            chunk: dict[str, Any] = {"type": delta, "index": index, "id": data["id"]}
            if "name" in data:
                chunk["name"] = data["name"]
            chunk["argumentsDelta"] = member
        else:
            chunk = {"type": delta, "index": index, "text": member}
        events.append(Event(v.ASSISTANT_CHUNK, seq, time, {"turn": turn, "step": step, "chunk": chunk}))
    return events
