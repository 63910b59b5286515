"""Rows of a SQLite session store: session headers, scalar rows and packed rows.

See docs/store.md#sqlite.

A scalar row is one logical event: `data` is the JSON text of `event.data`, or a zstd BLOB
(level 3) when the JSON is at least 4096 bytes and compression makes it smaller;
`surface_op` is JSON text; `source_event_seqs` a varint BLOB (`_varint`); `ignorable` 1 or
NULL. A packed row holds a run of chunk events exactly as a JSONL packed row does
(`_packing`), at most 1024 members and 1 MiB of data: `seq`/`time` are the first member's,
`type` is the row tag, `data` the JSON text of the row's data, `ignorable = 0` marks it, and
the surface columns are NULL.

Rows are read with `text_factory = bytes`, so text that is not UTF-8 is an undecodable row,
not a failed query.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any, NamedTuple

import msgspec

from duraloop.errors import EventRejectedError
from duraloop.log import MAX_JSON_DEPTH, SESSION_FORMAT_VERSION, Event, SessionHeader

from .._codec._packing import ROW_TYPES, MalformedRowError, pack_events, unpack_row
from .._codec._records import RecordError, checked, depth_error, too_deep, unsupported_version
from .._codec._varint import VarintError, decode_seqs, encode_seqs

COMPRESS_MIN_BYTES = 4096
"""JSON data at least this long is stored zstd-compressed when that is smaller."""
ZSTD_LEVEL = 3
MAX_PACKED_MEMBERS = 1024
MAX_PACKED_DATA_BYTES = 1 << 20
PACKED = 0
"""The `ignorable` value that marks a packed row."""

_encoder = msgspec.json.Encoder()

EVENT_COLUMNS = (
    "seq, type, time, typeof(data), data, typeof(source_event_seqs), source_event_seqs, "
    "surface_op, ignorable"
)
"""The columns `decode_row` reads, in its order."""
SESSION_COLUMNS = (
    "id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, "
    "agent_preset"
)
"""The columns `decode_header_row` reads, in its order."""

SqlRow = tuple[Any, ...]


class EventRow(NamedTuple):
    """The values of one `events` row as `INSERT` takes them (session id first)."""

    session_id: str
    seq: int
    type: str
    time: int
    data: str | bytes
    source_event_seqs: bytes | None
    surface_op: str | None
    ignorable: int | None


@functools.cache
def _zstandard() -> ModuleType:
    import zstandard  # deferred: a store without large data never pays for the import

    return zstandard


def encode_data(value: Any) -> str | bytes:
    """Return `value` as stored: JSON text, or a zstd BLOB when large and smaller."""
    raw = _encoder.encode(value)
    if len(raw) >= COMPRESS_MIN_BYTES:
        packed: bytes = _zstandard().ZstdCompressor(level=ZSTD_LEVEL).compress(raw)
        if len(packed) < len(raw):
            return packed
    return raw.decode()


def _decode_json(text: Any) -> Any:
    """Decode one JSON column value; refuse one nested deeper than `MAX_JSON_DEPTH` (D13)."""
    if isinstance(text, bytes | str) and too_deep(
        text if isinstance(text, bytes) else text.encode(), MAX_JSON_DEPTH
    ):
        raise depth_error(MAX_JSON_DEPTH)
    return msgspec.json.decode(text)


def _decode_data(kind: bytes, value: Any) -> Any:
    if kind == b"text":
        return _decode_json(value)
    if kind == b"blob":
        zstandard = _zstandard()
        try:
            reader = zstandard.ZstdDecompressor().decompressobj()
            plaintext = reader.decompress(value)
        except zstandard.ZstdError as exc:
            raise RecordError(f"data BLOB does not decompress ({exc})") from exc
        if not reader.eof or reader.unused_data:
            raise RecordError("data BLOB is not exactly one complete zstd frame")
        return _decode_json(plaintext)
    raise RecordError(f"data is {kind.decode(errors='replace')}, not JSON text or a zstd BLOB")


def _scalar_row(session_id: str, event: Event) -> EventRow:
    seqs = None if event.source_event_seqs is None else encode_seqs(event.source_event_seqs)
    surface_op = None if event.surface_op is None else _encoder.encode(event.surface_op).decode()
    return EventRow(
        session_id,
        event.seq,
        event.type,
        event.time,
        encode_data(event.data),
        seqs,
        surface_op,
        1 if event.ignorable else None,
    )


def _packed_rows(session_id: str, run: Sequence[Event]) -> Iterator[EventRow]:
    """Yield `run` as packed rows within the limits (halving it until each piece fits).

    A piece shorter than three members is stored as scalar rows, as the packing rule asks.
    """
    rows = list(pack_events(run))
    if len(rows) != 1 or isinstance(rows[0], Event):
        yield from (_scalar_row(session_id, item) for item in rows if isinstance(item, Event))
        return
    row = rows[0]
    data = _encoder.encode(row["data"])
    if len(run) <= MAX_PACKED_MEMBERS and len(data) <= MAX_PACKED_DATA_BYTES:
        yield EventRow(
            session_id, row["seq0"], row["type"], row["time0"], data.decode(), None, None, PACKED
        )
        return
    half = len(run) // 2
    yield from _packed_rows(session_id, run[:half])
    yield from _packed_rows(session_id, run[half:])


def encode_rows(session_id: str, batch: Sequence[Event], *, pack_chunks: bool) -> list[EventRow]:
    """Encode one written batch as `events` rows, packing chunk runs when asked.

    Args:
        session_id: the session the rows belong to.
        batch: the events, contiguous seqs.
        pack_chunks: store runs of >= 3 eligible `assistant/chunk` events as packed rows.

    Returns:
        The rows, in seq order.

    Raises:
        EventRejectedError: if a `sourceEventSeqs` entry is not a non-negative safe integer.
    """
    if not pack_chunks:
        items: Iterator[Event | dict[str, Any]] = iter(batch)
    else:
        items = pack_events(batch)
    first = batch[0].seq if batch else 0
    rows: list[EventRow] = []
    try:
        for item in items:
            if isinstance(item, Event):
                rows.append(_scalar_row(session_id, item))
                continue
            start = item["seq0"] - first
            members = len(item["data"]["dt"]) + 1
            rows.extend(_packed_rows(session_id, batch[start : start + members]))
    except VarintError as exc:
        raise EventRejectedError(
            f"session {session_id!r}: invalid sourceEventSeqs ({exc})"
        ) from exc
    return rows


def decode_row(row: SqlRow) -> list[Event]:
    """Decode one `events` row (columns `EVENT_COLUMNS`) into its logical events.

    Returns:
        One event for a scalar row, the members of a packed row.

    Raises:
        RecordError: if the row does not decode (bad text, JSON, varints, or row shape).
    """
    seq, kind, time, data_kind, data, seqs_kind, seqs, surface_op, ignorable = row
    try:
        type_text = bytes(kind).decode()
        value = _decode_data(data_kind, data)
        if ignorable == PACKED:
            if type_text not in ROW_TYPES:
                raise RecordError(f'packed row has type "{type_text}", not a packed row tag')
            if seqs is not None or surface_op is not None:
                raise RecordError(f"packed {type_text} row carries surface columns")
            return unpack_row({"type": type_text, "seq0": seq, "time0": time, "data": value})
        if seqs is not None and seqs_kind != b"blob":
            raise RecordError("source_event_seqs is not a BLOB")
        event = Event(
            type_text,
            seq,
            time,
            value,
            None if seqs is None else decode_seqs(seqs),
            None if surface_op is None else _decode_json(surface_op),
            True if ignorable == 1 else None,
        )
        return [checked(event)]
    except (UnicodeDecodeError, msgspec.DecodeError, VarintError, MalformedRowError) as exc:
        raise RecordError(str(exc)) from exc
    except TypeError as exc:  # a damaged column of another SQLite type (NULL, integer, ...)
        raise RecordError(f"a column has the wrong SQLite type ({exc})") from exc


def row_member_count(row: SqlRow) -> int:
    """Return how many logical events a row holds (its seq span).

    Raises:
        RecordError: if the row does not decode.
    """
    return len(decode_row(row)) if row[-1] == PACKED else 1


def header_values(header: SessionHeader) -> tuple[Any, ...]:
    """Return the `sessions` values of `SESSION_COLUMNS` for a header."""
    return (
        header.id,
        header.version,
        header.created_at,
        header.cwd,
        header.parent_session,
        header.seed_length,
        header.origin,
        header.delegation_depth,
        header.agent_preset,
    )


def _text(value: Any, column: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, bytes):
        raise RecordError(f"{column} is not text")
    return value.decode()


def decode_header_row(row: SqlRow) -> SessionHeader:
    """Decode a `sessions` row (columns `SESSION_COLUMNS`) into a header.

    Returns:
        The header; a NULL `delegation_depth` reads as 0.

    Raises:
        SessionFormatUnsupportedError: if `version` is not 0 (checked first).
        RecordError: if a column has the wrong type or value.
    """
    raw_id, version, created_at, cwd, parent, seed_length, origin, depth, preset = row
    try:
        session_id = _text(raw_id, "id")
        if version != SESSION_FORMAT_VERSION:
            raise unsupported_version(session_id, version, None)
        origin_text = _text(origin, "origin")
        if origin_text not in (None, "subagent"):
            raise RecordError(f'origin must be "subagent" when present, got {origin_text!r}')
        for name, number in (
            ("created_at", created_at),
            ("seed_length", seed_length),
            ("delegation_depth", depth),
        ):
            if number is not None and type(number) is not int:
                raise RecordError(f"{name} is not an integer")
        return SessionHeader(
            id=session_id or "",
            created_at=created_at,
            cwd=_text(cwd, "cwd"),
            parent_session=_text(parent, "parent_session"),
            seed_length=seed_length,
            origin=origin_text,
            delegation_depth=0 if depth is None else depth,
            agent_preset=_text(preset, "agent_preset"),
        )
    except (UnicodeDecodeError, EventRejectedError) as exc:
        raise RecordError(str(exc)) from exc
