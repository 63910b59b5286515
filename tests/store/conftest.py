"""The `store` fixture.

Every contract test runs on MemoryStore, JsonlStore (raw, zstd), SqliteStore and
PostgresStore (a real server, a fresh schema per test: `_postgres`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from duraloop.store import JsonlStore, MemoryStore, SessionStore, SqliteStore

from ._postgres import drop_schema, fresh_schema, postgres_store, require_postgres


@pytest.fixture(params=["memory", "jsonl", "jsonl-zstd", "sqlite", "postgres", "postgres-jsonb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    """Every contract test runs on each backend (and on both JSONL encodings)."""
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "jsonl":
        yield JsonlStore(tmp_path / "sessions")
    elif request.param == "jsonl-zstd":
        yield JsonlStore(tmp_path / "sessions", compression="zstd")
    elif request.param == "sqlite":
        with SqliteStore(tmp_path / "sessions.db") as sqlite_store:
            yield sqlite_store
    elif request.param == "postgres":
        with postgres_store() as pg_store:
            yield pg_store
    else:
        with postgres_store(payload="jsonb") as pg_store:
            yield pg_store


@pytest.fixture(params=["streamed", "whole"])
def snapshot_read(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a snapshot test with the snapshot file read streamed (its messages section left on
    disk) and read whole (a small file); the test sessions' snapshots are all small."""
    from duraloop.store._jsonl import _snapshot_read

    if request.param == "streamed":
        monkeypatch.setattr(_snapshot_read, "SMALL_SNAPSHOT_BYTES", 0)
    return str(request.param)


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A fresh PostgreSQL schema name for the test (the server required), dropped after."""
    require_postgres()
    name = fresh_schema()
    try:
        yield name
    finally:
        drop_schema(name)
