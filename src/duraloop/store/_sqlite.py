"""The SQLite backend: every session of a store in one database file (session-spec 6.8).

One durable batch is one transaction: `BEGIN IMMEDIATE`, re-read the stored next seq from the
physical tail (a stale writer gets `AppendConflictError`), insert the rows, `revision += 1`,
commit (WAL, `synchronous=FULL`). The first batch also inserts the session row with a random
`incarnation`. A read scans a session's rows: the last row holding a `turn/end` is found by a
reverse pass; an undecodable row or a seq discontinuity at or before it is corruption, after
it the start of a torn tail, which `repair` deletes and replaces (closers, a batch) in one
transaction, after checking that the tail is still the one the read saw.

The single-writer rule is the JSONL one: an exclusive `fcntl.flock` on one lock file per
session in `<db>.locks/`, so two processes never write one session, while different sessions
of one database are written by different processes, serialized by SQLite's own locking.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from duraloop.errors import (
    AppendConflictError,
    CorruptLogError,
    SessionExistsError,
    SessionFormatUnsupportedError,
    SessionNotFoundError,
    StoreError,
    UsageError,
)
from duraloop.log import Event, SessionHeader
from duraloop.log import vocabulary as v

from ._backend import DamagedLog, StoredLog, WriteReceipt
from ._files import lock_session_file
from ._paths import check_session_id
from ._records import RecordError
from ._sqlite_rows import (
    EVENT_COLUMNS,
    PACKED,
    SESSION_COLUMNS,
    EventRow,
    SqlRow,
    decode_header_row,
    decode_row,
    encode_rows,
    header_values,
    row_member_count,
)
from ._sqlite_schema import check_schema, connect, store_id
from ._writer import check_batch

logger = logging.getLogger(__name__)
_TURN_END = v.TURN_END.encode()
_LOCK_DIR_MODE = 0o700
_LOCK_FILE_MODE = 0o600
_INSERT_EVENT = (
    "INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op, "
    "ignorable) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_SESSION = (
    f"INSERT INTO sessions ({SESSION_COLUMNS}, incarnation, revision) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)"
)
_BUMP_REVISION = "UPDATE sessions SET revision = revision + 1 WHERE id = ?"


@dataclass(frozen=True, slots=True)
class _Scan:
    """The readable part of a session's rows: events, and the torn tail's first seq."""

    events: list[Event]
    torn: int | None
    torn_rows: int


def _check_id(session_id: str) -> None:
    check_session_id(session_id)
    try:
        session_id.encode()
    except UnicodeEncodeError as exc:
        raise UsageError(f"session id {session_id!r} is not valid Unicode text (a lone surrogate)") from exc


def _bytes_of(rows: Sequence[EventRow]) -> int:
    return sum(len(row.data) for row in rows)


class SqliteBackend:
    """Session logs in one SQLite database, schema 17 (session-spec 6.8); dsh opens it too.

    The database is opened (and a missing one created, mode 0600) by the constructor;
    `close()` closes it. One connection serves every thread of the process, one call at a time.

    Args:
        path: the database file, e.g. `~/.duraloop/sessions.db`.
        pack_chunks: store runs of >= 3 chunk events as packed rows.

    Raises:
        StoreError: if the file is a symlink, not owned by the user, readable by others, in a
            group/world-writable directory, or a database of another application or schema.
    """

    def __init__(self, path: Path | str, *, pack_chunks: bool = True) -> None:
        self.path = Path(path).absolute()
        self.pack_chunks = pack_chunks
        self._connection: sqlite3.Connection | None = connect(self.path)
        self._mutex = threading.Lock()
        self._schema_version = check_schema(self._connection, self.path)
        info = self.path.stat()
        birth_ns = getattr(info, "st_birthtime_ns", 0)
        self._identity = (
            f"file:{info.st_dev}:{info.st_ino}:{birth_ns}:store:{store_id(self._connection, self.path)}"
        )
        self._locks_dir = self.path.with_name(f"{self.path.name}.locks")

    def close(self) -> None:
        """Close the database connection; idempotent."""
        with self._mutex:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _error(self, what: str, exc: sqlite3.Error) -> StoreError:
        hint = ""
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            hint = " (another process held the database for over 5 seconds; retry)"
        return StoreError(f"SQLite store {self.path}: cannot {what}: {exc}{hint}")

    @contextlib.contextmanager
    def _transaction(self, what: str, *, write: bool) -> Iterator[sqlite3.Connection]:
        """Run the body in one transaction (`BEGIN IMMEDIATE` to write); roll back on error."""
        with self._mutex:
            connection = self._connection
            if connection is None:
                raise StoreError(f"SQLite store {self.path} is closed")
            try:
                connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                if write:
                    self._check_schema(connection)
                yield connection
                connection.execute("COMMIT")
            except BaseException as exc:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise self._error(what, exc) from exc
                raise

    def _check_schema(self, connection: sqlite3.Connection) -> None:
        """Validate the schema again if it changed since it was last validated."""
        current = int(connection.execute("PRAGMA schema_version").fetchone()[0])
        if current != self._schema_version:
            self._schema_version = check_schema(connection, self.path)

    def _header(self, connection: sqlite3.Connection, session_id: str) -> SessionHeader:
        row = connection.execute(
            f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise SessionNotFoundError(session_id)
        try:
            return decode_header_row(row)
        except RecordError as exc:
            raise CorruptLogError(f'session "{session_id}" has an invalid sessions row ({exc})', path=str(self.path)) from exc

    @staticmethod
    def _rows(connection: sqlite3.Connection, session_id: str) -> list[SqlRow]:
        return connection.execute(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()

    def _scan(self, session_id: str, rows: list[SqlRow]) -> _Scan:
        """Apply the read rule of session-spec 6.8 to a session's rows, in seq order.

        Raises:
            CorruptLogError: for an undecodable row or a seq gap at or before the last row
                that holds a `turn/end`.
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
            if row[1] == _TURN_END and row[-1] != PACKED and not isinstance(attempt(index), RecordError):
                last_end = index
                break
        events: list[Event] = []
        for index, row in enumerate(rows):
            result = attempt(index)
            if isinstance(result, RecordError):
                problem = f"undecodable row ({result})"
            elif row[0] != len(events):
                problem = f"seq gap (expected {len(events)}, got {row[0]})"
            else:
                events.extend(result)
                continue
            if index <= last_end:
                raise CorruptLogError(
                    f'session "{session_id}": {problem} at seq {row[0]}, at or before the last '
                    f"turn/end (seq {rows[last_end][0]}); the committed region is damaged",
                    path=str(self.path),
                )
            return _Scan(events, row[0], len(rows) - index)
        return _Scan(events, None, 0)

    def read(self, session_id: str) -> StoredLog:
        """Read a session's header and rows in one snapshot; see `StorageBackend.read`.

        `torn` is the seq of the first row of a torn tail and `torn_bytes` its row count.
        """
        with self._transaction(f'read session "{session_id}"', write=False) as connection:
            header = self._header(connection, session_id)
            rows = self._rows(connection, session_id)
        scan = self._scan(session_id, rows)
        return StoredLog(header, scan.events, scan.torn, None, scan.torn_rows)

    def exists(self, session_id: str) -> bool:
        """Return whether the session has a row (it was materialized)."""
        with self._transaction(f'look up session "{session_id}"', write=False) as connection:
            found = connection.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return found is not None

    def revision(self, session_id: str) -> str | None:
        """Return `<store identity>:incarnation:<uuid>:revision:<n>`; see `StorageBackend.revision`.

        The store identity is `file:<dev>:<ino>:<birthtime ns>:store:<store_id>` (birth time
        0 where the platform does not report it). None when the session is not stored.
        """
        with self._transaction(f'read the revision of session "{session_id}"', write=False) as connection:
            row = connection.execute(
                "SELECT incarnation, revision FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
        if row is None:
            return None
        return f"{self._identity}:incarnation:{bytes(row[0]).decode()}:revision:{row[1]}"

    def materialize(self, header: SessionHeader, batch: Sequence[Event]) -> WriteReceipt:
        """Insert the session row and first batch in one transaction; see `StorageBackend.materialize`."""
        _check_id(header.id)
        check_batch(header.id, batch, 0)
        rows = encode_rows(header.id, batch, pack_chunks=self.pack_chunks)
        with self._transaction(f'create session "{header.id}"', write=True) as connection:
            if connection.execute("SELECT 1 FROM sessions WHERE id = ?", (header.id,)).fetchone():
                raise SessionExistsError(f'session "{header.id}" already has a persisted log; resume it instead')
            connection.execute(_INSERT_SESSION, (*header_values(header), str(uuid.uuid4())))
            connection.executemany(_INSERT_EVENT, rows)
            connection.execute(_BUMP_REVISION, (header.id,))
        return WriteReceipt(_bytes_of(rows), 1)

    def _next_seq(self, connection: sqlite3.Connection, session_id: str) -> int:
        """Return the stored next seq, from the physical tail row."""
        tail = connection.execute(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
            (session_id,),
        ).fetchone()
        if tail is None:
            return 0
        try:
            return int(tail[0]) + row_member_count(tail)
        except RecordError as exc:
            raise AppendConflictError(
                f'session "{session_id}" ends in an undecodable row at seq {tail[0]} ({exc}); load '
                "it to repair the torn tail before appending"
            ) from exc

    def append(self, session_id: str, batch: Sequence[Event]) -> WriteReceipt:
        """Append one batch as one transaction; see `StorageBackend.append`.

        Raises:
            AppendConflictError: if the batch does not start at the stored next seq (a stale
                writer), or the stored log ends in an undecodable row.
            SessionNotFoundError: if the session has no row.
            StoreError: if SQLite fails; nothing is stored.
        """
        rows = encode_rows(session_id, batch, pack_chunks=self.pack_chunks)
        if not rows:
            return WriteReceipt(0, 0)
        with self._transaction(f'append to session "{session_id}"', write=True) as connection:
            if not connection.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone():
                raise SessionNotFoundError(session_id)
            check_batch(session_id, batch, self._next_seq(connection, session_id))
            connection.executemany(_INSERT_EVENT, rows)
            connection.execute(_BUMP_REVISION, (session_id,))
        return WriteReceipt(_bytes_of(rows), 1)

    def repair(self, session_id: str, torn: int | None, events: Sequence[Event]) -> WriteReceipt:
        """Delete the torn tail from seq `torn` on and insert `events`, in one transaction.

        See `StorageBackend.repair`. The torn tail is re-scanned inside the transaction: if it
        is no longer the one the read reported, nothing is written.

        Raises:
            StoreError: if the torn tail changed since it was read, or SQLite fails.
            AppendConflictError: if `events` do not continue the cut log.
        """
        rows = encode_rows(session_id, events, pack_chunks=self.pack_chunks)
        if torn is None and not rows:
            return WriteReceipt(0, 0)
        deleted = 0
        with self._transaction(f'repair session "{session_id}"', write=True) as connection:
            self._header(connection, session_id)
            if torn is not None:
                current = self._scan(session_id, self._rows(connection, session_id)).torn
                if current != torn:
                    raise StoreError(
                        f'the torn tail of session "{session_id}" changed since it was read (it '
                        f"started at seq {torn}, now {current}); load the session again"
                    )
                deleted = connection.execute(
                    "DELETE FROM events WHERE session_id = ? AND seq >= ?", (session_id, torn)
                ).rowcount
            check_batch(session_id, events, self._next_seq(connection, session_id))
            connection.executemany(_INSERT_EVENT, rows)
            connection.execute(_BUMP_REVISION, (session_id,))
        if deleted:
            logger.warning("session %s: deleted a torn tail of %d rows from seq %d", session_id, deleted, torn)
        return WriteReceipt(_bytes_of(rows), 1)

    def list_headers(self) -> list[SessionHeader | DamagedLog]:
        """Return every session row's header, oldest first; see `StorageBackend.list_headers`."""
        with self._transaction("list sessions", write=False) as connection:
            rows = connection.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions ORDER BY created_at, id"
            ).fetchall()
        headers: list[SessionHeader | DamagedLog] = []
        for row in rows:
            try:
                headers.append(decode_header_row(row))
            except (RecordError, SessionFormatUnsupportedError) as exc:
                session_id = bytes(row[0]).decode(errors="replace")
                headers.append(DamagedLog(session_id, f"invalid sessions row ({exc})"))
        return headers

    def lock(self, session_id: str, *, cwd: str | None) -> Callable[[], None]:
        """Take an exclusive `flock` on the session's file in `<db>.locks/`; see `StorageBackend.lock`."""
        del cwd
        _check_id(session_id)
        digest = hashlib.sha256(session_id.encode()).hexdigest()
        lock_path = self._locks_dir / f"{digest}.lock"
        try:
            with contextlib.suppress(FileExistsError):
                self._locks_dir.mkdir(mode=_LOCK_DIR_MODE)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, _LOCK_FILE_MODE)
        except OSError as exc:
            raise StoreError(f"cannot open the lock file {lock_path}: {exc}") from exc
        return lock_session_file(fd, lock_path, session_id)
