"""Snapshots of the SQLite backend: one file per session in `<db>.snapshots/`.

See docs/store.md#snapshots.

dsh checks that the database holds exactly its schema objects (`sqlite_schema`, every
table and index), so a snapshot cannot be a table of the database: it is a file beside it,
named by the SHA-256 of the session id as the lock files are, written as the JSONL one is
(temporary file and rename, never fsynced, mode 0600). Its header is the JSONL header
(`store/_snapshot.py`); `log_bytes` holds the rowid of the row holding the last covered
event and `log_digest` the XXH3-64 of the **binding**:

- the store id (`persistence_state.store_id`, random per database: another database, or a
  copy of another store, differs),
- the session row's `incarnation` (random per materialization: a session deleted and
  created again, by duraloop or dsh, differs),
- the events covered, and the rowid and every stored column of the row holding the last
  one, which must end exactly there.

Why that is enough: rows are never updated, and the only deletion either writer makes is a
repair's `DELETE ... WHERE seq >= torn`, which takes the row holding seq `events - 1` with
it whenever it reaches into the covered prefix. An append (by dsh or duraloop) adds rows
after it and leaves the binding as it was. A prefix that changed therefore has a new last
covered row, inserted after the snapshot: a closer or a new batch with a later `time` (and,
unless SQLite reused the rowid of a deleted row, another rowid), so the binding differs. A
copy of the database with its snapshot directory is the same store, rightly believed; a
database replaced under the path by another, or a backup of another time, is another store id
or lacks or changed the last covered row. A `VACUUM` may renumber rowids: the snapshot is
then ignored once, and the next one binds the new rowids.

Checking it costs two indexed lookups; the tail (`seq >= events`) is one indexed range read.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import msgspec

from duraloop.errors import CorruptLogError, SessionNotFoundError, StoreError
from duraloop.log import Event, SessionHeader

from .._backend import StoredLog
from .._codec._records import RecordError
from .._files import replace_private_file
from .._snapshot import SnapshotIgnoredError, SnapshotRead, decode_snapshot, digest, encode_snapshot
from ._rows import EVENT_COLUMNS, SqlRow, decode_row
from ._scan import scan_rows
from ._schema import store_id

_DIR_MODE = 0o700
_LAST_ROW = (
    f"SELECT rowid, {EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq <= ? "
    "ORDER BY seq DESC LIMIT 1"
)
_TAIL_ROWS = f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq"
_PREFIX_ROWS = f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq < ? ORDER BY seq"
_INCARNATION = "SELECT incarnation FROM sessions WHERE id = ?"
_NO_END = 1 << 62  # a seq no row holds: the physical last row of a session


def snapshot_file(snapshots_dir: Path, session_id: str) -> Path:
    """Return the snapshot file of `session_id` in the store's `<db>.snapshots/` directory."""
    name = hashlib.sha256(session_id.encode()).hexdigest()
    return snapshots_dir / f"{name}.snapshot"


def _binding(
    connection: sqlite3.Connection, path: Path, session_id: str, events: int, row: SqlRow
) -> str:
    """Return the digest of the binding (module docstring) of `events` and its last row."""
    found = connection.execute(_INCARNATION, (session_id,)).fetchone()
    if found is None:
        raise SessionNotFoundError(session_id)
    material = [store_id(connection, path), bytes(found[0]), events, *row]
    return digest(msgspec.msgpack.encode(material))


def _last_row(
    connection: sqlite3.Connection, session_id: str, events: int, *, physical: bool = False
) -> tuple[SqlRow, Event] | str:
    """Return the row holding seq `events - 1` (rowid first) and that event, or why not.

    With `physical`, the session's last row, which must end there too.
    """
    bound = _NO_END if physical else events - 1
    row = connection.execute(_LAST_ROW, (session_id, bound)).fetchone()
    if row is None:
        return f"the session has no row at or before seq {events - 1}"
    try:
        members = decode_row(row[1:])
    except RecordError as exc:
        return f"the row at seq {row[1]!r} does not decode ({exc})"
    if type(row[1]) is not int or row[1] + len(members) != events:
        return f"no stored row ends at seq {events - 1}"
    return row, members[-1]


def write_sqlite_snapshot(
    connection: sqlite3.Connection,
    path: Path,
    snapshots_dir: Path,
    session_id: str,
    events: int,
    body: bytes,
) -> bool:
    """Bind `body` to the session's first `events` events, which must be all its rows; store it.

    Args:
        connection: the store's connection, inside a read transaction.
        path: the database file.
        snapshots_dir: the store's `<db>.snapshots/` directory (created, mode 0700).
        session_id: the session.
        events: the events the checkpoint covers.
        body: the encoded checkpoint.

    Returns:
        Whether it was written (False: the stored log does not end at `events`).

    Raises:
        StoreError: if the file cannot be written.
    """
    last = _last_row(connection, session_id, events, physical=True)
    if isinstance(last, str):
        return False  # not the log this writer flushed (rows after it, or a damaged end)
    row = last[0]
    blob = encode_snapshot(
        session_id,
        body,
        events=events,
        log_bytes=int(row[0]),
        log_digest=_binding(connection, path, session_id, events, row),
    )
    try:
        snapshots_dir.mkdir(mode=_DIR_MODE, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the snapshot directory {snapshots_dir}: {exc}") from exc
    replace_private_file(snapshot_file(snapshots_dir, session_id), blob, what="the snapshot")
    return True


def read_snapshot_blob(snapshots_dir: Path, session_id: str) -> bytes | None:
    """Return the session's snapshot file, or None if there is none.

    Raises:
        SnapshotIgnoredError: if it exists but cannot be read.
    """
    try:
        return snapshot_file(snapshots_dir, session_id).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SnapshotIgnoredError(f"the snapshot cannot be read ({exc})") from None


PrefixReader = Callable[[Callable[[sqlite3.Connection], list[Event]]], list[Event]]
"""Runs a function of the connection inside a read transaction of its own."""


def read_with_snapshot(
    connection: sqlite3.Connection,
    path: Path,
    header: SessionHeader,
    blob: bytes,
    *,
    reader: PrefixReader,
) -> SnapshotRead:
    """Verify a snapshot against the rows as stored now; read only the rows after its prefix.

    Args:
        connection: the store's connection, inside a read transaction.
        path: the database file, for messages.
        header: the session's header, read in the same transaction.
        blob: the snapshot file.
        reader: runs the prefix decode in a later transaction (the prefix loads on demand).

    Returns:
        The read: the checkpoint, the tail (never torn), the prefix loader.

    Raises:
        SnapshotIgnoredError: if the snapshot is damaged, another's, or stale.
        CorruptLogError: if a row after the prefix does not decode or a seq is missing (the
            caller reads the whole log again, which gives the full scan's verdict).
    """
    session_id = header.id
    snap, checkpoint = decode_snapshot(blob, session_id)
    count = checkpoint.count
    last = _last_row(connection, session_id, count)
    if isinstance(last, str):
        raise SnapshotIgnoredError(f"{last}, where the snapshot's prefix ends (stale)")
    row, last_event = last
    binding = _binding(connection, path, session_id, count, row)
    if (
        row[0] != snap.log_bytes
        or binding != snap.log_digest
        or last_event != checkpoint.last_event
    ):
        raise SnapshotIgnoredError(
            "the rows the snapshot covers, their database or the session's incarnation "
            "changed (stale or another store's)"
        )
    events: list[Event] = []
    for tail_row in connection.execute(_TAIL_ROWS, (session_id, count)).fetchall():
        if tail_row[0] != count + len(events):
            raise CorruptLogError(f'session "{session_id}": a seq gap after the snapshot')
        try:
            events.extend(decode_row(tail_row))
        except RecordError as exc:
            raise CorruptLogError(f'session "{session_id}": an undecodable row ({exc})') from exc

    def decode_prefix(reading: sqlite3.Connection) -> list[Event]:
        again = _last_row(reading, session_id, count)
        if (
            isinstance(again, str)
            or _binding(reading, path, session_id, count, again[0]) != binding
        ):
            raise CorruptLogError(
                f'session "{session_id}": the rows a snapshot covers changed since it was '
                "read; load the session again",
                path=str(path),
            )
        rows = reading.execute(_PREFIX_ROWS, (session_id, count)).fetchall()
        scan = scan_rows(session_id, rows, path=path)
        if scan.torn is not None or len(scan.events) != count:
            raise CorruptLogError(
                f'session "{session_id}": the rows a snapshot covers do not decode to its events',
                path=str(path),
            )
        return scan.events

    def load_prefix() -> list[Event]:
        return reader(decode_prefix)

    return SnapshotRead(checkpoint, StoredLog(header, events), load_prefix, snap.log_bytes)
