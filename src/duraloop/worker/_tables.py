"""The worker layer's tables, beside the PostgreSQL store's (docs/workers.md#tables).

- `submissions`: one row per submitted turn: its `id`, `session_id`, the `prompt` text, its
  `kind` (`turn`, or `continue`: carry out a decided approval of a paused turn), a
  `state` (`queued`, then `running` with the `turn` number it got, then `done` with the
  turn's `outcome`), the `executor` that ran it, and when it was created. A submission is
  durable here before `submit` returns; the DBOS workflow that drives its session is
  enqueued after, and a worker re-enqueues a queued row whose workflow is missing.
- `workers`: one row per worker process (its DBOS executor id) with a heartbeat
  `expires_at`, by the database's clock; a worker whose heartbeat expired is dead to the
  others, which recover its workflows (`_takeover`).

Every statement names the store's schema; `ensure_tables` creates what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..store import postgres_statement as statement

if TYPE_CHECKING:
    import psycopg

_DDL: Final = (
    """CREATE TABLE IF NOT EXISTS {s}.submissions (
        id text PRIMARY KEY,
        session_id text NOT NULL,
        prompt text NOT NULL,
        kind text NOT NULL DEFAULT 'turn',
        state text NOT NULL DEFAULT 'queued',
        turn bigint,
        outcome text,
        executor text,
        created timestamptz NOT NULL DEFAULT now(),
        ordinal bigserial NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS submissions_session ON {s}.submissions (session_id, ordinal)",
    """CREATE TABLE IF NOT EXISTS {s}.workers (
        executor text PRIMARY KEY,
        expires_at timestamptz NOT NULL,
        stopped boolean NOT NULL DEFAULT false
    )""",
)


@dataclass(frozen=True)
class Submission:
    """A submitted turn, as its row stands.

    Args:
        id: the submission id (also its DBOS workflow id's suffix).
        session_id: the session it is a turn of.
        prompt: the user's prompt (empty for a continuation).
        kind: `turn` (run a turn with the prompt) or `continue` (continue the paused turn,
            whose waiting call was decided).
        state: `queued`, `running` or `done`.
        turn: the turn number it got when it started running, or None.
        outcome: for `done`: the turn's end (`completed`, `aborted`, ...), or `continued`
            when a worker failure interrupted it and a continuation turn ran.
    """

    id: str
    session_id: str
    prompt: str
    kind: str
    state: str
    turn: int | None
    outcome: str | None


def ensure_tables(connection: psycopg.Connection[Any], schema: str) -> None:
    """Create the worker tables in `schema` (a store's, already created) if missing."""
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (0x776B7273,))  # "wkrs"
        for text in _DDL:
            connection.execute(statement(text, schema))


def insert_submission(
    connection: psycopg.Connection[Any],
    schema: str,
    submission_id: str,
    session_id: str,
    prompt: str,
    kind: str = "turn",
) -> None:
    """Record a queued submission durably (committed when this returns)."""
    with connection.transaction():
        connection.execute(
            statement(
                "INSERT INTO {s}.submissions (id, session_id, prompt, kind) "
                "VALUES (%s, %s, %s, %s)",
                schema,
            ),
            (submission_id, session_id, prompt, kind),
        )


def unfinished(
    connection: psycopg.Connection[Any], schema: str, session_id: str
) -> list[Submission]:
    """The session's submissions not done yet, oldest first."""
    rows = connection.execute(
        statement(
            "SELECT id, session_id, prompt, kind, state, turn, outcome FROM {s}.submissions "
            "WHERE session_id = %s AND state <> 'done' ORDER BY ordinal",
            schema,
        ),
        (session_id,),
    ).fetchall()
    connection.commit()
    return [
        Submission(str(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), r[5], r[6]) for r in rows
    ]


def mark(
    connection: psycopg.Connection[Any],
    schema: str,
    submission_id: str,
    *,
    state: str,
    turn: int | None = None,
    outcome: str | None = None,
    executor: str | None = None,
) -> None:
    """Move a submission to `state` (committed when this returns)."""
    with connection.transaction():
        connection.execute(
            statement(
                "UPDATE {s}.submissions SET state = %s, turn = coalesce(%s, turn), "
                "outcome = coalesce(%s, outcome), executor = coalesce(%s, executor) WHERE id = %s",
                schema,
            ),
            (state, turn, outcome, executor, submission_id),
        )


def queued_sessions(
    connection: psycopg.Connection[Any], schema: str, older_than: float
) -> list[str]:
    """Sessions with a submission still queued `older_than` seconds after it was made."""
    rows = connection.execute(
        statement(
            "SELECT DISTINCT session_id FROM {s}.submissions WHERE state = 'queued' "
            "AND created < now() - make_interval(secs => %s)",
            schema,
        ),
        (older_than,),
    ).fetchall()
    connection.commit()
    return [str(row[0]) for row in rows]


def beat(connection: psycopg.Connection[Any], schema: str, executor: str, seconds: float) -> None:
    """Renew (or create) this worker's heartbeat for `seconds`."""
    with connection.transaction():
        connection.execute(
            statement(
                "INSERT INTO {s}.workers (executor, expires_at) VALUES "
                "(%(e)s, now() + make_interval(secs => %(t)s)) ON CONFLICT (executor) DO UPDATE "
                "SET expires_at = EXCLUDED.expires_at, stopped = false",
                schema,
            ),
            {"e": executor, "t": seconds},
        )


def stop_beating(connection: psycopg.Connection[Any], schema: str, executor: str) -> None:
    """Mark this worker stopped (drained): its workflows are done or handed back."""
    with connection.transaction():
        connection.execute(
            statement("UPDATE {s}.workers SET stopped = true WHERE executor = %s", schema),
            (executor,),
        )


def dead_workers(connection: psycopg.Connection[Any], schema: str) -> list[str]:
    """Workers whose heartbeat expired without a clean stop."""
    rows = connection.execute(
        statement(
            "SELECT executor FROM {s}.workers WHERE expires_at < now() AND NOT stopped", schema
        )
    ).fetchall()
    connection.commit()
    return [str(row[0]) for row in rows]


def forget_worker(connection: psycopg.Connection[Any], schema: str, executor: str) -> None:
    """Drop a dead worker's row once its workflows were recovered."""
    with connection.transaction():
        connection.execute(
            statement("DELETE FROM {s}.workers WHERE executor = %s AND expires_at < now()", schema),
            (executor,),
        )


def count_queued(connection: psycopg.Connection[Any], schema: str) -> int:
    """How many submissions are not done yet (queued or running), store-wide."""
    row = connection.execute(
        statement("SELECT count(*) FROM {s}.submissions WHERE state <> 'done'", schema)
    ).fetchone()
    connection.commit()
    return int(row[0]) if row else 0
