"""Enqueue a drive from any process (no DBOS launch): `DBOSClient` (docs/workers.md#on-dbos)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..errors import StoreError

if TYPE_CHECKING:
    import psycopg

QUEUE = "duraloop-turns"
WORKFLOW = "duraloop.drive_session"
APPLICATION = "duraloop"


def system_schema(schema: str) -> str:
    """The DBOS system schema of a store in `schema`."""
    return f"{schema}_dbos"


def one_line(exc: BaseException) -> str:
    """An error's message on one line (libpq's and SQLAlchemy's span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


_MIGRATION_LOCK = 0x64626F73  # "dbos": DBOS's migrations are not safe to run concurrently


def migrate(url: str, schema: str) -> None:
    """Create or migrate DBOS's system tables for the store, one process at a time.

    DBOS's migrations fail when two processes run them at once (`tuple concurrently
    updated`), as a `submit` and a starting worker would: a session-level advisory lock
    serializes them; workers then launch DBOS without migrating. The lock is polled with
    `pg_try_advisory_lock`, never waited for in SQL: a statement blocked on it keeps a
    snapshot open, and DBOS's `CREATE INDEX CONCURRENTLY` waits for every older snapshot,
    so the holder would wait on the waiter forever.

    Raises:
        StoreError: if DBOS cannot reach or migrate the database.
    """
    import psycopg
    from dbos import DBOS

    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as connection:
            _lock(connection)
            try:
                DBOS.migrate(url, schema=system_schema(schema))
            finally:
                connection.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))
    except Exception as exc:
        raise StoreError(f"cannot prepare DBOS's tables: {one_line(exc)}") from exc


def _lock(connection: psycopg.Connection[Any], timeout: float = 300.0) -> None:
    """Take the migration lock, polling (see `migrate`).

    Raises:
        StoreError: if another process holds it for `timeout` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        row = connection.execute("SELECT pg_try_advisory_lock(%s)", (_MIGRATION_LOCK,)).fetchone()
        if row is not None and row[0]:
            return
        if time.monotonic() > deadline:
            raise StoreError(f"DBOS's migrations are held by another process for {timeout:.0f} s")
        time.sleep(0.2)


def enqueue_drive(url: str, schema: str, session_id: str, *, workflow_id: str) -> None:
    """Enqueue `duraloop.drive_session(session_id)` on the session's partition.

    Raises:
        StoreError: if DBOS cannot enqueue it.
    """
    from dbos import DBOSClient

    client = DBOSClient(
        system_database_url=url,
        dbos_system_schema=system_schema(schema),
        application_name=APPLICATION,
    )
    try:
        client.enqueue(
            {
                "queue_name": QUEUE,
                "workflow_name": WORKFLOW,
                "queue_partition_key": session_id,
                "workflow_id": workflow_id,
            },
            session_id,
        )
    except Exception as exc:
        raise StoreError(f"cannot enqueue the turn: {one_line(exc)}") from exc
    finally:
        client.destroy()
