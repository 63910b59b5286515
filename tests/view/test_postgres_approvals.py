"""On a PostgreSQL store the viewer's decision also queues the turn's continuation (workers)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from duraloop.cli._stores import parse_store_spec
from duraloop.cli._view_command import view_decider
from duraloop.log import pending_approval
from duraloop.view import create_app
from store._postgres import POSTGRES_URL, drop_schema

from ._support import TOKEN, auth, paused_session, serve


@pytest.fixture
def schema(pg_schema: str) -> Iterator[str]:
    """A fresh schema; DBOS's, made by the first submission, is dropped with it."""
    try:
        yield pg_schema
    finally:
        drop_schema(f"{pg_schema}_dbos")


def test_a_decision_on_a_postgresql_store_queues_the_continuation(
    schema: str, workspace: Path
) -> None:
    import psycopg

    from duraloop.store import PostgresStore

    spec = parse_store_spec(f"{POSTGRES_URL}?schema={schema}")
    with PostgresStore(POSTGRES_URL, schema=schema) as store:
        paused_session(store, workspace)
        app = create_app(store, token=TOKEN, decide=view_decider(store, spec))
        with serve(app) as client:
            origin = str(client.base_url).rstrip("/")
            answer = client.post(
                "/api/sessions/paused/approvals/write-1",
                json={"allow": True, "feedback": None},
                headers={**auth(), "Origin": origin},
            )
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"ok": True, "continuation": "queued"}
        decided = pending_approval(store.read("paused")[1])
    assert decided is not None and decided.outcome == "allowed-once"
    with psycopg.connect(POSTGRES_URL) as connection:
        rows = connection.execute(
            f'SELECT session_id, kind, state FROM "{schema}".submissions'
        ).fetchall()
    assert rows == [("paused", "continue", "queued")]
