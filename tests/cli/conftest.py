"""Fixtures for the CLI tests: a `--store` on a fresh schema of the local PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store._postgres import POSTGRES_URL, drop_schema, fresh_schema, require_postgres


@pytest.fixture
def postgres_spec() -> Iterator[str]:
    """`postgresql://...?schema=NAME` on a fresh schema (and its DBOS one), dropped after."""
    require_postgres()
    schema = fresh_schema()
    try:
        yield f"{POSTGRES_URL}?schema={schema}"
    finally:
        drop_schema(schema)
        drop_schema(f"{schema}_dbos")
