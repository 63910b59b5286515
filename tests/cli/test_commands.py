"""The README's command-line contract, end to end: real `python -m duraloop` subprocesses,
a scripted model, a temp store and workspace per test, no network."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ._support import COMMAND, Cli, clean_env, ok, session_id_of

DSH_FIXTURE = (
    Path(__file__).resolve().parents[3]
    / "shared/fixtures/dsh-sessions/parallel-tool-calls/session.jsonl"
)

READ_TWO_WRITE_ONE: list[dict[str, Any]] = [
    {
        "text": "Reading both files.",
        "tool_calls": [
            {"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}},
            {"id": "r2", "name": "read_file", "arguments": {"path": "b.txt"}},
        ],
    },
    {
        "text": "Writing.",
        "tool_calls": [
            {
                "id": "w1",
                "name": "write_file",
                "arguments": {"path": "out.txt", "content": "alpha beta\n"},
            },
        ],
    },
    {"text": "Done: out.txt written."},
]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    c = Cli(tmp_path)
    (c.cwd / "a.txt").write_text("alpha\n", encoding="utf-8")
    (c.cwd / "b.txt").write_text("beta\n", encoding="utf-8")
    return c


def _types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def _of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def _result_call_id(event: dict[str, Any]) -> str:
    return str(event["data"]["message"]["source"]["callId"])


def _completed_session(cli: Cli) -> str:
    return session_id_of(
        ok(cli("run", "Combine a and b.", "--model", cli.script(READ_TWO_WRITE_ONE)))
    )


def _snapshot(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def _truncate_after_tool_call(path: Path, call_id: str) -> None:
    """Cut a log right after the `tool/call` of `call_id`: the final turn is left open,
    as a kill -9 at that point would leave it (every kept line is complete)."""
    lines = path.read_bytes().splitlines(keepends=True)
    for index, line in enumerate(lines):
        row = json.loads(line)
        if row.get("type") == "tool/call" and row["data"]["callId"] == call_id:
            path.write_bytes(b"".join(lines[: index + 1]))
            return
    raise AssertionError(f"no tool/call for {call_id} in {path}")


# --- run -----------------------------------------------------------------------------------


def test_run_reads_two_files_in_parallel_writes_one_and_prints_the_session_id(cli: Cli) -> None:
    result = ok(cli("run", "Combine a and b.", "--model", cli.script(READ_TWO_WRITE_ONE)))
    session_id = session_id_of(result)

    assert (cli.cwd / "out.txt").read_text(encoding="utf-8") == "alpha beta\n"
    out = result.stdout
    for expected in (
        "── turn 1",
        "Reading both files.",
        "read_file",
        "write_file",
        "Done: out.txt written.",
        "turn 1 completed",
    ):
        assert expected in out
    assert out.count("✓ read_file") == 2 and out.count("✓ write_file") == 1
    assert "Traceback" not in result.stderr

    events = cli.events(session_id)
    seq_of = {
        (e["type"], e["data"].get("callId") or _result_call_id(e)): e["seq"]
        for e in events
        if e["type"] in ("tool/call", "tool/result")
    }
    # Both reads started before either committed (one parallel run); the write is a barrier after
    # them.
    assert max(seq_of["tool/call", "r1"], seq_of["tool/call", "r2"]) < min(
        seq_of["tool/result", "r1"], seq_of["tool/result", "r2"]
    )
    assert seq_of["tool/call", "w1"] > seq_of["tool/result", "r2"]
    assert events[-1]["type"] == "turn/end" and events[-1]["data"]["reason"] == {
        "kind": "completed"
    }
    ok(cli("check", session_id))


def test_run_provider_error_exits_1_with_one_line_and_a_closed_log(cli: Cli) -> None:
    script = cli.script([{"error": {"code": "AUTH", "message": "bad key"}}])
    result = cli("run", "hello", "--model", script)

    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "ExceptionGroup" not in result.stderr
    error_lines = [line for line in result.stderr.splitlines() if "bad key" in line]
    assert len(error_lines) == 1 and error_lines[0].startswith("LlmError: "), result.stderr
    session_id = session_id_of(result)
    events = cli.events(session_id)
    last = events[-1]
    assert last["type"] == "turn/end"
    assert last["data"]["reason"]["kind"] == "error"
    assert last["data"]["reason"]["error"]["code"] == "AUTH"
    ok(cli("check", session_id))


def test_run_session_creates_that_id_then_continues_it(cli: Cli) -> None:
    first = ok(
        cli("run", "one", "--session", "my-work", "--model", cli.script([{"text": "First."}]))
    )
    assert session_id_of(first) == "my-work"
    assert cli.session_ids() == {"my-work"}

    second = ok(
        cli("run", "two", "--session", "my-work", "--model", cli.script([{"text": "Second."}]))
    )
    assert session_id_of(second) == "my-work"
    assert "── turn 2" in second.stdout and "Second." in second.stdout

    events = cli.events("my-work")
    assert [e["data"]["turn"] for e in _of(events, "turn/start")] == [1, 2]
    assert [e["data"]["reason"]["kind"] for e in _of(events, "turn/end")] == [
        "completed",
        "completed",
    ]
    assert _types(events).count("session/end-seed") == 1  # the second process resumed the log
    messages = json.loads(ok(cli("show", "my-work", "--messages", "--json")).stdout)
    texts = [b["text"] for m in messages for b in m["content"] if b.get("type") == "text"]
    assert texts == ["one", "First.", "two", "Second."]


def test_run_max_steps_blocks_the_turn_and_exits_1(cli: Cli) -> None:
    script = cli.script(
        [
            {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}}]},
            {"text": "never requested"},
        ]
    )
    result = cli("run", "read a", "--model", script, "--max-steps", "1")
    assert result.returncode == 1
    assert "blocked" in result.stdout
    events = cli.events(session_id_of(result))
    assert events[-1]["type"] == "turn/end" and events[-1]["data"]["reason"]["kind"] == "blocked"
    assert len(_of(events, "step/start")) == 1
    assert [_result_call_id(e) for e in _of(events, "tool/result")] == ["r1"]


def test_run_system_prompt_from_file(cli: Cli) -> None:
    prompt_file = cli.tmp / "system.txt"
    prompt_file.write_text("You are the test system prompt.\nSecond line.\n", encoding="utf-8")
    result = ok(
        cli("run", "hi", "--model", cli.script([{"text": "ok"}]), "--system", f"@{prompt_file}")
    )
    headers = _of(cli.events(session_id_of(result)), "request/header")
    assert headers and headers[0]["data"]["header"]["system"] == prompt_file.read_text(
        encoding="utf-8"
    )


def test_run_system_prompt_text(cli: Cli) -> None:
    result = ok(cli("run", "hi", "--model", cli.script([{"text": "ok"}]), "--system", "Be terse."))
    headers = _of(cli.events(session_id_of(result)), "request/header")
    assert headers[0]["data"]["header"]["system"] == "Be terse."


def test_run_model_from_duraloop_model_env(cli: Cli) -> None:
    env = clean_env(cli.tmp, DURALOOP_MODEL=cli.script([{"text": "From the environment."}]))
    result = ok(cli("run", "hi", env=env))
    assert "From the environment." in result.stdout


def test_run_without_a_model_points_to_the_demo(cli: Cli) -> None:
    result = cli("run", "hi")
    assert result.returncode in (1, 2)
    assert "duraloop demo" in result.stderr
    assert "DURALOOP_MODEL" in result.stderr
    assert result.stdout == ""
    assert cli.session_ids() == set()  # nothing was created


# --- show ----------------------------------------------------------------------------------


def test_show_transcript(cli: Cli) -> None:
    session_id = _completed_session(cli)
    out = ok(cli("show", session_id)).stdout
    assert f"session {session_id}" in out
    for expected in (
        "user: Combine a and b.",
        "assistant: Reading both files.",
        "→ read_file",
        "(r1)",
        "✓ r1 alpha",
        "✓ w1",
        "assistant: Done: out.txt written.",
        "turn 1 completed",
    ):
        assert expected in out, expected
    assert "is open" not in out


def test_show_events_json_is_jsonl_with_contiguous_seqs(cli: Cli) -> None:
    session_id = _completed_session(cli)
    stdout = ok(cli("show", session_id, "--events", "--json")).stdout
    events = [json.loads(line) for line in stdout.splitlines()]  # every line is one JSON value
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert all(isinstance(e["time"], int) for e in events)
    assert events[0]["type"] == "turn/start" and events[-1]["type"] == "turn/end"
    # The stored chunks are packed on disk; --events shows them one event per seq.
    assert "assistant/chunk" in _types(events)
    check = ok(cli("check", session_id)).stdout
    assert f"({len(events)} events, 1 turns)" in check


def test_show_messages_json_pairs_every_tool_call(cli: Cli) -> None:
    session_id = _completed_session(cli)
    messages = json.loads(ok(cli("show", session_id, "--messages", "--json")).stdout)
    assert isinstance(messages, list)
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "user",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    for index, message in enumerate(messages):
        calls = [b["id"] for b in message["content"] if b.get("type") == "tool-call"]
        if not calls:
            continue
        answers = [
            b["toolCallId"]
            for m in messages[index + 1 : index + 1 + len(calls)]
            for b in m["content"]
            if b.get("type") == "tool-result"
        ]
        assert answers == calls  # each call answered, in call order, right after it


def test_show_and_check_accept_a_session_file_path(cli: Cli) -> None:
    session_id = _completed_session(cli)
    path = cli.log_path(session_id)
    by_path = ok(cli("show", str(path), "--events", "--json", store=False)).stdout
    assert by_path == ok(cli("show", session_id, "--events", "--json")).stdout
    assert "turn 1 completed" in ok(cli("show", str(path), store=False)).stdout
    assert "valid" in ok(cli("check", str(path), store=False)).stdout


@pytest.mark.skipif(not DSH_FIXTURE.is_file(), reason="the shared dsh fixtures are not present")
def test_show_and_check_read_a_dsh_session_file(cli: Cli) -> None:
    before = _snapshot(DSH_FIXTURE)
    transcript = ok(cli("show", str(DSH_FIXTURE), store=False)).stdout
    assert "── turn 1" in transcript and "read" in transcript
    events = [
        json.loads(line)
        for line in ok(
            cli("show", str(DSH_FIXTURE), "--events", "--json", store=False)
        ).stdout.splitlines()
    ]
    assert [e["seq"] for e in events] == list(range(len(events)))
    calls = [
        b["id"]
        for m in json.loads(
            ok(cli("show", str(DSH_FIXTURE), "--messages", "--json", store=False)).stdout
        )
        for b in m["content"]
        if b.get("type") == "tool-call"
    ]
    assert len(calls) >= 2  # the fixture's parallel reads
    checked = ok(cli("check", str(DSH_FIXTURE), store=False)).stdout
    assert ": valid (" in checked
    assert _snapshot(DSH_FIXTURE) == before


# --- check ---------------------------------------------------------------------------------


def test_check_valid_session_exits_0_and_writes_nothing(cli: Cli) -> None:
    session_id = _completed_session(cli)
    path = cli.log_path(session_id)
    before = _snapshot(path)
    out = ok(cli("check", session_id)).stdout
    assert out.startswith(f"{session_id}: valid (")
    assert "open" not in out
    assert _snapshot(path) == before


def test_check_and_show_report_an_open_turn_without_closing_it(cli: Cli) -> None:
    session_id = _completed_session(cli)
    path = cli.log_path(session_id)
    _truncate_after_tool_call(path, "w1")
    before = _snapshot(path)

    checked = ok(cli("check", session_id)).stdout
    assert "valid" in checked and "INVALID" not in checked
    assert "turn 1 is open" in checked
    shown = ok(cli("show", session_id)).stdout
    assert "turn 1 is open" in shown
    events = cli.events(session_id)
    assert events[-1]["type"] == "tool/call"  # shown as stored: no closers appended
    ok(cli("show", session_id, "--messages", "--json"))
    ok(cli("ls"))
    assert _snapshot(path) == before  # show, check and ls never write


def test_check_corrupted_file_exits_1_with_a_report(cli: Cli) -> None:
    session_id = _completed_session(cli)
    path = cli.log_path(session_id)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[5] = b'{"type": "tool/result", "seq": broken\n'
    path.write_bytes(b"".join(lines))
    before = _snapshot(path)

    result = cli("check", session_id)
    assert result.returncode == 1
    assert "INVALID" in result.stdout
    assert "line 6" in result.stdout
    assert "Traceback" not in result.stderr
    assert _snapshot(path) == before


def test_check_unanswered_call_in_a_closed_turn_exits_1_with_a_report(cli: Cli) -> None:
    """A parseable log that breaks Law 4 (a closed step with an unanswered call)."""
    session_id = _completed_session(cli)
    events = [
        e
        for e in cli.events(session_id)
        if not (e["type"] == "tool/result" and _result_call_id(e) == "r2")
    ]
    renumber = {event["seq"]: seq for seq, event in enumerate(events)}
    for event in events:
        event["seq"] = renumber[event["seq"]]
        if "sourceEventSeqs" in event:
            event["sourceEventSeqs"] = [renumber[s] for s in event["sourceEventSeqs"]]
    header = cli.log_path(session_id).read_bytes().splitlines(keepends=True)[0]
    bad = cli.tmp / "unanswered.jsonl"
    bad.write_bytes(header + b"".join(json.dumps(e).encode() + b"\n" for e in events))

    result = cli("check", str(bad), store=False)
    assert result.returncode == 1
    assert "INVALID" in result.stdout
    assert "r2" in result.stdout
    assert re.search(r"^\s+- ", result.stdout, re.MULTILINE)  # one "  - problem" line at least


# --- fork ----------------------------------------------------------------------------------


def _two_turn_session(cli: Cli) -> str:
    ok(cli("run", "one", "--session", "parent", "--model", cli.script(READ_TWO_WRITE_ONE)))
    ok(cli("run", "two", "--session", "parent", "--model", cli.script([{"text": "Second."}])))
    return "parent"


def test_fork_at_a_turn_end_copies_the_prefix_and_appends_end_seed(cli: Cli) -> None:
    parent = _two_turn_session(cli)
    parent_events = cli.events(parent)
    first_end = _of(parent_events, "turn/end")[0]["seq"]

    result = ok(cli("fork", parent, "--at", str(first_end)))
    child = result.stdout.strip()
    assert child and child != parent and "\n" not in child
    assert child in cli.session_ids()

    child_events = cli.events(child)
    assert child_events[: first_end + 1] == parent_events[: first_end + 1]
    assert [e["type"] for e in child_events[first_end + 1 :]] == ["session/end-seed"]
    header = json.loads(cli.log_path(child).read_bytes().splitlines()[0])
    assert header["parentSession"] == parent
    ok(cli("check", child))
    assert cli.events(parent) == parent_events  # the parent is untouched


def test_fork_with_explicit_id_at_the_last_event(cli: Cli) -> None:
    parent = _two_turn_session(cli)
    assert ok(cli("fork", parent, "--id", "branch")).stdout.strip() == "branch"
    parent_events = cli.events(parent)
    child_events = cli.events("branch")
    assert child_events[:-1] == parent_events and child_events[-1]["type"] == "session/end-seed"


def test_fork_inside_a_closed_turn_closes_the_child_cut_with_crash_repair_closers(cli: Cli) -> None:
    parent = _two_turn_session(cli)
    parent_events = cli.events(parent)
    inside = _of(parent_events, "tool/call")[0]["seq"]  # r1's tool/call; r2's not yet recorded
    child = ok(cli("fork", parent, "--at", str(inside))).stdout.strip()
    child_events = cli.events(child)
    assert child_events[: inside + 1] == parent_events[: inside + 1]
    tail = child_events[inside + 1 :]
    assert [(e["type"], e["data"].get("error", {}).get("code")) for e in tail[:2]] == [
        ("tool/result", "TOOL_OUTCOME_UNKNOWN"),
        ("tool/result", "TOOL_NOT_STARTED"),
    ]
    assert _types(tail[2:]) == ["step/end", "turn/end", "session/end-seed"]
    assert tail[3]["data"]["reason"] == {"kind": "interrupted"}
    ok(cli("check", child))
    assert cli.events(parent) == parent_events  # the parent is untouched


# --- ls, resume, demo ----------------------------------------------------------------------


def test_ls_lists_ids_turns_and_last_reason(cli: Cli) -> None:
    ok(cli("run", "a", "--session", "done-twice", "--model", cli.script([{"text": "1"}])))
    ok(cli("run", "b", "--session", "done-twice", "--model", cli.script([{"text": "2"}])))
    failed = cli(
        "run",
        "c",
        "--session",
        "failed-once",
        "--model",
        cli.script([{"error": {"code": "AUTH", "message": "bad key"}}]),
    )
    assert failed.returncode == 1

    out = ok(cli("ls")).stdout
    rows = {
        line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
        for line in out.splitlines()
        if line.startswith("│")
    }
    assert set(rows) == {"done-twice", "failed-once"}
    assert rows["done-twice"][1:] == ["2", "completed"]
    assert rows["failed-once"][1:] == ["1", "error"]


def test_ls_of_an_empty_or_missing_store_says_so_naming_the_store(cli: Cli) -> None:
    missing = cli.tmp / "no-such-store"
    listed = ok(cli("ls", "--store", str(missing), store=False))
    assert listed.stdout == ""
    assert f"no sessions in jsonl:{missing} ({missing} does not exist)" in listed.stderr
    assert not missing.exists()  # listing never creates a store
    assert ok(cli("ls", "--store", str(missing), "--json", store=False)).stdout.strip() == "[]"
    ok(cli("run", "a", "--model", cli.script([{"text": "1"}])))
    assert "no sessions" not in ok(cli("ls")).stderr


def test_ls_never_cuts_a_long_id(cli: Cli) -> None:
    long_id = "a-rather-long-session-id-" + "x" * 40
    ok(cli("run", "a", "--session", long_id, "--model", cli.script([{"text": "1"}])))
    assert long_id in ok(cli("ls")).stdout


def test_resume_without_prompt_reports_what_repair_did(cli: Cli) -> None:
    session_id = _completed_session(cli)
    balanced = ok(cli("resume", session_id))
    assert "nothing to repair" in balanced.stdout

    _truncate_after_tool_call(cli.log_path(session_id), "w1")
    repaired = ok(cli("resume", session_id))
    assert "TOOL_OUTCOME_UNKNOWN for w1" in repaired.stdout
    assert "turn/end interrupted" in repaired.stdout
    events = cli.events(session_id)
    assert _types(events)[-3:] == ["tool/result", "step/end", "turn/end"]
    assert events[-1]["data"]["reason"] == {"kind": "interrupted"}
    checked = ok(cli("check", session_id)).stdout
    assert "open" not in checked

    again = ok(cli("resume", session_id))
    assert "nothing to repair" in again.stdout


def test_demo_runs_offline_and_its_show_command_works(cli: Cli) -> None:
    base = cli.tmp / "demo"
    result = ok(cli("demo", "--dir", str(base)))
    match = re.search(r"duraloop show (\S+) --store (\S+)", result.stdout)
    assert match, result.stdout
    assert Path(match.group(2)) == base / "sessions"
    assert "check: valid" in result.stdout
    assert "TOOL_OUTCOME_UNKNOWN" in result.stdout and "TOOL_NOT_STARTED" in result.stdout
    shown = ok(
        subprocess.run(
            [*cli.argv("show", match.group(1), store=False), "--store", match.group(2)],
            capture_output=True,
            text=True,
            encoding="utf-8",
            env=clean_env(cli.tmp),
            timeout=90,
            check=False,
        )
    )
    assert "turn 3 completed" in shown.stdout


# --- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["show"],
        ["show", "--events", "--json"],
        ["check"],
        ["resume"],
        ["resume", "PROMPT", "--model", "SCRIPT"],
    ],
)
def test_unknown_session_id_exits_1_with_one_line(cli: Cli, command: list[str]) -> None:
    name, *rest = command
    rest = [cli.script([{"text": "unused"}]) if arg == "SCRIPT" else arg for arg in rest]
    result = cli(name, "no-such-session", *rest)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("SessionNotFoundError: ")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "no-such-session" in result.stderr


def test_python_dash_m_duraloop_help(tmp_path: Path) -> None:
    result = subprocess.run(
        [*COMMAND, "--help"],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        env=clean_env(tmp_path, COLUMNS="200"),
    )
    assert result.returncode == 0
    for command in ("run", "resume", "fork", "show", "check", "ls", "demo"):
        assert command in result.stdout


def test_run_shows_each_model_retry_as_it_happens(cli: Cli) -> None:
    # User trial: retries were invisible (a silent wait, then the final error).
    script = cli.script(
        [{"error": {"code": "SERVER", "message": "overloaded"}}, {"text": "fine now"}]
    )
    result = ok(cli("run", "hello", "--model", script))
    retry_lines = [line for line in result.stdout.splitlines() if "↻" in line]
    assert len(retry_lines) == 1, result.stdout
    assert (
        "[SERVER]" in retry_lines[0]
        and "overloaded" in retry_lines[0]
        and "retry 1/5" in retry_lines[0]
    )
    assert result.stdout.index("↻") < result.stdout.index("fine now")


def test_run_refuses_an_empty_prompt_before_writing_anything(cli: Cli) -> None:
    result = cli("run", "   ", "--model", cli.script([{"text": "never"}]))
    assert result.returncode == 1
    assert result.stderr.startswith("UsageError: the prompt is empty"), result.stderr
    assert "session:" not in result.stdout


def test_resume_without_a_prompt_refuses_model_flags_it_would_ignore(cli: Cli) -> None:
    session_id = session_id_of(ok(cli("run", "hi", "--model", cli.script([{"text": "hello"}]))))
    result = cli("resume", session_id, "--max-tokens", "5")
    assert result.returncode == 1
    assert (
        "UsageError: --max-tokens is used only when resume runs a turn; add a PROMPT to run one, "
        "or drop it" in result.stderr
    )
    both = cli("resume", session_id, "--system", "Be terse.", "--max-tokens", "5")
    assert (
        "UsageError: --system, --max-tokens are used only when resume runs a turn; " in both.stderr
    )
    assert "or drop them to just repair the session" in both.stderr


def test_resume_and_chat_take_a_system_prompt_for_their_turns(cli: Cli) -> None:
    session_id = session_id_of(ok(cli("run", "hi", "--model", cli.script([{"text": "hello"}]))))
    ok(
        cli(
            "resume",
            session_id,
            "again",
            "--model",
            cli.script([{"text": "ok"}]),
            "--system",
            "Resumed system.",
        )
    )
    chat = subprocess.run(
        cli.argv(
            "chat",
            "--model",
            cli.script([{"text": "ok"}]),
            "--session",
            session_id,
            "--system",
            "Chat system.",
        ),
        input="third\n",
        capture_output=True,
        text=True,
        env=clean_env(cli.tmp),
        timeout=90,
        check=False,
    )
    assert chat.returncode == 0, chat.stderr
    systems = [e["data"]["header"]["system"] for e in _of(cli.events(session_id), "request/header")]
    assert systems[1:] == ["Resumed system.", "Chat system."]


@pytest.mark.parametrize("encoding", ["jsonl", "jsonl+zstd"])
def test_show_and_check_accept_a_session_folder(cli: Cli, encoding: str) -> None:
    store = f"{encoding}:{cli.store}"
    session_id = session_id_of(
        ok(
            cli(
                "run",
                "hi",
                "--model",
                cli.script([{"text": "hello"}]),
                "--store",
                store,
                store=False,
            )
        )
    )
    folder = next(cli.store.glob(f"*/{session_id}"))
    shown = ok(cli("show", str(folder), "--store", str(cli.tmp / "elsewhere"), store=False)).stdout
    assert f"session {session_id}" in shown and "assistant: hello" in shown
    checked = ok(
        cli("check", str(folder), "--store", str(cli.tmp / "elsewhere"), store=False)
    ).stdout
    assert checked.startswith(f"{session_id}: valid")


def test_demo_dir_that_is_a_file_is_a_one_line_usage_error(cli: Cli) -> None:
    target = cli.cwd / "a-file"
    target.write_text("x", encoding="utf-8")
    result = cli("demo", "--dir", str(target))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("UsageError: --dir"), result.stderr
