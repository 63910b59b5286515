"""The SQLite backend: every session of a store in one database file (docs/store.md#sqlite).

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
Snapshots are files in `<db>.snapshots/` (`_snapshots`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from duraloop.errors import (
    CorruptLogError,
    SessionExistsError,
    SessionFormatUnsupportedError,
    SessionNotFoundError,
    StoreError,
)
from duraloop.log import Event, SessionHeader

from .._backend import DamagedLog, StoredLog, WriteReceipt
from .._codec._records import RecordError
from .._files import write_private_copy
from .._snapshot import SnapshotRead
from .._writer import check_batch
from ._file import check_same_file, check_sessions, damaged_store_error
from ._locks import check_id, lock_session
from ._rows import (
    EVENT_COLUMNS,
    SESSION_COLUMNS,
    EventRow,
    SqlRow,
    decode_header_row,
    encode_rows,
    header_values,
)
from ._scan import rows_as_json_lines, scan_rows, stored_next_seq
from ._schema import check_schema, connect, store_id
from ._snapshots import read_snapshot_blob, read_with_snapshot, write_sqlite_snapshot

logger = logging.getLogger(__name__)
_INSERT_EVENT = (
    "INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op, "
    "ignorable) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_SESSION = (
    f"INSERT INTO sessions ({SESSION_COLUMNS}, incarnation, revision) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)"
)
_BUMP_REVISION = "UPDATE sessions SET revision = revision + 1 WHERE id = ?"


def _bytes_of(rows: Sequence[EventRow]) -> int:
    return sum(len(row.data) for row in rows)


class SqliteBackend:
    """Session logs in one SQLite database, schema 17 (docs/store.md#sqlite); dsh opens it too.

    The constructor opens and checks the database, creating a missing one (mode 0600), unless
    `create_on_open` is False: then a missing database is created by the first write and
    never by a read (E20: the CLI lists or loads from a new path without leaving a file).
    `close()` closes it. One connection serves every
    thread of the process, one call at a time. Every write first checks that the path still
    names the file held open (device and inode): a database deleted or replaced mid-run fails
    the write with `StoreError` instead of writing into an unlinked file (D14).

    Args:
        path: the database file, e.g. `~/.duraloop/sessions.db`.
        pack_chunks: store runs of >= 3 chunk events as packed rows.
        create_on_open: create a missing database now (True) or at the first write (False).

    Raises:
        StoreError: if the file is not a SQLite database, is damaged, is a symlink, not owned
            by the user, readable by others, in a group/world-writable directory, or a
            database of another application or schema.
    """

    def __init__(
        self, path: Path | str, *, pack_chunks: bool = True, create_on_open: bool = True
    ) -> None:
        self.path = Path(path).absolute()
        self.pack_chunks = pack_chunks
        self._connection: sqlite3.Connection | None = None
        self._closed = False
        self._mutex = threading.Lock()
        self._schema_version = 0
        self._identity = ""
        self._file_id = (0, 0)
        self._checked = False
        self._locks_dir = self.path.with_name(f"{self.path.name}.locks")
        self._snapshots_dir = self.path.with_name(f"{self.path.name}.snapshots")
        if create_on_open or os.path.lexists(self.path):
            self._open(create=create_on_open)

    def _open(self, *, create: bool) -> sqlite3.Connection:
        """Connect and validate; remember the file's identity (device, inode) for D14."""
        connection = connect(self.path, create=create)
        try:
            self._schema_version = check_schema(connection, self.path)
            info = os.stat(self.path)
            birth_ns = getattr(info, "st_birthtime_ns", 0)
            self._identity = (
                f"file:{info.st_dev}:{info.st_ino}:{birth_ns}"
                f":store:{store_id(connection, self.path)}"
            )
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            connection.close()
            raise damaged_store_error(self.path, "open", exc) from exc
        except OSError as exc:
            connection.close()
            raise StoreError(f"cannot stat the SQLite store {self.path}: {exc}") from exc
        except BaseException:
            connection.close()
            raise
        self._file_id = (info.st_dev, info.st_ino)
        self._connection = connection
        return connection

    def close(self) -> None:
        """Close the database connection; idempotent."""
        with self._mutex:
            self._closed = True
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _error(self, what: str, exc: sqlite3.Error | UnicodeDecodeError) -> StoreError:
        return damaged_store_error(self.path, what, exc)

    def _missing(self) -> bool:
        """Whether no database is open and none exists at the path (nothing is stored)."""
        return self._connection is None and not self._closed and not os.path.lexists(self.path)

    @contextlib.contextmanager
    def _transaction(self, what: str, *, write: bool) -> Iterator[sqlite3.Connection]:
        """Run the body in one transaction (`BEGIN IMMEDIATE` to write); roll back on error.

        The database is opened on first use: a writer creates a missing file, a reader only
        opens an existing one (readers check `_missing()` first: reading never creates a
        store file, E20).
        """
        with self._mutex:
            if self._closed:
                raise StoreError(f"SQLite store {self.path} is closed")
            connection = self._connection
            if connection is None:
                connection = self._open(create=write)
            try:
                connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                if write:
                    check_same_file(self.path, self._file_id, what)
                    self._check_schema(connection)
                    if not self._checked:  # once per open: never write into a damaged index
                        check_sessions(connection, self.path, what)
                        self._checked = True
                yield connection
                connection.execute("COMMIT")
            except BaseException as exc:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error | UnicodeDecodeError):
                    raise self._error(what, exc) from exc
                raise

    def _check_schema(self, connection: sqlite3.Connection) -> None:
        """Validate the schema again if it changed since it was last validated."""
        current = int(connection.execute("PRAGMA schema_version").fetchone()[0])
        if current != self._schema_version:
            self._schema_version = check_schema(connection, self.path)

    def _header(self, connection: sqlite3.Connection, session_id: str) -> SessionHeader:
        # Every read checks the small sessions b-trees: a damaged id must not read as valid.
        check_sessions(connection, self.path, f'read session "{session_id}"')
        row = connection.execute(
            f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise SessionNotFoundError(session_id)
        try:
            return decode_header_row(row)
        except RecordError as exc:
            raise CorruptLogError(
                f'session "{session_id}" has an invalid sessions row ({exc})', path=str(self.path)
            ) from exc

    @staticmethod
    def _rows(connection: sqlite3.Connection, session_id: str) -> list[SqlRow]:
        return connection.execute(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()

    def read(self, session_id: str) -> StoredLog:
        """Read a session's header and rows in one snapshot; see `StorageBackend.read`.

        `torn` is the seq of the first row of a torn tail and `torn_bytes` its row count.
        """
        if self._missing():
            raise SessionNotFoundError(session_id)
        with self._transaction(f'read session "{session_id}"', write=False) as connection:
            header = self._header(connection, session_id)
            try:
                rows = self._rows(connection, session_id)
            except sqlite3.DatabaseError as exc:
                if isinstance(exc, sqlite3.OperationalError):
                    raise  # below: a damaged events page; the other sessions may still read
                raise CorruptLogError(
                    f'session "{session_id}": its events rows cannot be read ({exc}); the database '
                    "is damaged: restore it from a backup, or run `sqlite3 FILE .recover`",
                    path=str(self.path),
                ) from exc
        scan = scan_rows(session_id, rows, path=self.path)
        return StoredLog(header, scan.events, scan.torn, None, scan.torn_rows, cut=scan.cut)

    def exists(self, session_id: str) -> bool:
        """Return whether the session has a row (it was materialized)."""
        if self._missing():
            return False
        with self._transaction(f'look up session "{session_id}"', write=False) as connection:
            found = connection.execute(
                "SELECT 1 FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if found is None:  # a damaged index must not make a stored session look new
                check_sessions(connection, self.path, f'look up session "{session_id}"')
        return found is not None

    def revision(self, session_id: str) -> str | None:
        """Return `<store identity>:incarnation:<uuid>:revision:<n>`; see `StorageBackend.revision`.

        The store identity is `file:<dev>:<ino>:<birthtime ns>:store:<store_id>` (birth time
        0 where the platform does not report it). None when the session is not stored.
        """
        if self._missing():
            return None
        with self._transaction(
            f'read the revision of session "{session_id}"', write=False
        ) as connection:
            row = connection.execute(
                "SELECT incarnation, revision FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
        if row is None:
            return None
        incarnation = bytes(row[0]).decode(errors="backslashreplace")
        return f"{self._identity}:incarnation:{incarnation}:revision:{row[1]}"

    def materialize(self, header: SessionHeader, batch: Sequence[Event]) -> WriteReceipt:
        """Insert the session row and first batch in one transaction (`StorageBackend`)."""
        check_id(header.id)
        check_batch(header.id, batch, 0)
        rows = encode_rows(header.id, batch, pack_chunks=self.pack_chunks)
        with self._transaction(f'create session "{header.id}"', write=True) as connection:
            if connection.execute("SELECT 1 FROM sessions WHERE id = ?", (header.id,)).fetchone():
                raise SessionExistsError(
                    f'session "{header.id}" already has a persisted log; resume it instead'
                )
            try:
                connection.execute(_INSERT_SESSION, (*header_values(header), str(uuid.uuid4())))
            except sqlite3.IntegrityError as exc:  # the lookup missed a row that exists
                raise SessionExistsError(
                    f'session "{header.id}" already has a row in {self.path} that could not be '
                    f"found ({exc}): the database is damaged; nothing was written. Restore it "
                    f"from a backup, or run `sqlite3 {self.path} .recover`"
                ) from exc
            connection.executemany(_INSERT_EVENT, rows)
            connection.execute(_BUMP_REVISION, (header.id,))
        return WriteReceipt(_bytes_of(rows), 1)

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
            if not connection.execute(
                "SELECT 1 FROM sessions WHERE id = ?", (session_id,)
            ).fetchone():
                raise SessionNotFoundError(session_id)
            check_batch(session_id, batch, stored_next_seq(connection, session_id, path=self.path))
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
        copy: str | None = None
        with self._transaction(f'repair session "{session_id}"', write=True) as connection:
            self._header(connection, session_id)
            if torn is not None:
                stored = self._rows(connection, session_id)
                current = scan_rows(session_id, stored, path=self.path).torn
                if current != torn:
                    raise StoreError(
                        f'the torn tail of session "{session_id}" changed since it was read (it '
                        f"started at seq {torn}, now {current}); load the session again"
                    )
                # Kept before the rows go (D12); a failed copy aborts the whole repair.
                copy = write_private_copy(self.path, rows_as_json_lines(session_id, stored, torn))
                deleted = connection.execute(
                    "DELETE FROM events WHERE session_id = ? AND seq >= ?", (session_id, torn)
                ).rowcount
            check_batch(session_id, events, stored_next_seq(connection, session_id, path=self.path))
            connection.executemany(_INSERT_EVENT, rows)
            connection.execute(_BUMP_REVISION, (session_id,))
        if deleted:
            logger.warning(
                "session %s: deleted a torn tail of %d rows from seq %d (kept in %s)",
                session_id,
                deleted,
                torn,
                copy,
            )
        return WriteReceipt(_bytes_of(rows), 3 if copy else 1, copy)

    def read_snapshot(self, session_id: str) -> SnapshotRead | None:
        """Read a session through its snapshot (`_snapshots`); see `StorageBackend`."""
        if self._missing():
            raise SessionNotFoundError(session_id)
        blob = read_snapshot_blob(self._snapshots_dir, session_id)
        if blob is None:
            return None
        with self._transaction(f'read session "{session_id}"', write=False) as connection:
            header = self._header(connection, session_id)
            return read_with_snapshot(connection, self.path, header, blob, reader=self._reading)

    def _reading(self, decode: Callable[[sqlite3.Connection], list[Event]]) -> list[Event]:
        with self._transaction("read a snapshot's prefix", write=False) as connection:
            return decode(connection)

    def merge_frames(self, session_id: str) -> int:
        """Store no frames (see `StorageBackend.merge_frames`): always 0."""
        return 0

    def write_snapshot(self, session_id: str, events: int, body: bytes) -> bool:
        """Write a snapshot bound to the stored rows; see `StorageBackend.write_snapshot`."""
        with self._transaction(f'snapshot session "{session_id}"', write=False) as connection:
            return write_sqlite_snapshot(
                connection, self.path, self._snapshots_dir, session_id, events, body
            )

    def list_headers(self) -> list[SessionHeader | DamagedLog]:
        """Return every session row's header, oldest first; see `StorageBackend.list_headers`."""
        if self._missing():
            return []
        with self._transaction("list sessions", write=False) as connection:
            rows = connection.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions ORDER BY created_at, id"
            ).fetchall()
            check_sessions(connection, self.path, "list sessions")
        headers: list[SessionHeader | DamagedLog] = []
        for row in rows:
            try:
                headers.append(decode_header_row(row))
            except (RecordError, SessionFormatUnsupportedError) as exc:
                session_id = (
                    bytes(row[0]).decode(errors="replace")
                    if isinstance(row[0], bytes)
                    else repr(row[0])
                )
                headers.append(DamagedLog(session_id, f"invalid sessions row ({exc})"))
        return headers

    def lock(self, session_id: str, *, cwd: str | None) -> Callable[[], None]:
        """Take an exclusive `flock` on the session's file in `<db>.locks/` (`StorageBackend`)."""
        del cwd
        return lock_session(self._locks_dir, session_id)
