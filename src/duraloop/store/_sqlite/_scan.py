"""The read rule of a SQLite session's rows (docs/store.md#sqlite), with the fsync rule (D12).

The last row holding a `turn/end` is found by a reverse pass; an undecodable row or a seq
discontinuity at or before it is corruption, after it the start of a torn tail, unless a
later row proves the damaged one was durable (`fsync_evidence`, the same rule as JSONL: a
response after its request's flush, a dispatched result after its `tool/call`'s flush).
A SQLite transaction is atomic, so a crash itself never leaves a bad row; the rule keeps what
dsh's reader accepts as a tail and refuses what no crash of either writer could leave. A
writer reads only the physical tail row, for the stored next seq (`stored_next_seq`).
"""

from __future__ import annotations

import base64
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from duraloop.errors import AppendConflictError, CorruptLogError
from duraloop.log import Event
from duraloop.log import vocabulary as v

from .._codec._records import RecordError
from .._tail import TornTail, fsync_evidence
from ._rows import EVENT_COLUMNS, PACKED, SqlRow, decode_row, row_member_count

_TURN_END = v.TURN_END.encode()
_COLUMN_NAMES = [name.strip() for name in EVENT_COLUMNS.split(",")]


@dataclass(frozen=True, slots=True)
class RowScan:
    """The readable part of a session's rows.

    Args:
        events: the contiguous committed events.
        torn: the seq of the torn tail's first row, or None.
        torn_rows: how many rows the torn tail has.
        cut: what the torn tail holds, or None.
    """

    events: list[Event]
    torn: int | None
    torn_rows: int
    cut: TornTail | None = None


def scan_rows(session_id: str, rows: list[SqlRow], *, path: Path) -> RowScan:
    """Apply the read rule to a session's rows, in seq order.

    Args:
        session_id: the session, for messages.
        rows: its `events` rows (`EVENT_COLUMNS`), ordered by seq.
        path: the database file, for messages.

    Returns:
        The events and the torn tail, if any.

    Raises:
        CorruptLogError: for an undecodable row or a seq gap at or before the last row that
            holds a `turn/end`, or before a row that proves it was durable.
    """
    decoded: list[list[Event] | RecordError | None] = [None] * len(rows)

    def attempt(index: int) -> list[Event] | RecordError:
        result = decoded[index]
        if result is None:
            try:
                result = decode_row(rows[index])
            except RecordError as exc:
                result = exc
            decoded[index] = result
        return result

    last_end = -1
    for index in range(len(rows) - 1, -1, -1):
        row = rows[index]
        if (
            row[1] == _TURN_END
            and row[-1] != PACKED
            and not isinstance(attempt(index), RecordError)
        ):
            last_end = index
            break
    events: list[Event] = []
    for index, row in enumerate(rows):
        result = attempt(index)
        if isinstance(result, RecordError):
            problem = f"undecodable row ({result})"
        elif row[0] != len(events):
            problem = f"seq gap (expected {len(events)}, got {row[0]!r})"
        else:
            events.extend(result)
            continue
        where = f'session "{session_id}": {problem} at seq {row[0]!r}'
        if index <= last_end:
            raise CorruptLogError(
                f"{where}, at or before the last turn/end (seq {rows[last_end][0]}); the "
                "committed region is damaged",
                path=str(path),
            )
        tail = [attempt(later) for later in range(index, len(rows))]
        readable = [event for part in tail if not isinstance(part, RecordError) for event in part]
        later = [event for part in tail[1:] if not isinstance(part, RecordError) for event in part]
        evidence = fsync_evidence(events, later)
        if evidence is not None:
            raise CorruptLogError(
                f"{where}, and {evidence}: the row was committed before that one, so this is "
                "damage inside the durable log, not a torn tail",
                path=str(path),
            )
        unreadable = sum(1 for part in tail if isinstance(part, RecordError))
        cut = TornTail.of(len(rows) - index, problem, readable, unreadable_count=unreadable)
        return RowScan(events, row[0], len(rows) - index, cut)
    return RowScan(events, None, 0)


def stored_next_seq(connection: sqlite3.Connection, session_id: str, *, path: Path) -> int:
    """Return the stored next seq of a session, from its physical tail row.

    Args:
        connection: the store's connection, inside the writing transaction.
        session_id: the session.
        path: the database file, for messages.

    Returns:
        The seq after the last row's last member (0 for a session without rows).

    Raises:
        CorruptLogError: if the last row's seq is not an integer.
        AppendConflictError: if the last row cannot be decoded (a torn tail to repair first).
    """
    tail = connection.execute(
        f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
        (session_id,),
    ).fetchone()
    if tail is None:
        return 0
    if type(tail[0]) is not int:
        raise CorruptLogError(
            f'session "{session_id}": the last events row has a seq of SQLite type '
            f"{type(tail[0]).__name__}, not an integer; the database is damaged",
            path=str(path),
        )
    try:
        return int(tail[0]) + row_member_count(tail)
    except RecordError as exc:
        raise AppendConflictError(
            f'session "{session_id}" ends in an undecodable row at seq {tail[0]} ({exc}); load '
            "it to repair the torn tail before appending"
        ) from exc


def rows_as_json_lines(session_id: str, rows: list[SqlRow], torn: int) -> bytes:
    r"""Encode the rows a repair deletes (seq >= `torn`) as JSON lines, to keep beside the db.

    Each line is one row: `{"session_id", <column>: value}`; a BLOB is `{"base64": ...}`,
    text stays text when it is UTF-8 (else base64 too).

    Returns:
        The lines, each ending in `\n`.
    """
    lines = bytearray()
    for row in rows:
        if type(row[0]) is int and row[0] < torn:
            continue
        record: dict[str, Any] = {"session_id": session_id}
        for name, value in zip(_COLUMN_NAMES, row, strict=True):
            record[name] = _plain(value)
        lines += msgspec.json.encode(record) + b"\n"
    return bytes(lines)


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(value).decode()}
    return value
