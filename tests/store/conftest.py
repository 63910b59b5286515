"""The `store` fixture: every contract test runs on MemoryStore and on JsonlStore."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from duraloop.store import JsonlStore, MemoryStore, SessionStore


@pytest.fixture(params=["memory", "jsonl"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    """Every contract test runs on each backend."""
    if request.param == "memory":
        yield MemoryStore()
    else:
        yield JsonlStore(tmp_path / "sessions")
