r"""JSONL storage records: the header line and event lines (docs/store.md#jsonl-records).

Line 1 is the header record; every later line is one event verbatim or one packed chunk
row. Writers emit compact UTF-8 JSON, one record per `\n`-terminated line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from duraloop.errors import CorruptLogError, EventRejectedError, SessionFormatUnsupportedError
from duraloop.log import MAX_JSON_DEPTH, SESSION_FORMAT_VERSION, Event, SessionHeader

from ._packing import ROW_TYPES, MalformedRowError, decode_row_line, pack_events, unpack_row

_MAX_SAFE = 2**53 - 1
EVENT_DECODER: Final = msgspec.json.Decoder(Event)
"""Decodes one verbatim event line (the scanner's hot path)."""
ROW_LINE_PREFIXES: Final = tuple(f'{{"type":"{tag}"'.encode() for tag in sorted(ROW_TYPES))
"""How a packed row line written by this store (or dsh) starts."""
_encoder = msgspec.json.Encoder()
_RETIRED_HEADER_KEYS = ("sandboxMode", "approvalPolicy")
MAX_LINE_DEPTH: Final = MAX_JSON_DEPTH + 1
"""How deep a stored line may nest: the event envelope plus `MAX_JSON_DEPTH` of data."""
_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


class RecordError(ValueError):
    """Raised when one stored line is not a decodable storage record."""


def too_deep(text: bytes, limit: int = MAX_LINE_DEPTH) -> bool:
    """Return whether the JSON `text` nests containers deeper than `limit` (D13).

    Checked before a decode so that no decoder, check or copy downstream meets Python's
    recursion limit. Costs one length test for a line shorter than `2 * limit` bytes (no
    deeper value fits), two byte counts otherwise, and a token scan (strings skipped) only
    when the brackets could nest that deep.

    Args:
        text: one JSON document (a line, a column value).
        limit: the deepest nesting allowed; the default is a stored line's.

    Returns:
        True if some container is nested deeper than `limit`.
    """
    if len(text) <= 2 * limit or text.count(b"[") + text.count(b"{") <= limit:
        return False
    depth = 0
    for token in _JSON_TOKEN.findall(text):
        if token in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        elif token in (b"]", b"}"):
            depth -= 1
    return False


def depth_error(limit: int = MAX_LINE_DEPTH) -> RecordError:
    """Return the RecordError for a value nested deeper than `limit`."""
    return RecordError(
        f"nested deeper than {limit} levels (duraloop writes at most MAX_JSON_DEPTH = "
        f"{MAX_JSON_DEPTH} levels of event data)"
    )


def encode_header(header: SessionHeader) -> bytes:
    r"""Encode the header record line, keys in dsh order, ending in `\n`."""
    record: dict[str, Any] = {
        "type": "session",
        "version": header.version,
        "id": header.id,
        "createdAt": header.created_at,
    }
    for key, value in (
        ("cwd", header.cwd),
        ("parentSession", header.parent_session),
        ("seedLength", header.seed_length),
        ("origin", header.origin),
    ):
        if value is not None:
            record[key] = value
    record["delegationDepth"] = header.delegation_depth
    if header.agent_preset is not None:
        record["agentPreset"] = header.agent_preset
    return _encoder.encode(record) + b"\n"


def unsupported_version(
    session_id: object, version: object, path: str | None
) -> SessionFormatUnsupportedError:
    """Return the format refusal for a header version this build does not read.

    See docs/log.md#the-session-header.
    """
    if isinstance(version, int | float) and version > SESSION_FORMAT_VERSION:
        text = (
            f'session "{session_id}" uses log format v{version}, but this harness reads only '
            f"v{SESSION_FORMAT_VERSION}: the log was written by a newer harness — upgrade the "
            "harness to open it"
        )
    else:
        text = (
            f'session "{session_id}" uses log format v{version}, older than the supported '
            f"v{SESSION_FORMAT_VERSION}, and this build ships no upgrade path for it"
        )
    if path is not None:
        text += f" (raw log: {path})"
    return SessionFormatUnsupportedError(text)


def _safe_nonneg(value: object) -> bool:
    return type(value) is int and 0 <= value <= _MAX_SAFE


def decode_header(line: bytes, *, path: str | None) -> SessionHeader:
    r"""Decode and check the header record (docs/store.md#jsonl-records).

    The version is checked before the shape, so a future format is refused as such.

    Args:
        line: the first line, without its `\n`.
        path: the log file, for error messages.

    Returns:
        The header; unknown extra keys are dropped.

    Raises:
        SessionFormatUnsupportedError: if `version` is a number other than 0.
        CorruptLogError: if the line is not JSON or not a valid header object.
    """
    if too_deep(line):
        raise CorruptLogError(f"session header is {depth_error()}", path=path, line=1)
    try:
        record = msgspec.json.decode(line)
    except msgspec.DecodeError as exc:
        raise CorruptLogError(f"session header is not JSON ({exc})", path=path, line=1) from exc
    if type(record) is not dict:
        raise CorruptLogError("session header is not a JSON object", path=path, line=1)
    version = record.get("version")
    if (
        isinstance(version, int | float)
        and not isinstance(version, bool)
        and version != SESSION_FORMAT_VERSION
    ):
        raise unsupported_version(record.get("id"), version, path)

    def bad(detail: str) -> CorruptLogError:
        return CorruptLogError(f"invalid session header: {detail}", path=path, line=1)

    if record.get("type") != "session":
        raise bad('type must be "session"')
    if type(version) is not int:
        raise bad("version must be a number")
    if type(record.get("id")) is not str or not record["id"]:
        raise bad("id must be a non-empty string")
    for key in ("createdAt", "delegationDepth"):
        if not _safe_nonneg(record.get(key)):
            raise bad(f"{key} must be a non-negative safe integer, got {record.get(key)!r}")
    if "seedLength" in record and not _safe_nonneg(record["seedLength"]):
        raise bad(f"seedLength must be a non-negative safe integer, got {record['seedLength']!r}")
    if record.get("origin", "subagent") != "subagent":
        raise bad(f'origin must be "subagent" when present, got {record["origin"]!r}')
    for key in ("cwd", "parentSession", "agentPreset"):
        if key in record and type(record[key]) is not str:
            raise bad(f"{key} must be a string, got {record[key]!r}")
    for key in _RETIRED_HEADER_KEYS:
        if key in record:
            raise bad(f"retired header field {key} is present")
    try:
        return SessionHeader(
            id=record["id"],
            created_at=record["createdAt"],
            version=version,
            cwd=record.get("cwd"),
            parent_session=record.get("parentSession"),
            seed_length=record.get("seedLength"),
            origin=record.get("origin"),
            delegation_depth=record["delegationDepth"],
            agent_preset=record.get("agentPreset"),
        )
    except EventRejectedError as exc:
        raise bad(str(exc)) from exc


def decode_record(line: bytes, *, restore_seq: int | None = None) -> list[Event]:
    r"""Decode one storage line into its logical events (one, or a packed row's members).

    Each line is decoded once: a line that starts like one of our packed rows
    (`{"type":"<tag>-chunks"`) is decoded as a JSON object and expanded; any other line goes
    straight to the `Event` decoder. Only a line that is neither (a row written with another
    key order, a projected fixture record, or damage) is decoded a second time, generically.

    Args:
        line: the line without its `\n`.
        restore_seq: for projected fixtures only: the seq to give a record (or a packed row's
            first member) that lacks `seq`/`seq0`; a missing `time`/`time0` becomes 0.

    Returns:
        The decoded events, envelope-checked.

    Raises:
        RecordError: if the line is not JSON, not an event envelope, a malformed row, or
            nested deeper than `MAX_LINE_DEPTH`.
    """
    if too_deep(line):
        raise depth_error()
    if line.startswith(ROW_LINE_PREFIXES):
        members = decode_row_line(line) if restore_seq is None else None
        return members if members is not None else _decode_row_line(line, restore_seq)
    try:
        return [checked(EVENT_DECODER.decode(line))]
    except msgspec.ValidationError as exc:
        first_error: Exception = exc
    except msgspec.DecodeError as exc:
        raise RecordError(f"not JSON ({exc})") from exc
    try:
        # The typed decode stops at the first value that is not an object, so trailing
        # garbage after it (`"a"b`) surfaces only here.
        record = msgspec.json.decode(line)
    except msgspec.DecodeError as exc:
        raise RecordError(f"not JSON ({exc})") from exc
    if type(record) is not dict:
        raise RecordError(f"invalid event envelope: {first_error}") from first_error
    if record.get("type") in ROW_TYPES:
        return _unpack(record, restore_seq)
    if restore_seq is not None and "seq" not in record:
        record["seq"] = restore_seq
        record.setdefault("time", 0)
        try:
            return [checked(msgspec.convert(record, Event))]
        except msgspec.ValidationError as exc:
            raise RecordError(f"invalid event envelope: {exc}") from exc
    raise RecordError(f"invalid event envelope: {first_error}") from first_error


def _decode_row_line(line: bytes, restore_seq: int | None) -> list[Event]:
    try:
        record = msgspec.json.decode(line)
    except msgspec.DecodeError as exc:
        raise RecordError(f"not JSON ({exc})") from exc
    if "seq0" not in record:
        # Not row-shaped: an event whose type merely spells a row tag is an event, exactly as
        # the Event decoder takes it; anything else is reported as the malformed row it claims
        # to be.
        event = _as_event(record)
        if event is not None:
            return [checked(event)]
    return _unpack(record, restore_seq)


def _as_event(record: dict[str, Any]) -> Event | None:
    try:
        return msgspec.convert(record, Event)
    except msgspec.ValidationError:
        return None


def _unpack(record: dict[str, Any], restore_seq: int | None) -> list[Event]:
    if restore_seq is not None:
        record.setdefault("seq0", restore_seq)
        record.setdefault("time0", 0)
    try:
        return unpack_row(record)
    except MalformedRowError as exc:
        raise RecordError(str(exc)) from exc


def checked(event: Event) -> Event:
    """Return `event` if its `seq` is a non-negative and its `time` a safe integer.

    Raises:
        RecordError: naming the field and its value otherwise.
    """
    if type(event.seq) is not int or not 0 <= event.seq <= _MAX_SAFE:
        raise RecordError(f"invalid event envelope: seq {event.seq!r} is not a safe integer")
    if type(event.time) is not int or abs(event.time) > _MAX_SAFE:
        raise RecordError(f"invalid event envelope: time {event.time!r} is not a safe integer")
    return event


def encode_batch(events: Sequence[Event], *, pack_chunks: bool) -> bytes:
    r"""Encode one written batch as JSONL lines, packing chunk runs when asked.

    Args:
        events: the batch, contiguous seqs.
        pack_chunks: store runs of >= 3 eligible `assistant/chunk` events as packed rows.

    Returns:
        The lines, each ending in `\n` (empty bytes for an empty batch).
    """
    buffer = bytearray()
    items = pack_events(events) if pack_chunks else iter(events)
    for item in items:
        _encoder.encode_into(item, buffer, len(buffer))
        buffer += b"\n"
    return bytes(buffer)


def encode_records(events: Sequence[Event], *, pack_chunks: bool) -> list[tuple[int, int, bytes]]:
    """Encode one written batch as storage records, one per event or packed chunk run.

    Args:
        events: the batch, contiguous seqs.
        pack_chunks: store runs of >= 3 eligible `assistant/chunk` events as packed rows.

    Returns:
        `(first seq, last seq, line)` per record, in seq order; each line is what
        `encode_batch` writes for it, without its newline (`decode_record` reads it).
    """
    records: list[tuple[int, int, bytes]] = []
    items = pack_events(events) if pack_chunks else iter(events)
    for item in items:
        if isinstance(item, Event):
            records.append((item.seq, item.seq, _encoder.encode(item)))
        else:
            first = item["seq0"]
            records.append((first, first + len(item["data"]["dt"]), _encoder.encode(item)))
    return records
