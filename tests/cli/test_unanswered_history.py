"""Sessions that cannot be continued, through the real command line (issue 9, A1-A3).

- A1: a closed turn with an unanswered call makes `run`/`resume`/`chat` stop with one line
  `UnpairedHistoryError: ...` naming the rescue, before writing a byte; `check` prints the
  rescue; `show` and `ls` still read the log; the rescue fork continues.
- A2: `fork` while a real `duraloop run` process runs a tool: the default fork cuts at the
  last closed turn (nothing invented for the running call); a cut inside the running turn is
  `SessionLockedError`.
- A3: two flipped bytes that rename a key: every command agrees the log is damaged, and none
  writes.
Real `python -m duraloop` subprocesses on a temp store, a scripted model, no network.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from duraloop.log import Event, SessionHeader, rescue_command
from duraloop.store import JsonlStore

from ._support import (
    Cli,
    clean_env,
    kill_group_quietly,
    ok,
    session_id_of,
    tool_call_on_disk,
    wait_for,
)

READ_ONE: list[dict[str, Any]] = [
    {
        "text": "Reading.",
        "tool_calls": [
            {"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}},
            {"id": "r2", "name": "read_file", "arguments": {"path": "a.txt"}},
        ],
    },
    {"text": "Done."},
]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    c = Cli(tmp_path)
    (c.cwd / "a.txt").write_text("alpha\n", encoding="utf-8")
    return c


def _snapshot(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def _wedged_session(cli: Cli) -> tuple[str, int]:
    """Run a turn, then drop r2's tool/result from its log: a closed, unanswered turn.

    Returns:
        The session id and the seq of the step/end that closed r2 unanswered.
    """
    session_id = session_id_of(ok(cli("run", "Read a.", "--model", cli.script(READ_ONE))))
    events = [
        e
        for e in cli.events(session_id)
        if not (e["type"] == "tool/result" and e["data"]["message"]["source"]["callId"] == "r2")
    ]
    renumber = {event["seq"]: seq for seq, event in enumerate(events)}
    for event in events:
        event["seq"] = renumber[event["seq"]]
        if "sourceEventSeqs" in event:
            event["sourceEventSeqs"] = [renumber[s] for s in event["sourceEventSeqs"]]
    path = cli.log_path(session_id)
    header = path.read_bytes().splitlines(keepends=True)[0]
    path.write_bytes(header + b"".join(json.dumps(e).encode() + b"\n" for e in events))
    # The rewrite makes the snapshot stale (a load would warn that it ignores it): drop it,
    # so each command's stderr is its one error line.
    (path.parent / "session.snapshot").unlink(missing_ok=True)
    closed_at = next(e["seq"] for e in events if e["type"] == "step/end")
    return session_id, closed_at


def _one_line(result: subprocess.CompletedProcess[str], error_type: str) -> str:
    assert result.returncode == 1, result.stderr
    assert result.stdout.strip() in (
        "",
        *[line for line in result.stdout.splitlines() if line.startswith("session: ")],
    )
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"{error_type}: "), line
    return line


def _chat(cli: Cli, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli.argv("chat", *args),
        input="",
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=clean_env(cli.tmp),
        cwd=cli.tmp,
        timeout=90,
        check=False,
    )


def test_resume_run_and_chat_of_a_closed_unanswered_turn_write_nothing_and_name_the_rescue(
    cli: Cli,
) -> None:
    session_id, closed_at = _wedged_session(cli)
    path = cli.log_path(session_id)
    before = _snapshot(path)
    rescue = f"`duraloop fork {session_id} --at {closed_at - 1} --store jsonl:{cli.store}`"
    script = cli.script([{"text": "never sent"}])
    for result in (
        cli("resume", session_id),
        cli("resume", session_id, "more", "--model", script),
        cli("run", "more", "--session", session_id, "--model", script),
        _chat(cli, "--session", session_id, "--model", script),
    ):
        line = _one_line(result, "UnpairedHistoryError")
        assert "'r2'" in line and "turn 1" in line and rescue in line
        assert _snapshot(path) == before


def test_check_prints_the_rescue_and_show_and_ls_still_read_the_log(cli: Cli) -> None:
    session_id, closed_at = _wedged_session(cli)
    path = cli.log_path(session_id)
    before = _snapshot(path)
    checked = cli("check", session_id)
    assert checked.returncode == 1 and "INVALID" in checked.stdout
    rescue = f"duraloop fork {session_id} --at {closed_at - 1} --store jsonl:{cli.store}"
    assert f"rescue: {rescue}" in checked.stdout
    assert f"`{rescue}`" in checked.stdout  # the problem line names the same command
    as_json = json.loads(cli("check", session_id, "--json").stdout)
    assert as_json["rescue"] == rescue
    assert "Reading." in ok(cli("show", session_id)).stdout
    assert session_id in ok(cli("ls")).stdout
    assert _snapshot(path) == before


def test_the_rescue_fork_keeps_the_history_and_the_child_continues(cli: Cli) -> None:
    session_id, closed_at = _wedged_session(cli)
    parent = cli.events(session_id)
    child = ok(cli("fork", session_id, "--at", str(closed_at - 1))).stdout.strip()
    events = cli.events(child)
    assert events[:closed_at] == parent[:closed_at]
    closers = events[closed_at:]
    assert [(e["type"], e["data"].get("error", {}).get("code")) for e in closers[:1]] == [
        ("tool/result", "TOOL_OUTCOME_UNKNOWN"),
    ]
    assert [e["type"] for e in closers[1:]] == ["step/end", "turn/end", "session/end-seed"]
    ok(cli("check", child))
    ok(cli("run", "Again.", "--session", child, "--model", cli.script([{"text": "Fine now."}])))
    ok(cli("check", child))
    assert cli.events(session_id) == parent


# --- A2: fork while a real writer runs a tool ------------------------------------------------

_WAIT_FOR_GO = "while [ ! -f go ]; do sleep 0.05; done; echo done"


def test_fork_while_a_run_process_holds_the_session_never_cuts_its_running_turn(cli: Cli) -> None:
    ok(cli("run", "first", "--session", "live", "--model", cli.script([{"text": "One."}])))
    slow = cli.script(
        [
            {
                "text": "Waiting.",
                "tool_calls": [
                    {"id": "b1", "name": "bash", "arguments": {"command": _WAIT_FOR_GO}}
                ],
            },
            {"text": "Two."},
        ]
    )
    writer = cli.popen("run", "second", "--session", "live", "--model", slow)
    try:
        path = cli.log_path("live")
        wait_for(lambda: tool_call_on_disk(path, "bash"), what="the running bash tool/call")
        parent = cli.events("live")
        first_end = next(e["seq"] for e in parent if e["type"] == "turn/end")
        running_call = next(e["seq"] for e in parent if e["type"] == "tool/call")
        second_start = [e["seq"] for e in parent if e["type"] == "turn/start"][1]

        child = ok(cli("fork", "live")).stdout.strip()
        child_events = cli.events(child)
        assert child_events[:-1] == parent[: first_end + 1]
        assert child_events[-1]["type"] == "session/end-seed"

        for at in (running_call, second_start):
            line = _one_line(cli("fork", "live", "--at", str(at)), "SessionLockedError")
            assert '"live"' in line
        assert cli.session_ids() == {"live", child}
    finally:
        (cli.cwd / "go").touch()
        try:
            assert writer.wait(timeout=60) == 0
        finally:
            kill_group_quietly(writer.pid)
    final = cli.events("live")
    assert final[: len(parent)] == parent
    assert not any(e["data"].get("error", {}).get("code") == "TOOL_OUTCOME_UNKNOWN" for e in final)
    ok(cli("check", "live"))


# --- A3: a corrupt-but-parseable log ----------------------------------------------------------


def _renamed_key_session(cli: Cli) -> tuple[str, Path]:
    """The smallest log with two flipped bytes: step/end's "step" key renamed "stap"."""
    store = JsonlStore(cli.store)
    header = SessionHeader(id="flip", created_at=1, cwd=str(cli.cwd))
    store.backend.materialize(
        header,
        [
            Event("turn/start", 0, 1, {"turn": 1}),
            Event("step/start", 1, 1, {"turn": 1, "step": 1}),
            Event("step/end", 2, 1, {"turn": 1, "step": 1}),
            Event("turn/end", 3, 1, {"turn": 1, "reason": {"kind": "completed"}}),
        ],
    )
    path = cli.log_path("flip")
    data = path.read_bytes()
    flipped = data.replace(
        b'"step/end","seq":2,"time":1,"data":{"turn":1,"step"',
        b'"step/end","seq":2,"time":1,"data":{"turn":1,"stap"',
    )
    assert flipped != data and len(flipped) == len(data)
    path.write_bytes(flipped)
    return "flip", path


@pytest.mark.parametrize(
    "command",
    [
        ["check", "flip"],
        ["resume", "flip"],
        ["show", "flip"],
        ["show", "flip", "--events"],
        ["run", "go", "--session", "flip"],
        ["fork", "flip"],
    ],
    ids=lambda c: " ".join(c[:1] + c[2:]),
)
def test_every_command_refuses_a_log_whose_key_two_flipped_bytes_renamed(
    cli: Cli, command: list[str]
) -> None:
    _, path = _renamed_key_session(cli)
    before = _snapshot(path)
    args = (
        [*command, "--model", cli.script([{"text": "never"}])] if command[0] == "run" else command
    )
    result = cli(*args)
    assert result.returncode == 1
    expected = "invariant violated at seq 2: step/end names turn 1/step None"
    if command[0] == "check":
        assert "INVALID" in result.stdout and expected in result.stdout
    else:
        line = _one_line(result, "CorruptLogError")
        assert 'session "flip" is damaged: ' + expected in line
    assert _snapshot(path) == before
    assert cli.session_ids() == {"flip"}


def test_ls_lists_a_log_whose_key_two_flipped_bytes_renamed_as_damaged(cli: Cli) -> None:
    _, path = _renamed_key_session(cli)
    before = _snapshot(path)
    [row] = json.loads(ok(cli("ls", "--json")).stdout)
    assert row["id"] == "flip" and row["lastTurnEnd"] == "unknown"
    assert "invariant violated at seq 2" in row["damaged"]
    assert _snapshot(path) == before


# --- the rescue command works as printed (user-trial findings) --------------------------------


def test_the_printed_rescue_of_an_id_starting_with_a_dash_runs_as_printed(cli: Cli) -> None:
    assert rescue_command("-dash", 24) == "duraloop fork --at 24 -- -dash"
    assert (
        rescue_command("-dash", 24, store="sqlite:a b")
        == "duraloop fork --at 24 --store 'sqlite:a b' -- -dash"
    )
    assert (
        rescue_command("plain", 3, store="jsonl:/s")
        == "duraloop fork plain --at 3 --store jsonl:/s"
    )
    ok(cli("run", "Read a.", "--session", "-dash", "--model", cli.script(READ_ONE)))
    child = ok(
        cli(*shlex.split(rescue_command("-dash", 3, store=f"jsonl:{cli.store}"))[1:], store=False)
    )
    assert child.stdout.strip() in cli.session_ids()
