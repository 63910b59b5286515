"""Approvals on the command line: pausing, `pending`, `approve`, `deny`, chat's inline ask.

Every command runs as a real subprocess on scripted models and real stores in a temp dir;
outcomes are read from the command's output, its exit status and the log on disk. A turn
that pauses exits 3 (`run`, `resume`, `approve/deny --continue`, a chat that ends paused);
approval usage errors exit 2.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

import duraloop.store
from duraloop.cli._approval_options import BUILTIN_NAMES_TEXT
from duraloop.llm import ScriptedModel
from duraloop.loop import SessionSetup, resume_session
from duraloop.store import JsonlStore
from duraloop.tools import builtin_tools

from ._support import Cli, clean_env, ok, raw_events, session_id_of
from .test_chat import PtyChat

HAS_SQLITE = hasattr(duraloop.store, "SqliteStore")
ESC = "\x1b"


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def _bash(call_id: str, command: str) -> dict[str, Any]:
    return {"id": call_id, "name": "bash", "arguments": {"command": command}}


def _list(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "name": "list_dir", "arguments": {"path": "."}}


def _asking_step(command: str = "echo ran >> ran.txt") -> dict[str, Any]:
    """One step: a listing, a bash call that asks, another listing (model order)."""
    return {"text": "Working.", "tool_calls": [_list("l1"), _bash("b1", command), _list("l2")]}


def _paused_run(cli: Cli, *extra: str, command: str = "echo ran >> ran.txt") -> str:
    """Run a turn whose bash call asks; assert it paused (exit 3) and return the session."""
    result = cli(
        "run", "go", "--model", cli.script([_asking_step(command)]), "--ask-before", "bash", *extra
    )
    assert result.returncode == 3, result.stdout + result.stderr
    return session_id_of(result)


def _done(cli: Cli, text: str = "All done.") -> str:
    return cli.script([{"text": text}])


def _of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] == kind]


def _store(cli: Cli) -> tuple[str, str]:
    return ("--store", str(cli.store))


def _ran(cli: Cli) -> list[str]:
    path = cli.cwd / "ran.txt"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


# --- run: pausing ----------------------------------------------------------------------------


def test_run_prints_the_waiting_call_and_the_commands_that_decide_it_and_exits_3(
    cli: Cli,
) -> None:
    script = cli.script([_asking_step()])
    result = cli("run", "go", "--model", script, "--ask-before", "bash")
    assert result.returncode == 3, result.stderr
    session_id = session_id_of(result)
    out = result.stdout
    assert "paused: call b1 (bash) waits for approval" in out
    assert '  arguments: {"command":"echo ran >> ran.txt"}' in out
    assert '  reason: tool "bash" requires approval' in out
    # The commands carry the run's model and ask-before set: they work as printed.
    goes_on = f"--continue --model {script} --ask-before bash --store jsonl:{cli.store}"
    assert f"duraloop approve {session_id} b1 {goes_on}" in out
    assert f"duraloop deny {session_id} b1 --reason TEXT {goes_on}" in out
    events = raw_events(cli.log_path(session_id))
    assert [e["data"]["callId"] for e in _of(events, "approval/asked")] == ["b1"]
    assert [e["data"]["callId"] for e in _of(events, "tool/call")] == ["l1"]  # l2 waits too
    assert not _of(events, "turn/end") and _ran(cli) == []


def test_the_waiting_calls_id_is_escaped_and_the_commands_spell_it_exactly(cli: Cli) -> None:
    call_id = f"b{ESC}]0;owned\a{ESC}[2J\u009b'"
    step = {"tool_calls": [_bash(call_id, "echo " + "x" * 1000)]}
    result = cli("run", "go", "--model", cli.script([step]), "--ask-before", "bash")
    assert result.returncode == 3, result.stderr
    assert ESC not in result.stdout and "\a" not in result.stdout
    assert "\u009b" not in result.stdout
    assert (
        "paused: call b\\x1b]0;owned\\x07\\x1b[2J\\x9b' (bash) waits for approval" in result.stdout
    )
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("  arguments: "))
    assert line.endswith("x" * 1000 + '"}')  # arguments in full where a person decides
    approve = next(ln for ln in result.stdout.splitlines() if ln.startswith("  approve: "))
    word = approve.split()[4]
    assert word.startswith("$'")
    assert "$'...' (bash, zsh)" in result.stdout
    # bash reads the printed word back as exactly the call id
    echoed = subprocess.run(
        ["bash", "-c", f"printf %s {word}"], capture_output=True, check=True, env=clean_env(cli.tmp)
    ).stdout
    assert echoed.decode("utf-8") == call_id


def test_ask_before_refuses_a_name_that_is_not_a_builtin_tool_listing_the_valid_ones(
    cli: Cli,
) -> None:
    result = cli("run", "go", "--model", _done(cli), "--ask-before", "bash,rm_rf")
    assert result.returncode == 2
    assert "'rm_rf' is not a built-in tool" in result.stderr
    assert "read_file, list_dir, grep, write_file, edit_file, bash" in result.stderr
    assert not cli.session_ids()


def test_the_help_names_every_builtin_tool_ask_before_takes() -> None:
    assert BUILTIN_NAMES_TEXT == ", ".join(tool.name for tool in builtin_tools())


def test_approval_policy_never_rejects_the_ask_and_the_turn_goes_on(cli: Cli) -> None:
    script = cli.script([_asking_step(), {"text": "Could not run it."}])
    result = cli(
        "run", "go", "--model", script, "--ask-before", "bash", "--approval-policy", "never"
    )
    assert result.returncode == 0, result.stderr
    assert "! approval rejected for bash (b1)" in result.stdout
    events = raw_events(cli.log_path(session_id_of(result)))
    assert [e["data"]["policy"] for e in _of(events, "approval/policy")] == ["never"]
    assert [e["data"]["outcome"] for e in _of(events, "approval/decided")] == ["rejected"]
    assert _ran(cli) == []
    refused = cli("run", "go", "--model", script, "--approval-policy", "sometimes")
    assert refused.returncode == 2 and "'sometimes' is not an approval policy" in refused.stderr


def test_auto_approve_runs_the_call_once_and_records_the_decision(cli: Cli) -> None:
    script = cli.script([_asking_step(), {"text": "Ran it."}])
    result = cli("run", "go", "--model", script, "--ask-before", "bash", "--auto-approve", "bash")
    assert result.returncode == 0, result.stderr
    events = raw_events(cli.log_path(session_id_of(result)))
    assert [e["data"]["outcome"] for e in _of(events, "approval/decided")] == ["allowed-once"]
    assert _ran(cli) == ["ran"]


# --- approve, deny, resume -------------------------------------------------------------------


def test_approve_from_a_second_process_then_resume_runs_the_body_once(cli: Cli) -> None:
    session_id = _paused_run(cli)
    recorded = ok(cli("approve", session_id, *_store(cli)))
    assert f"recorded: call b1 (bash) of session {session_id} is allowed-once" in recorded.stdout
    resume = f"duraloop resume {session_id} --model SPEC --store jsonl:{cli.store}"
    assert resume in recorded.stdout  # no model is known here: a placeholder
    assert _ran(cli) == []  # recorded, not run: no --continue
    listed = ok(cli("pending", *_store(cli))).stdout
    assert "paused: call b1 (bash) is decided allowed-once (the turn has not gone on yet)" in listed
    again = cli("approve", session_id, "b1", *_store(cli))
    assert again.returncode == 2 and "is already decided (allowed-once)" in again.stderr
    resumed = cli("resume", session_id, "--model", _done(cli))
    assert resumed.returncode == 0, resumed.stderr
    assert "── turn 1 goes on" in resumed.stdout and "── turn 1 completed" in resumed.stdout
    assert _ran(cli) == ["ran"]
    assert "valid" in ok(cli("check", session_id)).stdout
    events = raw_events(cli.log_path(session_id))
    assert [e["data"]["callId"] for e in _of(events, "tool/call")] == ["l1", "b1", "l2"]


def test_approve_with_continue_runs_the_turn_on_live_and_exits_0(cli: Cli) -> None:
    session_id = _paused_run(cli)
    result = cli("approve", session_id, "b1", "--continue", "--model", _done(cli), *_store(cli))
    assert result.returncode == 0, result.stderr
    assert "✓ bash" in result.stdout and "All done." in result.stdout
    assert session_id_of(result) == session_id
    assert _ran(cli) == ["ran"]
    assert "no paused sessions in" in ok(cli("pending", *_store(cli))).stderr


def test_deny_with_a_reason_reaches_the_models_next_request_as_the_calls_error(cli: Cli) -> None:
    session_id = _paused_run(cli)
    result = cli(
        "deny",
        session_id,
        "--reason",
        "use git clean instead",
        "--continue",
        "--model",
        _done(cli, "Understood."),
        *_store(cli),
    )
    assert result.returncode == 0, result.stderr
    assert "is rejected; the model is told: use git clean instead" in result.stdout
    assert _ran(cli) == []
    messages = json.loads(ok(cli("show", session_id, "--messages", "--json")).stdout)
    # The history of the second request: everything before its answer ("Understood.").
    answer = next(i for i, m in enumerate(messages) if "Understood." in json.dumps(m))
    results = {
        block["toolCallId"]: block
        for message in messages[:answer]
        for block in message.get("content", [])
        if block.get("type") == "tool-result"
    }
    assert set(results) == {"l1", "b1", "l2"}
    assert results["b1"]["isError"] is True
    assert "use git clean instead" in results["b1"]["content"][0]["text"]


def test_a_continued_turn_keeps_asking_about_the_tools_the_session_asked_about(cli: Cli) -> None:
    session_id = _paused_run(cli)
    second = {"text": "Once more.", "tool_calls": [_bash("b2", "echo again >> ran.txt")]}
    # No --ask-before here: the session asked about bash, so bash asks again.
    result = cli("approve", session_id, "--continue", "--model", cli.script([second]), *_store(cli))
    assert result.returncode == 3, result.stderr
    assert "paused: call b2 (bash) waits for approval" in result.stdout
    assert _ran(cli) == ["ran"]


def test_approve_a_call_that_is_not_waiting_exits_2_naming_the_waiting_call(cli: Cli) -> None:
    session_id = _paused_run(cli)
    result = cli("approve", session_id, "l2", *_store(cli))
    assert result.returncode == 2
    assert result.stderr.startswith("ApprovalError: call 'l2' is not waiting for approval")
    assert "the waiting call is 'b1' (bash)" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_approve_or_deny_a_session_that_is_not_paused_exits_2(cli: Cli) -> None:
    session_id = session_id_of(ok(cli("run", "hi", "--model", _done(cli))))
    for command in ("approve", "deny"):
        result = cli(command, session_id, *_store(cli))
        assert result.returncode == 2
        assert f'ApprovalError: session "{session_id}" is not paused' in result.stderr
        assert f"`duraloop pending --store jsonl:{cli.store}`" in result.stderr


def test_approve_while_another_process_writes_the_session_exits_2_with_one_line(
    cli: Cli,
) -> None:
    session_id = _paused_run(cli)
    setup = SessionSetup(store=JsonlStore(cli.store), model=ScriptedModel([]), tools=[])
    loop, _ = resume_session(session_id, setup)  # this test process holds the writer lock
    try:
        result = cli("approve", session_id, "--continue", "--model", _done(cli), *_store(cli))
        listed = cli("pending", *_store(cli))  # read-only: no lock needed
    finally:
        loop.close()
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f'SessionLockedError: session "{session_id}" is being written by another process'
    )
    assert listed.returncode == 0 and "paused: call b1 (bash) waits for approval" in listed.stdout
    assert not _of(raw_events(cli.log_path(session_id)), "approval/decided")


def test_resume_of_a_paused_session_shows_the_ask_and_exits_3_and_refuses_a_prompt(
    cli: Cli,
) -> None:
    session_id = _paused_run(cli)
    shown = cli("resume", session_id)
    assert shown.returncode == 3, shown.stderr
    assert "paused: call b1 (bash) waits for approval" in shown.stdout
    prompted = cli("resume", session_id, "something else", "--model", _done(cli))
    assert prompted.returncode == 2
    assert f'ApprovalError: session "{session_id}" is paused: call b1 (bash)' in prompted.stderr
    assert "decide it first" in prompted.stderr
    again = cli("run", "something else", "--session", session_id, "--model", _done(cli))
    assert again.returncode == 2 and "so no new turn can start" in again.stderr
    events = raw_events(cli.log_path(session_id))
    assert len(_of(events, "turn/start")) == 1 and not _of(events, "turn/end")


def test_approve_without_continue_refuses_model_flags_but_not_the_model_environment(
    cli: Cli,
) -> None:
    session_id = _paused_run(cli)
    refused = cli("approve", session_id, "--max-tokens", "5", *_store(cli))
    assert refused.returncode == 1
    assert "--max-tokens is used only with --continue" in refused.stderr
    env = clean_env(cli.tmp, DURALOOP_MODEL=_done(cli))
    ok(cli("approve", session_id, *_store(cli), env=env))


def test_approve_records_a_decision_even_where_the_sessions_workspace_is_missing(
    cli: Cli,
) -> None:
    session_id = _paused_run(cli)
    cli.cwd.rename(cli.tmp / "elsewhere")  # as on another machine
    result = cli("approve", session_id, *_store(cli))
    assert result.returncode == 0, result.stderr
    assert "is allowed-once" in result.stdout


def test_check_says_a_paused_turn_is_paused_not_that_it_needs_closing(cli: Cli) -> None:
    session_id = _paused_run(cli)
    result = ok(cli("check", session_id))
    assert "turn 1 is paused: a call waits for approval" in result.stdout
    assert "closer(s)" not in result.stdout


def test_ls_lists_a_paused_session_as_paused_not_open(cli: Cli) -> None:
    session_id = _paused_run(cli)
    rows = json.loads(ok(cli("ls", "--json")).stdout)
    assert [row["lastTurnEnd"] for row in rows if row["id"] == session_id] == ["paused"]


# --- pending ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_pending_lists_each_paused_session_with_its_ask_and_nothing_else(
    cli: Cli, kind: str
) -> None:
    if kind == "sqlite" and not HAS_SQLITE:
        pytest.skip("this build has no SQLite store")
    spec = f"jsonl:{cli.store}" if kind == "jsonl" else f"sqlite:{cli.tmp / 'sessions.db'}"
    store = ("--store", spec)
    empty = cli("pending", *store)
    assert empty.returncode == 0 and f"no paused sessions in {spec}" in empty.stderr
    asking = ("--model", cli.script([_asking_step()]), "--ask-before", "bash", *store)
    paused = cli("run", "go", *asking, store=False)
    assert paused.returncode == 3, paused.stderr
    decided = cli("run", "go", *asking, store=False)
    assert decided.returncode == 3, decided.stderr
    ok(cli("deny", session_id_of(decided), "--reason", "no", *store))
    ok(cli("run", "hi", "--model", _done(cli), *store, store=False))
    listed = cli("pending", *store)
    assert listed.returncode == 0, listed.stderr
    sessions = re.findall(r"^session (\S+) \(turn 1\)$", listed.stdout, re.MULTILINE)
    assert sorted(sessions) == sorted([session_id_of(paused), session_id_of(decided)])
    assert "  paused: call b1 (bash) waits for approval" in listed.stdout
    assert "  paused: call b1 (bash) is decided rejected with feedback: no" in listed.stdout
    approve = f"duraloop approve {session_id_of(paused)} b1 --continue --model SPEC --store {spec}"
    assert approve in listed.stdout


# --- chat ------------------------------------------------------------------------------------


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


def _chat_session(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout.splitlines()[0].removeprefix("session: ")


@pytest.mark.parametrize(
    ("answer", "outcome", "feedback"),
    [("y", "allowed-once", None), ("n", "rejected", None), ("not now", "rejected", "not now")],
)
def test_chat_asks_inline_and_the_next_line_answers(
    cli: Cli, answer: str, outcome: str, feedback: str | None
) -> None:
    script = cli.script([_asking_step(), {"text": "Done."}, {"text": "Next turn."}])
    result = _chat(cli, f"go\n{answer}\nthanks\n", "--model", script, "--ask-before", "bash")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "approval needed: bash (call b1)" in result.stdout
    assert "allow? [y]es / [n]o / or type feedback to reject with it: " in result.stdout
    events = raw_events(cli.log_path(_chat_session(result)))
    decided = _of(events, "approval/decided")
    assert [e["data"]["outcome"] for e in decided] == [outcome]
    assert decided[0]["data"].get("feedback") == feedback
    assert _ran(cli) == (["ran"] if outcome == "allowed-once" else [])
    assert [e["data"]["reason"]["kind"] for e in _of(events, "turn/end")] == ["completed"] * 2


def test_chat_at_the_end_of_input_pauses_and_a_later_chat_asks_first(cli: Cli) -> None:
    script = cli.script([_asking_step()])
    first = _chat(cli, "go\n", "--model", script, "--ask-before", "bash")
    assert first.returncode == 3, first.stdout + first.stderr
    session_id = _chat_session(first)
    approve = f"duraloop approve {session_id} b1 --continue --model {script} --ask-before bash"
    assert f"{approve} --store jsonl:{cli.store}" in first.stdout
    second = _chat(cli, "y\n", "--model", _done(cli), "--session", session_id)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "approval needed: bash (call b1)" in second.stdout
    assert "── turn 1 completed" in second.stdout
    assert _ran(cli) == ["ran"]


def test_chat_in_a_terminal_answers_with_the_line_typed_at_the_question_not_a_steer(
    cli: Cli,
) -> None:
    script = cli.script([_asking_step(), {"text": "Done."}])
    chat = PtyChat(cli, "--model", script, "--ask-before", "bash")
    try:
        chat.started()
        chat.type("go\n")
        chat.expect(r"allow\? \[y\]es")
        chat.type("too risky\n")
        events = chat.wait_log(lambda e: bool(_of(e, "turn/end")), "turn 1 to close")
        assert [e["data"].get("feedback") for e in _of(events, "approval/decided")] == ["too risky"]
        steered = [e for e in _of(events, "user/message") if "too risky" in json.dumps(e)]
        assert steered == []  # the answer, not a steer of the turn
        chat.expect_prompt()
        chat.type("/quit\n")
        assert chat.wait_exit() == 0
    finally:
        chat.close()


def test_ctrl_c_at_the_question_cancels_the_turn_and_the_ask(cli: Cli) -> None:
    chat = PtyChat(cli, "--model", cli.script([_asking_step()]), "--ask-before", "bash")
    try:
        chat.started()
        chat.type("go\n")
        chat.expect(r"allow\? \[y\]es")
        chat.type("\x03")
        events = chat.wait_log(lambda e: bool(_of(e, "turn/end")), "turn 1 to close")
        assert _of(events, "turn/end")[0]["data"]["reason"]["kind"] == "aborted"
        assert [e["data"]["outcome"] for e in _of(events, "approval/decided")] == ["cancelled"]
        assert _ran(cli) == []
        chat.expect(r"✗ list_dir cancelled, not run")  # b1 and l2 never started
        assert "⏵ bash" not in chat.output and chat.output.count("⏵ list_dir") == 1  # l1 ran
        chat.expect_prompt()
        chat.type("/quit\n")
        assert chat.wait_exit() == 0
    finally:
        chat.close()


# --- show and demo ---------------------------------------------------------------------------


def test_show_renders_the_ask_and_the_decision_and_marks_a_paused_turn(cli: Cli) -> None:
    session_id = _paused_run(cli)
    paused = ok(cli("show", session_id)).stdout
    assert '  ? bash (b1) asks for approval: tool "bash" requires approval' in paused
    assert "── turn 1 is paused: call b1 (bash) waits for approval" in paused
    assert "is open" not in paused
    ok(cli("deny", session_id, "--reason", "nope", *_store(cli)))
    decided = ok(cli("show", session_id)).stdout
    assert "  ! approval rejected for bash (b1): nope" in decided
    assert "── turn 1 is paused: call b1 (bash) is decided (rejected)" in decided


def test_demo_approvals_pauses_lists_approves_from_a_second_process_and_finishes(
    cli: Cli,
) -> None:
    result = cli("demo", "--approvals", "--dir", str(cli.tmp / "demo"))
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    parts = [
        "1. A turn pauses: write_file asks before it runs",
        "paused: call write-1 (write_file) waits for approval",
        "RELEASE.md exists: no",
        "2. A second process lists what waits",
        "$ duraloop pending --store jsonl:",
        "  │   paused: call write-1 (write_file) waits for approval",
        "3. A third process approves the write",
        "  │ recorded: call write-1 (write_file) of session ",
        "4. Resume from disk: the approved write runs once, the turn finishes",
        "✓ write_file",
        "RELEASE.md:\n  │ # Release notes\n  │ \n  │ - approvals survive restarts\n",
        "turn 1 completed, check: valid)",
    ]
    positions = [out.find(part) for part in parts]
    assert -1 not in positions, [p for p, at in zip(parts, positions, strict=True) if at < 0]
    assert positions == sorted(positions)
    assert out.count("✓ write_file") == 1
