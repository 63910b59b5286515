"""Fixtures of the viewer tests: `store` is the store tests' (every backend and encoding)."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.conftest import pg_schema, store  # noqa: F401 - the store tests' fixtures


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The sessions' working directory."""
    path = tmp_path / "workspace"
    path.mkdir()
    return path
