"""What a new user's trial of the approval commands found (issue 12), each pinned.

Real subprocesses on scripted models and stores in a temp dir, as in test_approvals.py:
a continued turn keeps asking before every side-effecting built-in, `resume` goes on when
no person must answer, a person's decision wins over `--auto-approve`, asks are shown whole
where a person decides, printed commands work as printed, and chat's question survives a
`/` command.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from duraloop.cli._approval_text import MAX_ARGUMENTS_CHARS

from ._support import Cli, clean_env, ok, raw_events, session_id_of
from .test_chat import PtyChat


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def _bash(call_id: str, command: str) -> dict[str, Any]:
    return {"id": call_id, "name": "bash", "arguments": {"command": command}}


def _write(call_id: str, path: str = "w.txt") -> dict[str, Any]:
    return {"id": call_id, "name": "write_file", "arguments": {"path": path, "content": "hi"}}


def _three_things() -> dict[str, Any]:
    """bash, write_file, bash in one step (the trial's step)."""
    calls = [_bash("c1", "echo one >> ran.txt"), _write("c2"), _bash("c3", "echo 3 >> ran.txt")]
    return {"text": "Doing three things.", "tool_calls": calls}


def _of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] == kind]


def _store(cli: Cli) -> tuple[str, str]:
    return ("--store", str(cli.store))


def _ran(cli: Cli) -> list[str]:
    path = cli.cwd / "ran.txt"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def _paused(cli: Cli, step: dict[str, Any], ask_before: str) -> str:
    result = cli("run", "go", "--model", cli.script([step]), "--ask-before", ask_before)
    assert result.returncode == 3, result.stdout + result.stderr
    return session_id_of(result)


def _chat(cli: Cli, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli.argv("chat", *args),
        input=text,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=clean_env(cli.tmp),
        cwd=cli.tmp,
        timeout=90,
        check=False,
    )


# --- 1. a continued turn keeps asking ---------------------------------------------------------


def test_a_continued_turn_asks_before_a_tool_the_first_run_asked_before_but_never_reached(
    cli: Cli,
) -> None:
    session_id = _paused(cli, _three_things(), "bash,write_file")
    done = cli.script([{"text": "done"}])
    # No --ask-before: write_file was never asked about, yet it must not run unasked.
    result = cli("approve", session_id, "c1", "--continue", "--model", done, *_store(cli))
    assert result.returncode == 3, result.stdout + result.stderr
    assert "paused: call c2 (write_file) waits for approval" in result.stdout
    assert not (cli.cwd / "w.txt").exists() and _ran(cli) == ["one"]


def test_ask_before_none_asks_about_no_tool_and_an_empty_value_is_refused(cli: Cli) -> None:
    session_id = _paused(cli, _three_things(), "bash")
    done = cli.script([{"text": "done"}])
    refused = cli("approve", session_id, "--continue", "--model", done, "--ask-before", "")
    assert refused.returncode == 2 and "--ask-before none" in refused.stderr
    result = cli(
        "approve", session_id, "--continue", "--model", done, "--ask-before", "none", *_store(cli)
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (cli.cwd / "w.txt").exists() and _ran(cli) == ["one", "3"]


def test_chat_on_a_paused_session_keeps_asking_before_the_side_effecting_tools(cli: Cli) -> None:
    session_id = _paused(cli, _three_things(), "bash")
    result = _chat(cli, "y\n", "--model", cli.script([{"text": "done"}]), "--session", session_id)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "approval needed: bash (call c1)" in result.stdout
    assert "! approval allowed-once for bash (c1)" in result.stdout  # the ask was seen before
    assert "approval needed: write_file (call c2)" in result.stdout
    assert not (cli.cwd / "w.txt").exists() and _ran(cli) == ["one"]


def test_a_new_turn_in_a_session_that_asked_before_asks_before_writing(cli: Cli) -> None:
    first = cli.script([{"tool_calls": [_bash("b1", "true")]}, {"text": "ok"}])
    ran = ok(cli("run", "go", "--model", first, "--ask-before", "bash", "--auto-approve", "bash"))
    session_id = session_id_of(ran)
    second = cli.script([{"tool_calls": [_write("w1")]}])
    result = cli("run", "write", "--session", session_id, "--model", second)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "paused: call w1 (write_file) waits for approval" in result.stdout
    assert not (cli.cwd / "w.txt").exists()


# --- 2. go on when no person must answer; a person's decision wins ----------------------------


def test_deny_with_auto_approve_and_continue_records_the_persons_rejection(cli: Cli) -> None:
    session_id = _paused(cli, {"tool_calls": [_bash("c1", "echo ran >> ran.txt")]}, "bash")
    done = cli.script([{"text": "Understood."}])
    result = cli(
        "deny", session_id, "c1", "--reason", "NO", "--auto-approve", "bash", "--continue",
        "--model", done, *_store(cli),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    events = raw_events(cli.log_path(session_id))
    assert [e["data"]["outcome"] for e in _of(events, "approval/decided")] == ["rejected"]
    assert _ran(cli) == []
    results = [e for e in _of(events, "tool/result") if "NO" in json.dumps(e)]
    assert len(results) == 1  # the reason is the call's error result, for the model


def test_resume_goes_on_when_its_allow_list_answers_the_undecided_ask(cli: Cli) -> None:
    session_id = _paused(cli, {"tool_calls": [_bash("c1", "echo ran >> ran.txt")]}, "bash")
    done = cli.script([{"text": "Ran it."}])
    result = cli("resume", session_id, "--auto-approve", "bash", "--model", done)
    assert result.returncode == 0, result.stdout + result.stderr
    assert _ran(cli) == ["ran"]
    shown = cli("resume", session_id)  # not paused now: nothing to show
    assert shown.returncode == 0, shown.stderr


def test_resume_of_an_undecided_ask_prints_commands_with_a_model_placeholder(cli: Cli) -> None:
    session_id = _paused(cli, {"tool_calls": [_bash("c1", "true")]}, "bash")
    shown = cli("resume", session_id)
    assert shown.returncode == 3, shown.stderr
    assert f"duraloop approve {session_id} c1 --continue --model SPEC" in shown.stdout


# --- 3. the ask is shown whole where a person decides -----------------------------------------


def test_a_long_ask_is_shown_whole_up_to_the_bound_then_says_what_was_cut(cli: Cli) -> None:
    tail = "; rm -rf ~"
    command = "echo " + "x" * (MAX_ARGUMENTS_CHARS + 5000) + tail
    session_id = _paused(cli, {"tool_calls": [_bash("c1", command)]}, "bash")
    listed = ok(cli("pending", *_store(cli))).stdout
    line = next(ln for ln in listed.splitlines() if ln.startswith("    arguments: "))
    assert "x" * 1000 in line
    more = len(json.dumps({"command": command}, separators=(",", ":"))) - MAX_ARGUMENTS_CHARS
    assert f"… [{more:,} more characters not shown; `duraloop pending --json --store" in line
    asks = json.loads(ok(cli("pending", "--json", *_store(cli))).stdout)
    assert [ask["session"] for ask in asks] == [session_id]
    assert json.loads(asks[0]["arguments"])["command"].endswith(tail)
    shown = ok(cli("show", session_id)).stdout
    assert re.search(r"→ bash \{.*…\[\+[\d,]+ chars\] \(c1\)", shown)
    assert f"`duraloop show {session_id} --events --json" in shown


# --- 5. chat: a command at the question does not wedge the turn -------------------------------


def test_chat_a_command_piped_at_the_question_runs_and_the_question_is_asked_again(
    cli: Cli,
) -> None:
    step = {"text": "Doing.", "tool_calls": [_bash("c1", "echo one >> ran.txt")]}
    script = cli.script([step, {"text": "Done."}])
    result = _chat(cli, "go\n/show\nyes\n", "--model", script, "--ask-before", "bash")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "── turn 1 is running" in result.stdout  # /show ran at the question
    assert "(answer the question: y, n, or feedback text" in result.stdout
    assert _ran(cli) == ["one"]
    assert "loop.decide" not in result.stdout + result.stderr


def test_chat_a_command_typed_at_the_question_runs_and_the_question_returns(cli: Cli) -> None:
    script = cli.script([{"tool_calls": [_bash("c1", "echo one >> ran.txt")]}, {"text": "Done."}])
    chat = PtyChat(cli, "--model", script, "--ask-before", "bash")
    try:
        chat.started()
        chat.type("go\n")
        chat.expect(r"allow\? \[y\]es")
        mark = chat.type("/show\n")
        chat.expect(r"── turn 1 is running", after=mark)
        chat.expect(r"allow\? \[y\]es", after=mark)
        chat.type("y\n")
        chat.wait_log(lambda e: bool(_of(e, "turn/end")), "turn 1 to close")
        chat.expect_prompt()
        chat.type("/quit\n")
        assert chat.wait_exit() == 0
    finally:
        chat.close()
    assert _ran(cli) == ["one"]


# --- 6. output --------------------------------------------------------------------------------


def test_run_ends_the_streamed_line_before_the_paused_block(cli: Cli) -> None:
    result = cli("run", "go", "--model", cli.script([_three_things()]), "--ask-before", "bash")
    assert result.returncode == 3
    assert "Doing three things.\npaused: call c1 (bash)" in result.stdout


def test_a_rejected_call_is_shown_as_not_run_and_a_continued_turn_says_what_it_spent(
    cli: Cli,
) -> None:
    session_id = _paused(cli, {"tool_calls": [_bash("c1", "echo ran >> ran.txt")]}, "bash")
    done = cli.script([{"text": "Understood."}])
    result = cli("deny", session_id, "--continue", "--model", done, *_store(cli))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "✗ bash rejected, not run" in result.stdout
    assert "⏵ bash" not in result.stdout
    assert re.search(r"── turn 1 completed\n   2 model requests · [\d,]+ tokens", result.stdout)


def test_run_in_a_session_whose_call_is_decided_says_it_is_decided_and_how_to_go_on(
    cli: Cli,
) -> None:
    session_id = _paused(cli, {"tool_calls": [_bash("c1", "true")]}, "bash")
    ok(cli("approve", session_id, *_store(cli)))
    done = cli.script([{"text": "done"}])
    result = cli("run", "more", "--session", session_id, "--model", done)
    assert result.returncode == 2
    assert "call c1 (bash) is decided (allowed-once) but not carried out" in result.stderr
    assert f"`duraloop resume {session_id} --model {done} --ask-before" in result.stderr
    assert "waits for approval" not in result.stderr


def test_approve_and_deny_say_their_workspace_is_the_sessions(cli: Cli) -> None:
    for command in ("approve", "deny"):
        text = " ".join(ok(cli(command, "--help")).stdout.split())
        assert "[default: the session's recorded workspace]" in text
        assert "current directory" not in text


def test_fork_of_a_paused_session_says_it_is_paused_and_how_to_go_on(cli: Cli) -> None:
    session_id = _paused(cli, {"tool_calls": [_bash("c1", "true")]}, "bash")
    result = cli("fork", session_id)
    assert result.returncode == 1
    assert "its only turn 1 is paused (call c1 (bash) waits for approval)" in result.stderr
    assert f"`duraloop approve {session_id} c1 --store" in result.stderr
    assert "--at SEQ" in result.stderr and "wait for it to end" not in result.stderr


def test_a_reason_longer_than_a_decision_keeps_is_refused_and_nothing_recorded(cli: Cli) -> None:
    session_id = _paused(cli, {"tool_calls": [_bash("c1", "true")]}, "bash")
    result = cli("deny", session_id, "--reason", "x" * 4001, *_store(cli))
    assert result.returncode == 2
    assert "the --reason text is 4,001 characters; a decision keeps at most 4,000" in result.stderr
    assert not _of(raw_events(cli.log_path(session_id)), "approval/decided")


# --- 7. demo --approvals ----------------------------------------------------------------------


def test_demo_approvals_run_twice_in_one_dir_starts_clean_and_prints_the_file(cli: Cli) -> None:
    for _ in range(2):
        result = cli("demo", "--approvals", "--dir", str(cli.tmp / "demo"))
        assert result.returncode == 0, result.stdout + result.stderr
        assert "RELEASE.md exists: no" in result.stdout
        assert "  │ - a decision can come from any process" in result.stdout
        printed = re.search(
            r"  approve: (duraloop approve \S+ write-1 --store \S+)\n", result.stdout
        )
        assert printed is not None, result.stdout  # no --continue: step 3 runs it as printed
        assert f"$ {printed.group(1)}" in result.stdout
