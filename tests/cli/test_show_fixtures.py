"""`duraloop show PATH` and `duraloop check PATH` on every dsh fixture.

See docs/store.md#projected-fixtures.

Each fixture file is read as it is (no store): `show` prints its transcript with the user's
first prompt, `check` finds it valid, and neither touches the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ._support import Cli, ok

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "dsh-sessions"
FIXTURE_FILES = sorted(FIXTURES.glob("*/session*.jsonl")) if FIXTURES.is_dir() else []


_PARAMS: list[Path | None] = [*FIXTURE_FILES] or [None]


@pytest.fixture(params=_PARAMS, ids=[p.parent.name for p in FIXTURE_FILES] or ["absent"])
def fixture_path(request: pytest.FixtureRequest) -> Path:
    if request.param is None:
        pytest.skip(f"dsh fixtures not found at {FIXTURES}")
    path: Path = request.param
    return path


def _first_prompt(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        row = json.loads(line)
        if row["type"] == "user/message":
            return str(row["data"]["content"][0]["text"])
    raise AssertionError(f"no user/message in {path}")


def test_show_prints_the_transcript_of_a_fixture(fixture_path: Path, tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    before = fixture_path.read_bytes()
    result = ok(cli("show", str(fixture_path), store=False))
    assert result.stdout.startswith("session ")
    assert "── turn 1" in result.stdout
    assert f"user: {_first_prompt(fixture_path)}" in result.stdout
    assert "Traceback" not in result.stderr
    assert fixture_path.read_bytes() == before


def test_check_finds_a_fixture_valid(fixture_path: Path, tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    report = json.loads(ok(cli("check", str(fixture_path), "--json", store=False)).stdout)
    assert report["valid"] is True, report["problems"]
    assert report["openTurn"] is None and report["tornTailBytes"] == 0
    assert not (tmp_path / "home").exists()  # reading a file never opens the default store
