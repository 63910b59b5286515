"""How `show` and the live stream present a re-run of an outcome-unknown call.

See docs/recovery.md#re-running-outcome-unknown-calls. The crashed session of
`test_retry_unknown` (`read_file` r1 idempotent, `bash` b1 not) is resumed with
`--retry-unknown`; the transcript shows the re-run in the turn that re-ran it, the live
stream names the tool, and a tool the CLI cannot register gets advice on what to do.
Real `python -m duraloop` subprocesses, a scripted model, no network.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ._support import Cli, ok
from .test_retry_unknown import _crashed_session

RERAN = "↻ re-ran read_file call r1 (its outcome was unknown; same idempotency key): "


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    c = Cli(tmp_path)
    (c.cwd / "a.txt").write_text("alpha\n", encoding="utf-8")
    return c


def _turn(transcript: str, turn: int) -> list[str]:
    lines = [line.strip() for line in transcript.splitlines()]
    start = lines.index(f"── turn {turn}")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(f"── turn {turn} "))
    return lines[start : end + 1]


def test_show_prints_a_successful_rerun_and_its_output_in_the_turn_that_reran_it(
    cli: Cli,
) -> None:
    session_id = _crashed_session(cli)
    ok(cli("resume", session_id, "--retry-unknown"))
    transcript = ok(cli("show", session_id)).stdout
    second = _turn(transcript, 2)
    at = second.index(RERAN + "succeeded")
    assert second[at + 1] == "alpha", second
    assert second[-1] == "── turn 2 completed", second
    assert not any("re-ran" in line for line in _turn(transcript, 1)), transcript


def test_show_prints_a_rerun_that_failed_again(cli: Cli) -> None:
    session_id = _crashed_session(cli)
    (cli.cwd / "a.txt").unlink()
    ok(cli("resume", session_id, "--retry-unknown"))
    second = _turn(ok(cli("show", session_id)).stdout, 2)
    at = second.index(RERAN + "failed again")
    assert "a.txt" in second[at + 1], second


def test_show_events_marks_the_replacement_and_its_sources(cli: Cli) -> None:
    session_id = _crashed_session(cli)
    ok(cli("resume", session_id, "--retry-unknown"))
    events = cli.events(session_id)
    (again,) = [e for e in events if e["type"] == "tool/call" and "retryOf" in e["data"]]
    (replaced,) = [e for e in events if isinstance(e.get("surfaceOp"), dict)]
    target = replaced["surfaceOp"]["start"]
    lines = ok(cli("show", session_id, "--events")).stdout.splitlines()
    (call_line,) = [line for line in lines if line.lstrip().startswith(f"{again['seq']} ")]
    assert '"retryOf": ' in call_line and '"name": "read_file"' in call_line, call_line
    (result_line,) = [line for line in lines if line.lstrip().startswith(f"{replaced['seq']} ")]
    assert f"replace {target}..{target} src [{target}, {again['seq']}]" in result_line
    assert "re-run of read_file call r1: succeeded" in result_line, result_line


def test_live_stream_names_the_rerun_tool_and_how_it_ended(cli: Cli) -> None:
    session_id = _crashed_session(cli)
    script = cli.script([{"text": "Read it: alpha."}])
    stdout = ok(cli("resume", session_id, "And now?", "--retry-unknown", "--model", script)).stdout
    lines = [line.strip() for line in stdout.splitlines()]
    assert any(line.startswith('⏵ read_file (re-run of r1) {"path":"a.txt"}') for line in lines)
    (done,) = [line for line in lines if line.startswith("✓ read_file (re-run) ")]
    assert done.endswith(" ms  alpha"), done
    assert not any(line.startswith("✗ tool") for line in lines), stdout


def test_live_stream_shows_a_rerun_that_failed_again(cli: Cli) -> None:
    session_id = _crashed_session(cli)
    (cli.cwd / "a.txt").unlink()
    script = cli.script([{"text": "Gone."}])
    stdout = ok(cli("resume", session_id, "And now?", "--retry-unknown", "--model", script)).stdout
    lines = [line.strip() for line in stdout.splitlines()]
    assert any(line.startswith("✗ read_file (re-run) failed again ") for line in lines), stdout


UNREGISTERED: list[dict[str, Any]] = [
    {
        "text": "Working.",
        "tool_calls": [
            {"id": "m1", "name": "mcp__files__read", "arguments": {}},
            {"id": "p1", "name": "deploy", "arguments": {}},
        ],
    },
    {"text": "Done."},
]


def test_retry_unknown_says_how_to_register_a_tool_the_cli_lacks(cli: Cli) -> None:
    session_id = _crashed_session(cli, UNREGISTERED)
    lines = ok(cli("resume", session_id, "--retry-unknown")).stdout.splitlines()
    assert any(
        line.startswith("skipped mcp__files__read call m1")
        and line.endswith("its MCP server is not connected: pass --mcp files")
        for line in lines
    ), lines
    assert any(
        line.startswith("skipped deploy call p1")
        and line.endswith(
            'tool "deploy" is not registered in the CLI (only the built-in and --mcp tools are): '
            "re-run it from the program that defines it with AgentLoop.retry_unknown_calls()"
        )
        for line in lines
    ), lines
