"""Fixtures of the viewer tests: a store of each kind (PostgreSQL on a fresh schema)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from duraloop.store import JsonlStore, SessionStore, SqliteStore
from store._postgres import postgres_store


@pytest.fixture(params=["jsonl", "jsonl-zstd", "sqlite", "postgres"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    """A store of every kind the viewer reads."""
    if request.param == "jsonl":
        yield JsonlStore(tmp_path / "sessions")
    elif request.param == "jsonl-zstd":
        yield JsonlStore(tmp_path / "sessions", compression="zstd")
    elif request.param == "sqlite":
        with SqliteStore(tmp_path / "sessions.db") as sqlite_store:
            yield sqlite_store
    else:
        with postgres_store() as pg_store:
            yield pg_store


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The sessions' working directory."""
    path = tmp_path / "workspace"
    path.mkdir()
    return path
