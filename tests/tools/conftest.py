"""Fixtures shared by the tools tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (the backend duraloop ships with)."""
    return "asyncio"


@pytest.fixture
def real_tmp_path(tmp_path: Path) -> Path:
    """`tmp_path` with symlinks resolved, as `ToolContext.cwd` holds it."""
    return tmp_path.resolve()
