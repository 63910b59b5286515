"""Open a SQLite session store: file checks, pragmas, identity and schema 17 (docs/store.md#sqlite).

The file checks (`_file`) come first: a SQLite database, a regular file owned by the
user, private. A missing file is created with mode 0600 when asked. Every connection sets
the pragmas of 6.8. A pristine database is initialized in one transaction; a database with
another `application_id`, another `user_version`, or unversioned but non-empty, is refused
without being changed (there is no migration).
"""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

from duraloop.errors import StoreError

from ._file import check_file, damaged_store_error

APPLICATION_ID = 0x44534850
"""`PRAGMA application_id` of a dsh/duraloop session store: "DSHP" (1146308688)."""
SCHEMA_VERSION = 17
"""`PRAGMA user_version` of the schema this build reads and writes."""
BUSY_TIMEOUT_MS = 5000

_OTHER_JOURNAL_MODES = ("delete", "truncate", "persist")
_CONNECTION_PRAGMAS = (
    "PRAGMA trusted_schema=OFF",
    "PRAGMA mmap_size=0",
    "PRAGMA foreign_keys=ON",
    "PRAGMA synchronous=FULL",
    f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}",
)

SCHEMA_DDL = (
    """CREATE TABLE persistence_state (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  store_id TEXT NOT NULL
) STRICT""",
    """CREATE TABLE sessions (
  id TEXT PRIMARY KEY,
  version INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  cwd TEXT,
  parent_session TEXT,
  seed_length INTEGER,
  origin TEXT,
  delegation_depth INTEGER,
  agent_preset TEXT,
  incarnation TEXT NOT NULL,
  revision INTEGER NOT NULL
) STRICT""",
    """CREATE TABLE events (
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  time INTEGER NOT NULL,
  data ANY NOT NULL,
  source_event_seqs ANY,
  surface_op TEXT,
  ignorable INTEGER CHECK (ignorable IS NULL OR ignorable IN (0, 1)),
  PRIMARY KEY (session_id, seq)
) STRICT""",
)

REQUIRED_COLUMNS = {
    "persistence_state": {"singleton", "store_id"},
    "sessions": {
        "id",
        "version",
        "created_at",
        "cwd",
        "parent_session",
        "seed_length",
        "origin",
        "delegation_depth",
        "agent_preset",
        "incarnation",
        "revision",
    },
    "events": {
        "session_id",
        "seq",
        "type",
        "time",
        "data",
        "source_event_seqs",
        "surface_op",
        "ignorable",
    },
}


def connect(path: Path, *, create: bool = True) -> sqlite3.Connection:
    """Open the store: file checks, pragmas, identity check, schema initialization.

    Args:
        path: the database file.
        create: create a missing file; False opens an existing one only.

    Returns:
        An autocommit connection (transactions are explicit), usable from any thread under
        the caller's lock; text columns come back as bytes (decoded where they are read).

    Raises:
        StoreError: if the file checks fail, the database belongs to another application or
            schema version, is damaged (SQLite's "database disk image is malformed", a
            schema or pragma text that is not UTF-8), or SQLite fails.
    """
    check_file(path, create=create)
    try:
        connection = sqlite3.connect(
            f"{path.as_uri()}?mode={'rwc' if create else 'rw'}",
            uri=True,
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,
            check_same_thread=False,
        )
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the SQLite store {path}: {exc}") from exc
    try:
        connection.text_factory = bytes
        for pragma in _CONNECTION_PRAGMAS:
            connection.execute(pragma)
        _check_identity(connection, path)
        _use_wal(connection)
        _initialize(connection, path)
        check_schema(connection, path)
    except (sqlite3.Error, UnicodeDecodeError) as exc:
        connection.close()
        raise damaged_store_error(path, "open", exc) from exc
    except BaseException:
        connection.close()
        raise
    return connection


def _use_wal(connection: sqlite3.Connection) -> None:
    """Switch to WAL; keep another mode 6.8 allows if another process holds the file now."""
    mode = bytes(connection.execute("PRAGMA journal_mode").fetchone()[0]).decode().lower()
    if mode == "wal":
        return
    try:
        connection.execute("PRAGMA journal_mode=WAL")
    except sqlite3.OperationalError:
        if mode not in _OTHER_JOURNAL_MODES:
            raise


def _pragma_int(connection: sqlite3.Connection, name: str) -> int:
    value = connection.execute(f"PRAGMA {name}").fetchone()[0]
    return int(value)


def _object_count(connection: sqlite3.Connection) -> int:
    return int(connection.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0])


def _check_identity(connection: sqlite3.Connection, path: Path) -> None:
    """Refuse a foreign, other-version or unversioned non-empty database (nothing changed)."""
    application_id = _pragma_int(connection, "application_id")
    user_version = _pragma_int(connection, "user_version")
    if application_id == 0 and user_version == 0:
        objects = _object_count(connection)
        if objects:
            raise StoreError(
                f"{path} is a SQLite database without a session-store application id and with "
                f"{objects} schema objects; it is not a session store — choose another file"
            )
        return
    if application_id != APPLICATION_ID:
        raise StoreError(
            f"{path} belongs to another application (application_id 0x{application_id:08X}, a "
            f"session store has 0x{APPLICATION_ID:08X}); choose another file"
        )
    if user_version != SCHEMA_VERSION:
        raise StoreError(
            f"the SQLite store {path} has schema version {user_version}, but this build reads "
            f"only version {SCHEMA_VERSION} and ships no migration"
        )


def _initialize(connection: sqlite3.Connection, path: Path) -> None:
    """Create schema 17 in one transaction if the database is still pristine."""
    if _pragma_int(connection, "application_id") == APPLICATION_ID:
        return
    connection.execute("BEGIN IMMEDIATE")
    try:
        # Another process may have initialized it while this one waited for the write lock.
        if _pragma_int(connection, "application_id") == 0 and _object_count(connection) == 0:
            for statement in SCHEMA_DDL:
                connection.execute(statement)
            connection.execute(
                "INSERT INTO persistence_state (singleton, store_id) VALUES (1, ?)",
                (str(uuid.uuid4()),),
            )
            connection.execute(f"PRAGMA application_id={APPLICATION_ID}")
            connection.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    _check_identity(connection, path)


def check_schema(connection: sqlite3.Connection, path: Path) -> int:
    """Check the three tables and their columns exist; return `PRAGMA schema_version`.

    Raises:
        StoreError: naming the missing table or columns.
    """
    for table, required in REQUIRED_COLUMNS.items():
        rows = connection.execute("SELECT name FROM pragma_table_info(?)", (table,)).fetchall()
        columns = {bytes(row[0]).decode() for row in rows}
        if not columns:
            raise StoreError(f"the SQLite store {path} has no `{table}` table; it is damaged")
        missing = required - columns
        if missing:
            raise StoreError(
                f"the `{table}` table of the SQLite store {path} lacks columns {sorted(missing)}"
            )
    return _pragma_int(connection, "schema_version")


def store_id(connection: sqlite3.Connection, path: Path) -> str:
    """Return the store's random id from `persistence_state`.

    Raises:
        StoreError: if the singleton row is missing.
    """
    row = connection.execute(
        "SELECT store_id FROM persistence_state WHERE singleton = 1"
    ).fetchone()
    if row is None or not isinstance(row[0], bytes):
        raise StoreError(f"the SQLite store {path} has no persistence_state row; it is damaged")
    return row[0].decode()
