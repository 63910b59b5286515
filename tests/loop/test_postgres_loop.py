"""The loop on the PostgreSQL store: turns, resume on another store object, and fencing.

See docs/store.md#postgresql, #leases; Laws 8 and 11 of docs/architecture.md#laws. Two
`PostgresStore` objects on one schema are two machines' writers. A writer whose lease was
taken over (its expiry is moved into the past: what the database's clock shows for a writer
that stalled past its period) stops its next turn with `WriterFencedError`, and not one
event of that turn lands; the new writer's session is untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from duraloop.errors import WriterFencedError
from duraloop.llm import ScriptedModel
from duraloop.log import Event, Session
from duraloop.loop import SessionSetup, resume_session, start_session
from duraloop.store import PostgresStore
from duraloop.testing import assert_log_valid
from duraloop.tools import tool
from store._postgres import POSTGRES_URL, drop_schema, fresh_schema, require_postgres

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@tool
def echo(text: str) -> str:
    """Return the text.

    Args:
        text: what to return.
    """
    return text


@pytest.fixture
def stores() -> Iterator[tuple[PostgresStore, PostgresStore]]:
    require_postgres()
    schema = fresh_schema()
    first = PostgresStore(POSTGRES_URL, schema=schema)
    second = PostgresStore(POSTGRES_URL, schema=schema)
    try:
        yield first, second
    finally:
        first.close()
        second.close()
        drop_schema(schema)


def _setup(store: PostgresStore, cwd: Path, script: list[dict[str, Any]]) -> SessionSetup:
    return SessionSetup(store=store, model=ScriptedModel(script), tools=[echo], cwd=cwd)


def _expire(store: PostgresStore, session_id: str) -> None:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(
            sql.SQL(
                "UPDATE {s}.leases SET expires_at = now() - interval '1 s' WHERE session_id = %s"
            ).format(s=sql.Identifier(store.postgres.schema)),
            (session_id,),
        )


def _valid(events: list[Event]) -> None:
    assert_log_valid(Session("check", seed=events))


CALL = {"tool_calls": [{"id": "c1", "name": "echo", "arguments": {"text": "x"}}]}


async def test_a_session_runs_and_resumes_on_another_store_object(
    stores: tuple[PostgresStore, PostgresStore], tmp_path: Path
) -> None:
    first, second = stores
    loop = start_session(_setup(first, tmp_path, [CALL, {"text": "one"}]))
    assert (await loop.run_turn("go")).text == "one"
    loop.close()
    resumed, report = resume_session(loop.session.id, _setup(second, tmp_path, [{"text": "two"}]))
    assert not report.repaired
    assert (await resumed.run_turn("again")).text == "two"
    resumed.close()
    events = first.read(loop.session.id)[1]
    _valid(events)
    assert [e.data["turn"] for e in events if e.type == "turn/end"] == [1, 2]


async def test_a_writer_whose_lease_was_taken_stops_its_turn_and_writes_nothing(
    stores: tuple[PostgresStore, PostgresStore], tmp_path: Path
) -> None:
    stalled_store, taker_store = stores
    stalled = start_session(_setup(stalled_store, tmp_path, [{"text": "one"}, CALL]))
    await stalled.run_turn("first")
    session_id = stalled.session.id
    _expire(stalled_store, session_id)
    taker, _ = resume_session(session_id, _setup(taker_store, tmp_path, [{"text": "taken"}]))
    assert (await taker.run_turn("mine now")).text == "taken"
    stored = taker_store.backend.read(session_id).events
    with pytest.raises(WriterFencedError) as caught:
        await stalled.run_turn("second")
    assert caught.value.holder == taker_store.postgres.owner
    assert taker_store.backend.read(session_id).events == stored
    taker.close()
    with pytest.raises(WriterFencedError):
        stalled.close()
    _valid(taker_store.backend.read(session_id).events)
