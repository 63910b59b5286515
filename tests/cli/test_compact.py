"""`duraloop compact ID` and `/compact` in `duraloop chat` (docs/compaction.md#manual)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ._support import Cli, clean_env, ok, session_id_of

LONG_PROMPT = "Summarize the quarterly report. " + "Figures: 1, 2, 3. " * 200
SUMMARY = [{"text": "## Current Work\n- summarizing the quarterly report"}]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def _kinds(cli: Cli, session_id: str) -> list[str]:
    return [event["type"] for event in cli.events(session_id)]


def test_compact_summarizes_the_history_into_a_standalone_compaction(cli: Cli) -> None:
    run = ok(cli("run", LONG_PROMPT, "--model", cli.script([{"text": "The report grew."}])))
    session_id = session_id_of(run)
    result = ok(cli("compact", session_id, "--model", cli.script(SUMMARY)))
    assert result.stdout.strip().startswith("Compacted 1 history items (~")
    events = cli.events(session_id)
    start = next(e for e in events if e["type"] == "compaction/start")
    assert start["data"]["turn"] is None
    assert _kinds(cli, session_id)[-1] in ("compaction/end", "session/end-seed")
    transcript = ok(cli("show", session_id)).stdout
    assert "compacted 1 history items (~" in transcript and "The report grew." in transcript
    shown = ok(cli("show", session_id, "--messages"))
    assert shown.stdout.startswith("user") and "automatically generated checkpoint" in shown.stdout


def test_compact_of_a_missing_session_exits_1_with_one_line(cli: Cli) -> None:
    result = cli("compact", "nope", "--model", cli.script(SUMMARY))
    assert result.returncode == 1
    assert "nope" in result.stderr and "Traceback" not in result.stderr


def test_a_failed_summary_exits_1_and_leaves_the_history(cli: Cli) -> None:
    session_id = session_id_of(ok(cli("run", LONG_PROMPT, "--model", cli.script([{"text": "ok"}]))))
    before = ok(cli("show", session_id, "--messages", "--json")).stdout
    failing = cli.script([{"error": {"code": "SERVER", "message": "summary service down"}}])
    result = cli("compact", session_id, "--model", failing)
    assert result.returncode == 1
    assert "summary service down" in result.stderr and "Traceback" not in result.stderr
    assert ok(cli("show", session_id, "--messages", "--json")).stdout == before
    assert "compaction failed: " in ok(cli("show", session_id)).stdout
    ends = [e for e in cli.events(session_id) if e["type"] == "compaction/end"]
    assert len(ends) == 1 and "summary service down" in ends[0]["data"]["error"]


def test_slash_compact_in_a_piped_chat_compacts_between_turns(cli: Cli) -> None:
    model = cli.script([{"text": "The report grew."}, *SUMMARY, {"text": "still here"}])
    result = subprocess.run(
        cli.argv("chat", "--model", model),
        input=f"{LONG_PROMPT}\n/compact\nand now?\n",
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=clean_env(cli.tmp),
        cwd=cli.tmp,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Compacted 1 history items" in result.stdout
    assert "still here" in result.stdout
    session_id = result.stdout.splitlines()[0].removeprefix("session: ")
    kinds = _kinds(cli, session_id)
    assert kinds.index("compaction/end") < max(i for i, k in enumerate(kinds) if k == "turn/start")
