"""The `store` fixture.

Every contract test runs on MemoryStore, JsonlStore (raw, zstd) and SqliteStore.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from duraloop.store import JsonlStore, MemoryStore, SessionStore, SqliteStore


@pytest.fixture(params=["memory", "jsonl", "jsonl-zstd", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    """Every contract test runs on each backend (and on both JSONL encodings)."""
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "jsonl":
        yield JsonlStore(tmp_path / "sessions")
    elif request.param == "jsonl-zstd":
        yield JsonlStore(tmp_path / "sessions", compression="zstd")
    else:
        with SqliteStore(tmp_path / "sessions.db") as sqlite_store:
            yield sqlite_store
