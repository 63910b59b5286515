"""The `store` fixture: every contract test runs on MemoryStore and on JsonlStore (raw, zstd)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from duraloop.store import JsonlStore, MemoryStore, SessionStore


@pytest.fixture(params=["memory", "jsonl", "jsonl-zstd"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    """Every contract test runs on each backend (and on both JSONL encodings)."""
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "jsonl":
        yield JsonlStore(tmp_path / "sessions")
    else:
        yield JsonlStore(tmp_path / "sessions", compression="zstd")
