"""Enqueue a drive from any process (no DBOS launch): `DBOSClient` (docs/workers.md#on-dbos)."""

from __future__ import annotations

from ..errors import StoreError

QUEUE = "duraloop-turns"
WORKFLOW = "duraloop.drive_session"
APPLICATION = "duraloop"


def system_schema(schema: str) -> str:
    """The DBOS system schema of a store in `schema`."""
    return f"{schema}_dbos"


def migrate(url: str, schema: str) -> None:
    """Create or migrate DBOS's system tables for the store (idempotent).

    Raises:
        StoreError: if DBOS cannot reach or migrate the database.
    """
    from dbos import DBOS

    try:
        DBOS.migrate(url, schema=system_schema(schema))
    except Exception as exc:
        raise StoreError(f"cannot prepare DBOS's tables: {' '.join(str(exc).split())}") from exc


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
        raise StoreError(f"cannot enqueue the turn: {' '.join(str(exc).split())}") from exc
    finally:
        client.destroy()
