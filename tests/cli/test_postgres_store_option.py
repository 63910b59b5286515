"""`--store postgresql://...` and `duraloop db init` (docs/store.md#postgresql).

Every command runs against a fresh schema of the local server, as `test_store_option`
drives the other kinds; a password in the URL is never printed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from duraloop.cli._postgres_url import split_schema, without_password
from duraloop.cli._stores import parse_store_spec
from duraloop.errors import ConfigError

from ._support import Cli, ok
from .test_store_option import _at, _every_command


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


@pytest.fixture
def spec(postgres_spec: str) -> str:
    return postgres_spec


def test_a_postgresql_url_is_a_store_kind_printed_without_its_password() -> None:
    parsed = parse_store_spec("postgresql://app:s3cret@db.example:5433/agents?schema=team")
    assert parsed.kind == "postgresql"
    assert str(parsed) == "postgresql://app@db.example:5433/agents?schema=team"
    assert parse_store_spec("postgres://db/x").kind == "postgresql"
    with_query = parse_store_spec("postgresql://h/db?schema=s&password=QSecret1&sslpassword=k2")
    assert str(with_query) == "postgresql://h/db?schema=s"  # libpq's query form, dropped too


def test_the_schema_parameter_is_taken_out_of_the_libpq_url() -> None:
    assert split_schema("postgresql://h/db?schema=s&sslmode=require") == (
        "postgresql://h/db?sslmode=require",
        "s",
    )
    assert split_schema("postgresql://h/db") == ("postgresql://h/db", "duraloop")
    with pytest.raises(ConfigError, match="give `schema=NAME` once"):
        split_schema("postgresql://h/db?schema=a&schema=b")
    assert without_password("postgresql://h/db") == "postgresql://h/db"


def test_every_command_runs_on_a_postgresql_store(cli: Cli, spec: str) -> None:
    _every_command(cli, spec)
    listed = json.loads(ok(_at(cli, spec, "ls", "--json")).stdout)
    assert len(listed) == 2  # the session and its fork


def test_db_init_creates_the_tables_once_and_names_the_store(cli: Cli, spec: str) -> None:
    first = ok(cli("db", "init", "--store", spec, store=False, cwd=False)).stdout
    again = ok(cli("db", "init", "--store", spec, store=False, cwd=False)).stdout
    assert first.startswith(f"PostgreSQL store {spec} ready: schema ")
    assert "version 1" in first and first.split("store id ")[1] == again.split("store id ")[1]


def test_db_init_without_a_postgresql_store_is_a_one_line_error(cli: Cli) -> None:
    result = cli("db", "init", store=False, cwd=False)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip() == (
        "UsageError: db init is for a PostgreSQL store: pass --store postgresql://HOST/DB "
        "(JSONL and SQLite stores need no init)"
    )


def test_an_unreachable_server_is_one_line_without_the_password(cli: Cli) -> None:
    result = cli("ls", "--store", "postgresql://me:hunter2@127.0.0.1:1/x", store=False, cwd=False)
    assert result.returncode == 1
    assert result.stderr.startswith(
        "StoreError: cannot open the PostgreSQL store postgresql://127.0.0.1:1/x: "
    )
    assert "hunter2" not in result.stderr + result.stdout
    assert len(result.stderr.strip().splitlines()) == 1
