"""The PostgreSQL store's record column type: bytea (the default) or the private jsonb.

See docs/store.md#postgresql (issue 14: "payloads as JSONB or bytea: measure both on
scenario S and choose"; benchmarks/bench_postgres.py measures them). The record is the
event's JSONL line; bytea keeps it byte for byte. jsonb (`payload="jsonb"`) reparses it:
the tests below pin what that costs (object keys reordered, `-0.0` and large floats
rewritten, a NUL in a string refused), which is why bytea is the store's type. A schema
records its type in `meta` (key `payload`) and a store of the other type is refused.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from duraloop.errors import StoreError
from duraloop.log import Event
from duraloop.store import PostgresStore
from duraloop.store._codec._records import encode_records

from ._builders import ev, meta, one_turn_log, se, ss, te, text_chunk, ts
from ._postgres import POSTGRES_URL

# Values whose JSON text a reparse may change: key order, -0.0, a float beyond 2**53.
TRICKY: dict[str, Any] = {"b": 1, "a": [{"z": 0, "y": 1}], "neg": -0.0, "big": 1e300}


@pytest.fixture
def schema(pg_schema: str) -> str:
    return pg_schema


def _sql(schema: str, text: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        cursor = connection.execute(sql.SQL(text).format(s=sql.Identifier(schema)))
        return cursor.fetchall() if cursor.description else []


def _line(event: Event) -> bytes:
    return encode_records([event], pack_chunks=False)[0][2]


def _round_trip(schema: str, payload: str, events: list[Event]) -> list[Event]:
    with PostgresStore(POSTGRES_URL, schema=schema, payload=payload) as store:  # type: ignore[arg-type]
        store.backend.materialize(meta("s1", "/w"), events)
        return store.backend.read("s1").events


def test_bytea_keeps_every_line_byte_for_byte(schema: str) -> None:
    event = ev("x/probe", 0, 1, dict(TRICKY, nul="a\u0000b"))
    back = _round_trip(schema, "bytea", [event])
    assert _line(back[0]) == _line(event)
    assert _sql(schema, "SELECT record FROM {s}.events") == [(_line(event),)]
    assert _sql(schema, "SELECT value FROM {s}.meta WHERE key = 'payload'") == [("bytea",)]


def test_jsonb_round_trips_the_contract_log_and_packed_chunks(schema: str) -> None:
    chunks = [text_chunk(6 + k, 10 + k, f"t{k}") for k in range(5)]
    events = [*one_turn_log()[:-1], ss(5, 1, 2), *chunks, se(11, 1, 2), te(12, 1)]
    assert _round_trip(schema, "jsonb", events) == events
    assert _sql(schema, "SELECT count(*) FROM {s}.events") == [(9,)]  # the 5 chunks: one row
    assert _sql(schema, "SELECT jsonb_typeof(record) FROM {s}.events LIMIT 1") == [("object",)]
    assert _sql(schema, "SELECT value FROM {s}.meta WHERE key = 'payload'") == [("jsonb",)]


def test_jsonb_reorders_keys_and_rewrites_negative_zero_and_big_floats(schema: str) -> None:
    event = ev("x/probe", 0, 1, TRICKY)
    data = _round_trip(schema, "jsonb", [event])[0].data
    assert isinstance(data, dict)
    assert list(data) == ["a", "b", "big", "neg"]  # jsonb's order: shorter keys first
    assert list(data["a"][0]) == ["y", "z"]
    assert str(data["neg"]) == "0.0"  # the sign of zero is gone
    assert type(data["big"]) is int and data["big"] != 1e300  # 1e300 came back a 301-digit int
    assert _line(ev("x/probe", 0, 1, data)) != _line(event)


def test_jsonb_refuses_a_nul_in_a_string_and_stores_nothing(schema: str) -> None:
    with PostgresStore(POSTGRES_URL, schema=schema, payload="jsonb") as store:
        with pytest.raises(StoreError, match=r"\\u0000"):
            store.backend.materialize(meta("s1", "/w"), [ts(0, 1), ev("x/probe", 1, 2, "a\0b")])
        assert not store.backend.exists("s1")


@pytest.mark.parametrize(("first", "then"), [("bytea", "jsonb"), ("jsonb", "bytea")])
def test_a_store_of_the_other_payload_type_is_refused(schema: str, first: str, then: str) -> None:
    PostgresStore(POSTGRES_URL, schema=schema, payload=first).close()  # type: ignore[arg-type]
    with pytest.raises(StoreError, match=f"records are {first}, not {then}"):
        PostgresStore(POSTGRES_URL, schema=schema, payload=then)  # type: ignore[arg-type]


def test_a_schema_without_the_payload_key_holds_bytea(schema: str) -> None:
    PostgresStore(POSTGRES_URL, schema=schema).close()
    _sql(schema, "DELETE FROM {s}.meta WHERE key = 'payload'")
    with pytest.raises(StoreError, match="records are bytea, not jsonb"):
        PostgresStore(POSTGRES_URL, schema=schema, payload="jsonb")
    assert _round_trip(schema, "bytea", one_turn_log()) == one_turn_log()


def test_an_unknown_payload_type_is_refused_before_connecting() -> None:
    with pytest.raises(StoreError, match="invalid PostgreSQL payload type 'json'"):
        PostgresStore("postgresql://127.0.0.1:1/none", payload="json")  # type: ignore[arg-type]
