"""The PostgreSQL store's single writer across processes: leases and fencing (Laws 8 and 11).

See docs/store.md#leases, #postgresql. Two `PostgresStore` objects on one schema are two
writers as two machines would be (each has its own owner name and connections). A lease
that expired is simulated by moving its `expires_at` into the past, which is what the
database's clock shows a writer that stalled (SIGSTOP, a partition) past its period;
`tests/test_postgres_processes.py` does it with real processes.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from psycopg import sql

from duraloop.errors import SessionLockedError, StoreError, WriterFencedError
from duraloop.log import Session
from duraloop.store import PostgresStore

from ._builders import meta, one_turn_log, te, ts
from ._postgres import POSTGRES_URL, require_postgres


@pytest.fixture
def schema(pg_schema: str) -> str:
    return pg_schema


def _store(schema: str, **options: Any) -> PostgresStore:
    return PostgresStore(POSTGRES_URL, schema=schema, **options)


def _sql(schema: str, text: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        cursor = connection.execute(sql.SQL(text).format(s=sql.Identifier(schema)), params)
        return cursor.fetchall() if cursor.description else []


def _expire(schema: str, session_id: str) -> None:
    _sql(
        schema,
        "UPDATE {s}.leases SET expires_at = now() - interval '1 s' WHERE session_id = %s",
        session_id,
    )


def _writer_tokens(schema: str, session_id: str) -> list[tuple[int, int]]:
    return [
        (int(seq), int(token))
        for seq, token in _sql(
            schema,
            "SELECT seq, writer_token FROM {s}.events WHERE session_id = %s ORDER BY seq",
            session_id,
        )
    ]


def test_a_second_writer_is_refused_while_the_lease_is_held(schema: str) -> None:
    with _store(schema) as first, _store(schema) as second:
        first.backend.materialize(meta("s"), one_turn_log())
        loaded = first.load("s")
        with first.open_writer(Session("s", seed=loaded.events, header=loaded.header)):
            with pytest.raises(SessionLockedError) as caught:
                second.load("s")
            assert first.postgres.owner in str(caught.value)
            assert "s left" in str(caught.value)
        assert second.load("s").events[-1].type == "session/end-seed"


def test_a_released_lease_is_taken_at_once_with_a_larger_token(schema: str) -> None:
    with _store(schema) as first, _store(schema) as second:
        first.backend.materialize(meta("s"), one_turn_log())
        release = first.backend.lock("s", cwd=None)
        token = first.postgres.lease("s").token  # type: ignore[union-attr]
        release()
        release_second = second.backend.lock("s", cwd=None)
        assert second.postgres.lease("s").token == token + 1  # type: ignore[union-attr]
        release_second()


def test_a_writer_whose_lease_was_taken_writes_nothing_more(schema: str) -> None:
    with _store(schema) as stalled, _store(schema) as taker:
        stalled.backend.materialize(meta("s"), one_turn_log())
        loaded = stalled.load("s")
        session = Session("s", seed=loaded.events, header=loaded.header)
        writer = stalled.open_writer(session)
        writer.flush()
        old = stalled.postgres.lease("s").token  # type: ignore[union-attr]
        _expire(schema, "s")  # the stalled writer's lease ran out
        resumed = taker.load("s")
        assert resumed.events[-1].type == "session/end-seed"  # the stalled writer's claim
        end = len(resumed.events)
        taker.append("s", [ts(end, 2), te(end + 1, 2)])
        stored = taker.backend.read("s").events
        session.append("turn/start", {"turn": 2})
        with pytest.raises(WriterFencedError) as caught:
            writer.flush()
        assert caught.value.token == old and caught.value.holder is None
        assert f"lease (token {old}) was taken over" in str(caught.value)
        assert taker.backend.read("s").events == stored  # not one event of the stalled writer
        with pytest.raises(WriterFencedError):
            writer.flush()  # lost for good, refused without writing
        with pytest.raises(WriterFencedError):
            writer.close()  # its final flush too; the lease it no longer holds is not touched
        tokens = dict(_writer_tokens(schema, "s"))
        assert all(tokens[e.seq] > old for e in stored[end:])  # the taker's (load, then append)


def test_an_idle_writer_keeps_its_lease_by_renewing_it(schema: str) -> None:
    with _store(schema, lease_seconds=1.0) as holder, _store(schema) as rival:
        holder.backend.materialize(meta("s"), one_turn_log())
        release = holder.backend.lock("s", cwd=None)
        time.sleep(2.5)  # past two periods without an append
        with pytest.raises(SessionLockedError):
            rival.backend.lock("s", cwd=None)
        release()


def test_a_writer_that_stopped_renewing_loses_the_lease_after_its_period(schema: str) -> None:
    with _store(schema, lease_seconds=1.0) as holder, _store(schema) as rival:
        holder.backend.materialize(meta("s"), one_turn_log())
        holder.backend.lock("s", cwd=None)
        holder.close()  # stops renewing without releasing: a crash, to the database
        time.sleep(1.2)
        release = rival.backend.lock("s", cwd=None)
        assert rival.postgres.lease("s").token == 2  # type: ignore[union-attr]
        release()


def test_every_event_carries_its_writers_token(schema: str) -> None:
    with _store(schema) as store:
        store.backend.materialize(meta("s"), one_turn_log())
        store.append("s", [ts(6, 2), te(7, 2)])
        store.append("s", [ts(8, 3), te(9, 3)])
        tokens = _writer_tokens(schema, "s")
    assert [seq for seq, _ in tokens] == list(range(10))
    assert [token for _, token in tokens] == [0] * 6 + [1, 1, 2, 2]


def test_a_store_of_another_schema_version_is_refused_unchanged(schema: str) -> None:
    with _store(schema):
        pass
    _sql(schema, "UPDATE {s}.meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError) as caught:
        _store(schema)
    assert "schema version 99; this duraloop reads version 1" in str(caught.value)
    assert _sql(schema, "SELECT value FROM {s}.meta WHERE key = 'schema_version'") == [("99",)]


def test_an_unreachable_server_is_a_store_error_without_the_password() -> None:
    require_postgres()
    with pytest.raises(StoreError) as caught:
        PostgresStore("postgresql://someone:hunter2@127.0.0.1:1/nowhere", pool_size=1)
    assert "cannot open the PostgreSQL store postgresql://127.0.0.1:1/nowhere" in str(caught.value)
    assert "hunter2" not in str(caught.value)
