"""A real PostgreSQL for the tests: one fresh schema per store, dropped after.

The server is `DURALOOP_TEST_POSTGRES` (default `postgresql://127.0.0.1:5432/test`, the
server every development and CI machine runs). Without psycopg or a reachable server a
test skips with a one-line reason, except under `CI=true`, where it fails: CI must run the
PostgreSQL tests, never skip them silently.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

POSTGRES_URL = os.environ.get("DURALOOP_TEST_POSTGRES", "postgresql://127.0.0.1:5432/test")


def require_postgres() -> None:
    """Skip (or under CI=true fail) unless psycopg is installed and the server answers."""
    try:
        import psycopg
    except ImportError as exc:
        _unavailable(f"psycopg is not installed ({exc}): pip install -e '.[dev]'")
        return
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=3) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        _unavailable(f"PostgreSQL at {POSTGRES_URL} is unreachable: {first}")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the PostgreSQL tests must run)")
    pytest.skip(reason)


def fresh_schema() -> str:
    """A schema name no other test uses."""
    return f"test_{uuid.uuid4().hex[:16]}"


def drop_schema(schema: str) -> None:
    """Drop a test's schema and everything in it."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )


@contextmanager
def postgres_store(**options: Any) -> Iterator[Any]:
    """A `PostgresStore` on a fresh schema; closed and dropped after the block."""
    require_postgres()
    from duraloop.store import PostgresStore

    schema = options.pop("schema", None) or fresh_schema()
    store = PostgresStore(POSTGRES_URL, schema=schema, **options)
    try:
        yield store
    finally:
        store.close()
        drop_schema(schema)
