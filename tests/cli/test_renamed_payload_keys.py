"""A required payload key renamed by two flipped bytes: every command agrees (issue 9, item 3).

Before, a log whose prompt block read `"texu":"read it"` passed `check` and `resume`, `ls` and
`show` read it, and `run` crashed in the OpenAI encoder with `LlmError: 'text' [UNKNOWN]`,
appending an `error` turn each time: the session was wedged. Now load runs the shape check
`check` runs: `check` says INVALID naming the seq and field, and `resume`, `run` (against a
real wire-level Chat Completions server that must receive nothing), `show` and `ls` report the
same problem as a one-line `CorruptLogError` / damaged row, and nothing is written.
Real `python -m duraloop` subprocesses on a temp store.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from duraloop.log import SessionHeader
from duraloop.store import JsonlStore
from llm._fake_openai import FakeOpenAIServer
from log.test_payload_shapes import answered_log

from ._support import Cli, clean_env, ok

# key -> (the bytes renamed in a good log, the problem every command names)
RENAMES: dict[str, tuple[bytes, bytes, str]] = {
    "text": (
        b'"text":"read it"',
        b'"texu":"read it"',
        "user/message at seq 1: text block content[0] needs 'text' as a string",
    ),
    "reason": (
        b'"reason":{"kind":"completed"}',
        b'"reasom":{"kind":"completed"}',
        "turn/end at seq 7 needs a reason object with a string kind",
    ),
    "isError": (
        b'"isError":false',
        b'"isErrox":false',
        "tool/result at seq 5: its tool-result block needs a boolean isError",
    ),
    "arguments": (
        b'"name":"bash","arguments":"{}"}]',
        b'"name":"bash","argumentz":"{}"}]',
        "assistant/message at seq 3: tool-call block content[0] needs 'arguments' as a string",
    ),
}


def _renamed_log(cli: Cli, key: str) -> Path:
    JsonlStore(cli.store).backend.materialize(
        SessionHeader(id="K", created_at=1, cwd=str(cli.cwd)), answered_log()
    )
    path = cli.log_path("K")
    old, new, _ = RENAMES[key]
    data = path.read_bytes()
    assert data.count(old) == 1
    path.write_bytes(data.replace(old, new))
    return path


def _corrupt_line(stderr: str) -> str:
    (line,) = stderr.splitlines()
    assert line.startswith("CorruptLogError: "), line
    return line


@pytest.mark.parametrize("key", list(RENAMES))
def test_check_resume_run_show_and_ls_agree_a_renamed_required_key_is_damage(
    tmp_path: Path, key: str
) -> None:
    cli = Cli(tmp_path)
    path = _renamed_log(cli, key)
    before = path.read_bytes()
    problem = RENAMES[key][2]

    checked = cli("check", "K")
    assert checked.returncode == 1 and "INVALID" in checked.stdout and problem in checked.stdout

    for command in (["resume", "K"], ["show", "K"]):
        result = cli(*command)
        assert result.returncode == 1, command
        assert f'session "K" is damaged: {problem}' in _corrupt_line(result.stderr), command

    server = FakeOpenAIServer()
    server.start()
    try:
        ran = cli(
            "run",
            "hi",
            "--session",
            "K",
            "--model",
            "openai:gpt-4.1",
            "--base-url",
            server.base_url,
            env=clean_env(tmp_path, OPENAI_API_KEY="sk-test"),
        )
        assert server.requests == []
    finally:
        server.stop()
    assert ran.returncode == 1
    assert f'session "K" is damaged: {problem}' in _corrupt_line(ran.stderr)

    [row] = json.loads(ok(cli("ls", "--json")).stdout)
    assert row["id"] == "K" and problem in row["damaged"]
    assert path.read_bytes() == before
