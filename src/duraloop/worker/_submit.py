"""`submit`: queue a turn of a session for the workers (docs/workers.md#submit).

The prompt is recorded in the store's `submissions` table, durably, before the drive of its
session is enqueued on DBOS's queue (partitioned by session id); both are done when
`submit` returns. A crash between the two leaves a queued row that a worker's sweep
enqueues a takeover period later; one drive runs every queued submission of its session.
The session need not exist yet: the first drive creates it.
"""

from __future__ import annotations

import uuid

from ..errors import StoreError
from ..store import PostgresStore, check_session_id
from ._dbos_client import enqueue_drive, migrate, one_line, system_schema
from ._tables import ensure_tables, insert_submission


def submit(url: str, session_id: str, prompt: str, *, schema: str = "duraloop") -> str:
    """Queue one turn of `session_id` with `prompt`; return the submission id.

    Args:
        url: the PostgreSQL URL of the store (libpq form).
        session_id: the session (created by its first drive if it does not exist).
        prompt: the user's prompt for the turn.
        schema: the store's PostgreSQL schema.

    Raises:
        UsageError: if the session id or the prompt is invalid (empty).
        StoreError: if the database cannot be reached.
    """
    from ..errors import UsageError

    if not prompt.strip():
        raise UsageError("the prompt is empty: give the turn something to do")
    return _queue(url, session_id, prompt, "turn", schema)


def submit_continuation(url: str, session_id: str, *, schema: str = "duraloop") -> str:
    """Queue the continuation of a paused turn whose approval was decided; return its id.

    A worker continues the turn (`AgentLoop.continue_turn`): the decided call runs or gets
    its rejection, and the turn goes on. Nothing happens if the turn was continued before.

    Raises:
        UsageError: if the session id is invalid.
        StoreError: if the database cannot be reached.
    """
    return _queue(url, session_id, "", "continue", schema)


def _queue(url: str, session_id: str, prompt: str, kind: str, schema: str) -> str:
    import psycopg

    check_session_id(session_id)
    submission_id = str(uuid.uuid4())
    with PostgresStore(url, schema=schema, pool_size=1) as store:
        try:
            with store.postgres.connection() as connection:
                ensure_tables(connection, schema)
                insert_submission(connection, schema, submission_id, session_id, prompt, kind)
        except psycopg.Error as exc:
            raise StoreError(f"cannot record the submission: {one_line(exc)}") from exc
    migrate(url, schema)
    enqueue_drive(url, schema, session_id, workflow_id=f"duraloop-{submission_id}")
    return submission_id


def prepare_database(url: str, *, schema: str = "duraloop") -> str:
    """Create the store's, the workers' and DBOS's tables if missing; return DBOS's schema.

    `duraloop db init` runs it, so the first `submit` or worker does not wait on DBOS's
    migrations (many, about a second each on a new database).

    Raises:
        StoreError: if the database cannot be reached or a schema holds another version.
    """
    with PostgresStore(url, schema=schema, pool_size=1) as store:
        with store.postgres.connection() as connection:
            ensure_tables(connection, schema)
    migrate(url, schema)
    return system_schema(schema)
