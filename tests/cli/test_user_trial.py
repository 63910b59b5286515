"""Command-line regressions from a fresh user's trial, each with the smallest input that failed.

Every failure must be one line `Type: message` on stderr with exit 1 (or click's exit 2 for a
bad option value) and nothing on stdout; a damaged session must not hide the others.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest

from duraloop.llm import ScriptedModel
from duraloop.loop import SessionSetup, start_session
from duraloop.store import JsonlStore

from ._support import Cli, clean_env, ok, session_id_of


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def _one_line_error(result: subprocess.CompletedProcess[str], error_type: str) -> str:
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"{error_type}: "), line
    return line


def test_a_lone_surrogate_in_a_scripted_response_completes_the_turn(cli: Cli) -> None:
    # The script file holds the JSON escape `\ud83d`, which decodes to a lone surrogate.
    script = cli.tmp / "s.json"
    script.write_text('[{"text":"ok \\ud83d"}]', encoding="utf-8")
    result = ok(cli("run", "hi", "--model", f"scripted:{script}"))
    assert "ok \ufffd" in result.stdout
    assert result.stderr == ""


def test_a_lone_surrogate_in_tool_call_arguments_is_written_as_u_fffd(cli: Cli) -> None:
    script = cli.tmp / "s.json"
    script.write_text(
        '[{"tool_calls":[{"name":"write_file","arguments":{"path":"x.txt",'
        '"content":"a\\ud800b"}}]},'
        '{"text":"done"}]',
        encoding="utf-8",
    )
    ok(cli("run", "hi", "--model", f"scripted:{script}"))
    assert (cli.cwd / "x.txt").read_text(encoding="utf-8") == "a\ufffdb"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--system", "@missing.txt"], "cannot read the system prompt file 'missing.txt'"),
        (["--session", ""], "the session id is empty; a session id is 1 to 200 characters"),
        (["--session", "x" * 300], "is 300 characters; a session id is 1 to 200 characters"),
    ],
    ids=["missing-system-file", "empty-session-id", "long-session-id"],
)
def test_bad_run_inputs_are_one_line_usage_errors(cli: Cli, args: list[str], fragment: str) -> None:
    result = cli("run", "hi", "--model", cli.script([{"text": "k"}]), *args)
    assert fragment in _one_line_error(result, "UsageError")
    assert cli.session_ids() == set()


def test_show_an_empty_id_is_a_one_line_usage_error(cli: Cli) -> None:
    ok(cli("run", "hi", "--model", cli.script([{"text": "k"}])))  # the store root exists
    assert "the session id is empty" in _one_line_error(cli("show", ""), "UsageError")


@pytest.mark.parametrize("flag", ["--max-steps", "--max-parallel"])
def test_zero_caps_are_refused_by_the_option_parser_naming_the_flag(cli: Cli, flag: str) -> None:
    result = cli("run", "hi", "--model", cli.script([{"text": "k"}]), flag, "0")
    assert result.returncode == 2
    assert f"'{flag}'" in result.stderr
    assert result.stdout == ""


def test_ls_lists_a_damaged_session_as_a_row_with_its_reason(cli: Cli) -> None:
    good = session_id_of(ok(cli("run", "hi", "--model", cli.script([{"text": "k"}]))))
    bad = session_id_of(ok(cli("run", "hi", "--model", cli.script([{"text": "k"}]))))
    path = cli.log_path(bad)
    path.write_bytes(path.read_bytes().split(b"\n", 1)[1])  # delete the header line
    listing = ok(cli("ls"))
    (row,) = [line for line in listing.stdout.splitlines() if bad in line]
    assert "damaged: invalid session header" in row
    assert good in listing.stdout
    rows = {row["id"]: row for row in json.loads(ok(cli("ls", "--json")).stdout)}
    assert "damaged" not in rows[good]
    assert rows[bad]["damaged"].startswith('invalid session header: type must be "session"')


def test_check_reports_a_torn_tail_and_resume_warnings_are_unpadded(cli: Cli) -> None:
    session_id = session_id_of(ok(cli("run", "hi", "--model", cli.script([{"text": "k"}]))))
    with cli.log_path(session_id).open("ab") as log:
        log.write(b'{"type":"x')
    result = ok(cli("check", session_id))
    assert "a torn tail of 10 bytes (resume truncates it)" in result.stdout
    assert json.loads(ok(cli("check", session_id, "--json")).stdout)["tornTailBytes"] == 10
    resumed = ok(cli("resume", session_id))
    warnings = resumed.stderr.splitlines()
    assert warnings and all(
        line == line.rstrip() and line.startswith("WARNING ") for line in warnings
    )


def test_the_cli_opens_an_existing_zstd_store(cli: Cli) -> None:
    store = JsonlStore(cli.store, compression="zstd")
    with start_session(
        SessionSetup(store=store, model=ScriptedModel([{"text": "k"}]), cwd=cli.cwd)
    ) as loop:
        anyio.run(loop.run_turn, "hi")
        session_id = loop.session.id
    assert session_id in ok(cli("ls")).stdout
    assert "assistant: k" in ok(cli("show", session_id)).stdout
    ok(cli("run", "again", "--session", session_id, "--model", cli.script([{"text": "k2"}])))
    assert list(cli.store.glob("*/*/session.jsonl")) == []


def test_fork_of_a_session_whose_only_turn_is_open_suggests_how_to_find_a_boundary(
    cli: Cli,
) -> None:
    session_id = session_id_of(ok(cli("run", "hi", "--model", cli.script([{"text": "k"}]))))
    (log,) = cli.store.glob(f"*/{session_id}/session.jsonl")
    log.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:2]))  # header, turn/start
    line = _one_line_error(cli("fork", session_id), "SessionForkError")
    assert (
        f"`duraloop show {session_id} --events --store jsonl:{cli.store}`" in line
        and "OPEN_TURN" in line
    )


def test_help_shows_option_defaults_in_brackets(cli: Cli) -> None:
    env = clean_env(cli.tmp, COLUMNS="300")  # one line per option
    result = ok(cli("run", "--help", store=False, cwd=False, env=env))
    assert "postgresql://HOST/DB[?schema=NAME] [default: $DURALOOP_HOME/sessions" in result.stdout
