"""Fixtures for the llm tests: the anyio backend and a live fake Chat Completions server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._fake_openai import FakeOpenAIServer


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (the SDK's httpx2 transport runs there)."""
    return "asyncio"


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    """A started fake server, stopped after the test."""
    server = FakeOpenAIServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
