"""Packed chunk rows: a storage encoding for runs of `assistant/chunk` events.

See docs/store.md#jsonl-records.

A run of at least three consecutive eligible chunk events of one kind (same turn, step,
index, and for tool-call deltas the same id and name) is stored as one row
`{"type": "text-chunks" | "reasoning-chunks" | "tool-call-chunks", "seq0", "time0", "data"}`.
Decoding rebuilds the logical events exactly; it validates strictly and raises
`MalformedRowError` ("malformed <tag> storage row: ...") on any violation.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import msgspec

from duraloop.log import Event
from duraloop.log import vocabulary as v

TEXT_ROW = "text-chunks"
REASONING_ROW = "reasoning-chunks"
TOOL_CALL_ROW = "tool-call-chunks"
ROW_TYPES = frozenset({TEXT_ROW, REASONING_ROW, TOOL_CALL_ROW})
MIN_RUN_EVENTS = 3
_MAX_SAFE = 2**53 - 1
_ROW_OF_DELTA = {
    v.TEXT_DELTA: TEXT_ROW,
    v.REASONING_DELTA: REASONING_ROW,
    v.TOOL_CALL_DELTA: TOOL_CALL_ROW,
}
_DELTA_OF_ROW = {row: delta for delta, row in _ROW_OF_DELTA.items()}
_TEXT_KEYS = frozenset({"type", "index", "text"})
_TOOL_KEYS = frozenset({"type", "index", "id", "argumentsDelta"})
_ROW_KEYS = frozenset({"type", "seq0", "time0", "data"})
_TEXT_ROW_DATA_KEYS = frozenset({"turn", "step", "index", "dt", "texts"})
_TOOL_ROW_DATA_KEYS = frozenset({"turn", "step", "index", "dt", "id", "args"})
_TOOL_ROW_DATA_KEYS_NAMED = _TOOL_ROW_DATA_KEYS | {"name"}


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
    if kind in (v.TEXT_DELTA, v.REASONING_DELTA):
        if chunk.keys() != _TEXT_KEYS or type(chunk["text"]) is not str:
            return None
        return (kind, data["turn"], data["step"], chunk["index"])
    if kind == v.TOOL_CALL_DELTA:
        keys = chunk.keys() - {"name"}
        name = chunk.get("name", _ABSENT)
        if (
            keys != _TOOL_KEYS
            or type(chunk["id"]) is not str
            or type(chunk["argumentsDelta"]) is not str
        ):
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
    problem = _shape_problem(tag, row)
    if problem is not None:
        raise MalformedRowError(f"malformed {tag} storage row: {problem}")
    seq0, data = row["seq0"], row["data"]
    times = _member_times(seq0, row["time0"], data["dt"])
    if isinstance(times, str):
        raise MalformedRowError(f"malformed {tag} storage row: {times}")
    members = data["args" if tag == TOOL_CALL_ROW else "texts"]
    return _members(
        _DELTA_OF_ROW[str(tag)],
        seq0,
        times,
        members,
        where=(data["turn"], data["step"], data["index"]),
        call_id=data.get("id"),
        name=data.get("name", _ABSENT),
    )


# The row shapes as msgspec types: decoding one validates keys and value types in C, the
# rest (non-empty members, dt arity, safe ranges) is checked by `decode_row_line`.


class _TextRowData(msgspec.Struct, forbid_unknown_fields=True):
    turn: Any
    step: Any
    index: Any
    dt: list[int]
    texts: list[str]


class _ToolCallRowData(msgspec.Struct, forbid_unknown_fields=True):
    turn: Any
    step: Any
    index: Any
    dt: list[int]
    id: str
    args: list[str]
    name: str | msgspec.UnsetType = msgspec.UNSET


class _TextRow(msgspec.Struct, forbid_unknown_fields=True, tag_field="type", tag=TEXT_ROW):
    seq0: int
    time0: int
    data: _TextRowData


class _ReasoningRow(
    msgspec.Struct, forbid_unknown_fields=True, tag_field="type", tag=REASONING_ROW
):
    seq0: int
    time0: int
    data: _TextRowData


class _ToolCallRow(msgspec.Struct, forbid_unknown_fields=True, tag_field="type", tag=TOOL_CALL_ROW):
    seq0: int
    time0: int
    data: _ToolCallRowData


_row_decoder = msgspec.json.Decoder(_TextRow | _ReasoningRow | _ToolCallRow)
_DELTA_OF_ROW_TYPE: dict[type, str] = {
    _TextRow: v.TEXT_DELTA,
    _ReasoningRow: v.REASONING_DELTA,
    _ToolCallRow: v.TOOL_CALL_DELTA,
}


def decode_row_line(line: bytes) -> list[Event] | None:
    r"""Decode one well-formed packed row line in a single typed pass.

    Args:
        line: a storage line, without its `\n`.

    Returns:
        The member events, exactly as `unpack_row` builds them; or None when the line is
        not a well-formed row, so the caller takes the general path (which names the
        problem, or finds that the line is something else).
    """
    try:
        row = _row_decoder.decode(line)
    except msgspec.DecodeError:
        return None
    seq0, time0, data = row.seq0, row.time0, row.data
    if isinstance(data, _ToolCallRowData):
        members, call_id = data.args, data.id
        name: object = _ABSENT if data.name is msgspec.UNSET else data.name
    else:
        members, call_id, name = data.texts, None, _ABSENT
    if not members or len(data.dt) != len(members) - 1:
        return None
    if not 0 <= seq0 <= _MAX_SAFE or not -_MAX_SAFE <= time0 <= _MAX_SAFE:
        return None
    times = _member_times(seq0, time0, data.dt)
    if isinstance(times, str):
        return None
    return _members(
        _DELTA_OF_ROW_TYPE[type(row)],
        seq0,
        times,
        members,
        where=(data.turn, data.step, data.index),
        call_id=call_id,
        name=name,
    )


def _members(
    delta: str,
    seq0: int,
    times: list[int],
    members: list[str],
    *,
    where: tuple[Any, Any, Any],
    call_id: str | None,
    name: object,
) -> list[Event]:
    """Build the member events; chunk keys in dsh order (`type, index, [id, [name]], ...`).

    Args:
        delta: the chunk type, e.g. `text-delta`.
        seq0: the first member's seq.
        times: each member's time.
        members: each member's text (or arguments delta).
        where: the row's `(turn, step, index)`, copied into every member.
        call_id: the tool call id (tool-call rows), else None.
        name: the tool name, or `_ABSENT` when the row has none.

    Returns:
        One `assistant/chunk` event per member.
    """
    turn, step, index = where
    chunk_type = v.ASSISTANT_CHUNK
    places = zip(range(seq0, seq0 + len(members)), times, members, strict=True)
    if call_id is None:
        return [
            Event(
                chunk_type,
                seq,
                time,
                {
                    "turn": turn,
                    "step": step,
                    "chunk": {"type": delta, "index": index, "text": text},
                },
            )
            for seq, time, text in places
        ]
    if name is _ABSENT:
        return [
            Event(
                chunk_type,
                seq,
                time,
                {
                    "turn": turn,
                    "step": step,
                    "chunk": {"type": delta, "index": index, "id": call_id, "argumentsDelta": part},
                },
            )
            for seq, time, part in places
        ]
    return [
        Event(
            chunk_type,
            seq,
            time,
            {
                "turn": turn,
                "step": step,
                "chunk": {
                    "type": delta,
                    "index": index,
                    "id": call_id,
                    "name": name,
                    "argumentsDelta": part,
                },
            },
        )
        for seq, time, part in places
    ]


def _shape_problem(tag: object, row: dict[str, Any]) -> str | None:
    """Return what breaks the row's shape (keys, types, arities), or None."""
    if row.keys() != _ROW_KEYS:
        return f"keys must be exactly {sorted(_ROW_KEYS)}, got {sorted(row)}"
    seq0, time0, data = row["seq0"], row["time0"], row["data"]
    if not _safe(seq0, signed=False):
        return f"seq0 {seq0!r} is not a non-negative safe integer"
    if not _safe(time0, signed=True):
        return f"time0 {time0!r} is not a safe integer"
    if type(data) is not dict:
        return "data must be an object"
    tool = tag == TOOL_CALL_ROW
    required = _TOOL_ROW_DATA_KEYS if tool else _TEXT_ROW_DATA_KEYS
    keys = data.keys()
    if not (keys == required or (tool and keys == _TOOL_ROW_DATA_KEYS_NAMED)):
        return f"data keys must be {sorted(required)} (+name on tool-call rows), got {sorted(data)}"
    members_key = "args" if tool else "texts"
    members, dt = data[members_key], data["dt"]
    if type(members) is not list or not members or not all(type(m) is str for m in members):
        return f"{members_key} must be a non-empty array of strings"
    if type(dt) is not list or len(dt) != len(members) - 1:
        return f"dt must be an array of {len(members) - 1} safe integers"
    if tool and (type(data["id"]) is not str or type(data.get("name", "")) is not str):
        return "id and name must be strings"
    return None


def _member_times(seq0: int, time0: int, dt: list[Any]) -> list[int] | str:
    """Return the members' times, or the first gap, time or seq out of the safe range."""
    times = [time0]
    time = time0
    last_safe_member = _MAX_SAFE - seq0
    for k, gap in enumerate(dt, start=1):
        if type(gap) is not int or not -_MAX_SAFE <= gap <= _MAX_SAFE:
            return f"dt[{k - 1}] {gap!r} is not a safe integer"
        time += gap
        if not -_MAX_SAFE <= time <= _MAX_SAFE:
            return f"member {k} time leaves the safe integer range"
        if k > last_safe_member:
            return f"member {k} seq leaves the safe integer range"
        times.append(time)
    return times
    time = time0
    for k in range(1, len(dt) + 1):
        gap = dt[k - 1]
        if not _safe(gap, signed=True):
            return f"dt[{k - 1}] {gap!r} is not a safe integer"
        time += gap
        if not _safe(time, signed=True):
            return f"member {k} time leaves the safe integer range"
        if not _safe(seq0 + k, signed=False):
            return f"member {k} seq leaves the safe integer range"
    return None
