"""The CLI's rendering boundary (cli/_render.py): untrusted text prints exactly as written.

Session ids, prompts, paths, model text, tool output and log payloads used to be read as Rich
markup (`--session "[/bold]"` ended in a `MarkupError` traceback, `a[b]c` printed as `ac`)
and terminal escape sequences from a model or a tool reached the terminal raw (`\\x1b[2J`
cleared the screen). The pure helpers are tested directly; every command is then driven as a
real subprocess with a scripted model, asserting the exact text appears, no traceback, and no
raw control byte on stdout or stderr.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from duraloop.cli._render import MAX_ID_CHARS, VisibleFormatter, ident, visible

from ._support import TIMEOUT, Cli, clean_env, ok, session_id_of

MARKUP_IDS = ["[/bold]", "a[b]c", "[red]x[/red]"]
# What a terminal acts on: C0 controls but newline and tab, DEL, and the C1 range.
_RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")
# A model's and a tool's hostile text: clear screen, set the title (OSC ... BEL), a C1 CSI,
# carriage return and backspace (overwrite what was shown).
HOSTILE = "A\x1b[2J\x1b]0;owned\x07\x9b31mB\rC\bD"
HOSTILE_SHOWN = r"A\x1b[2J\x1b]0;owned\x07\x9b31mB\x0dC\x08D"


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def _env(cli: Cli) -> dict[str, str]:
    env = clean_env(cli.tmp)
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):  # rich would style output
        env.pop(name, None)
    return env


def _run(
    cli: Cli, *args: str, stdin: str = "", store: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run one command with stdin; assert no traceback and no raw control byte in its output."""
    result = subprocess.run(
        cli.argv(*args, store=store),
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=_env(cli),
        timeout=TIMEOUT,
        check=False,
        cwd=cli.tmp,
    )
    for stream in (result.stdout, result.stderr):
        assert "Traceback" not in stream and "MarkupError" not in stream, stream
        assert _RAW_CONTROL.search(stream) is None, repr(stream)
    return result


def _lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line.rstrip() for line in result.stdout.splitlines()]


# --- the helpers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J", r"\x1b[2J"),
        ("\x1b]0;title\x07", r"\x1b]0;title\x07"),
        ("\x9b2J", r"\x9b2J"),
        ("a\rb\bc\x7f", r"a\x0db\x08c\x7f"),
        ("\u202eevil", r"\u202eevil"),
        ("\udc80", r"\udc80"),
    ],
    ids=["csi", "osc-title", "c1-csi", "cr-backspace-del", "bidi-override", "lone-surrogate"],
)
def test_visible_shows_each_terminal_control_as_an_escape(raw: str, shown: str) -> None:
    assert visible(raw) == shown
    assert visible(shown) == shown  # escaping twice changes nothing


def test_visible_keeps_newlines_tabs_markup_and_unicode() -> None:
    text = "line 1\n\tline 2 [/bold] café ✓"
    assert visible(text) == text


def test_ident_escapes_line_breaks_keeps_spaces_and_bounds_the_length() -> None:
    assert ident("a  b\n\tc") == r"a  b\x0a\x09c"
    assert ident("x" * MAX_ID_CHARS) == "x" * MAX_ID_CHARS  # every valid id is shown whole
    assert ident("x" * 1000) == "x" * (MAX_ID_CHARS - 1) + "…"


def test_log_lines_for_the_terminal_show_controls_in_their_arguments_as_escapes() -> None:
    record = logging.makeLogRecord(
        {"msg": "session %s repaired", "args": ("id\x1b]0;owned\x07",), "levelname": "WARNING"}
    )
    assert (
        VisibleFormatter("%(levelname)s %(message)s").format(record)
        == r"WARNING session id\x1b]0;owned\x07 repaired"
    )


# --- markup-looking ids, prompts, paths and tool output through every command ---------------

_READ_AND_ANSWER: list[dict[str, Any]] = [
    {
        "text": "Reading [dim]it[/dim].",
        "tool_calls": [
            {"id": "call[/x]", "name": "read_file", "arguments": {"path": "[b]notes[_b].txt"}},
        ],
    },
    {"text": "It says [/bold] [red]x[/red]."},
]


@pytest.mark.parametrize("session_id", MARKUP_IDS)
def test_markup_looking_ids_and_text_print_as_written_in_every_command(
    cli: Cli, session_id: str
) -> None:
    (cli.cwd / "[b]notes[_b].txt").write_text("see [/i] and [link=x]y[/link]\n", encoding="utf-8")

    run = _run(
        cli,
        "run",
        "Read [b]notes[_b].txt [/bold]",
        "--session",
        session_id,
        "--model",
        cli.script(_READ_AND_ANSWER),
    )
    ok(run)
    assert session_id_of(run) == session_id
    assert '⏵ read_file {"path":"[b]notes[_b].txt"}' in run.stdout
    assert "see [/i] and [link=x]y[/link]" in run.stdout
    assert "It says [/bold] [red]x[/red]." in run.stdout

    listing = ok(_run(cli, "ls"))
    assert any(line.startswith(f"│ {session_id} ") for line in _lines(listing)), listing.stdout

    assert ok(_run(cli, "check", session_id)).stdout.startswith(f"{session_id}: valid ")
    assert (
        ok(_run(cli, "resume", session_id)).stdout.strip()
        == f"{session_id}: the log was balanced; nothing to repair"
    )

    transcript = ok(_run(cli, "show", session_id)).stdout
    assert transcript.startswith(f"session {session_id} created ")
    for shown in (
        "user: Read [b]notes[_b].txt [/bold]",
        "assistant: Reading [dim]it[/dim].",
        "→ read_file",
        "(call[/x])",
        "✓ call[/x] ",
        "see [/i] and [link=x]y[/link]",
    ):
        assert shown in transcript, (shown, transcript)

    events = ok(_run(cli, "show", session_id, "--events")).stdout
    assert '"text": "Read [b]notes[_b].txt [/bold]"' in events
    messages = ok(_run(cli, "show", session_id, "--messages")).stdout
    assert '"text": "It says [/bold] [red]x[/red]."' in messages
    as_json = [
        json.loads(line) for line in ok(_run(cli, "show", session_id, "--json")).stdout.splitlines()
    ]
    assert as_json[0]["type"] == "turn/start"

    resumed = ok(
        _run(cli, "resume", session_id, "again [/x]", "--model", cli.script([{"text": "ok [/y]"}]))
    )
    assert f"{session_id}: the log was balanced; nothing to repair" in resumed.stderr
    assert "ok [/y]" in resumed.stdout and session_id_of(resumed) == session_id

    child_id = session_id + "[/child]"
    assert ok(_run(cli, "fork", session_id, "--id", child_id)).stdout.strip() == child_id
    assert ok(_run(cli, "show", child_id)).stdout.startswith(f"session {child_id} created ")

    chat = ok(
        _run(
            cli,
            "chat",
            "--session",
            session_id,
            "--model",
            cli.script([{"text": "chat [/z]"}]),
            stdin="hello [/q]\n",
        )
    )
    # the resumed history's hint: the id shell-quoted, the store in use named
    assert (
        f"`duraloop show {shlex.quote(session_id)} --store jsonl:{cli.store}` prints all"
        in chat.stdout
    )
    assert "chat [/z]" in chat.stdout
    assert chat.stdout.rstrip().endswith(f"session: {session_id}")


def test_show_and_check_of_a_log_file_under_a_markup_path_print_the_path_as_written(
    cli: Cli,
) -> None:
    session_id = session_id_of(ok(_run(cli, "run", "hi", "--model", cli.script([{"text": "k"}]))))
    folder = cli.tmp / "[/bold]" / "a[b]c"
    folder.mkdir(parents=True)
    copy = folder / "session.jsonl"
    shutil.copy(cli.log_path(session_id), copy)
    copy.with_name("broken.jsonl").write_text("{[/red]\n", encoding="utf-8")

    assert ok(_run(cli, "show", str(copy), store=False)).stdout.startswith(
        f"session {session_id} created "
    )
    assert ok(_run(cli, "check", str(copy), store=False)).stdout.startswith(f"{session_id}: valid ")
    broken = _run(cli, "check", str(copy.with_name("broken.jsonl")), store=False)
    assert broken.returncode == 1
    assert broken.stdout.startswith(f"{copy.with_name('broken.jsonl')}: INVALID"), broken.stdout


def test_demo_in_a_markup_looking_dir_prints_the_dir_as_written(cli: Cli) -> None:
    target = cli.tmp / "[/bold]demo[red]"
    result = ok(_run(cli, "demo", "--dir", str(target)))
    assert f"--store {target / 'sessions'}" in result.stdout


def test_an_error_message_holding_markup_prints_as_written(cli: Cli) -> None:
    script = cli.script([{"error": {"code": "AUTH", "message": "denied [/bold] for [red]you"}}])
    result = _run(cli, "run", "hi", "--model", script)
    assert result.returncode == 1
    assert "denied [/bold] for [red]you" in result.stdout  # the turn's end
    assert "denied [/bold] for [red]you" in result.stderr  # the one-line error


# --- terminal escape sequences from the model and from tools --------------------------------


def _hostile_script(cli: Cli) -> str:
    return cli.script(
        [
            {
                "text": f"model {HOSTILE}",
                "reasoning": f"think {HOSTILE}",
                "tool_calls": [
                    {"id": "r1", "name": "read_file", "arguments": {"path": "hostile.txt"}},
                    {"id": "b1", "name": "bash", "arguments": {"command": "cat hostile.txt"}},
                ],
            },
            {"text": f"end {HOSTILE}"},
        ]
    )


def test_escape_sequences_from_the_model_and_tools_are_shown_escaped_by_run_and_show(
    cli: Cli,
) -> None:
    (cli.cwd / "hostile.txt").write_text(f"file {HOSTILE}", encoding="utf-8")
    run = ok(_run(cli, "run", "go", "--model", _hostile_script(cli)))
    session_id = session_id_of(run)
    assert f"model {HOSTILE_SHOWN}" in run.stdout  # streamed text
    assert f"end {HOSTILE_SHOWN}" in run.stdout
    # Tool output is folded to one line in the live view (the \r is whitespace there).
    assert (
        "✓ read_file" in run.stdout
        and r"file A\x1b[2J\x1b]0;owned\x07\x9b31mB C\x08D" in run.stdout
    )

    transcript = ok(_run(cli, "show", session_id)).stdout
    assert f"assistant: model {HOSTILE_SHOWN}" in transcript
    assert r"thinking: think A\x1b[2J" in transcript
    assert r"✓ r1 file A\x1b[2J" in transcript and r"✓ b1 file A\x1b[2J" in transcript
    assert r"\x9b31mB" in ok(_run(cli, "show", session_id, "--events")).stdout
    assert r"\x9b31mB" in ok(_run(cli, "show", session_id, "--messages")).stdout

    resumed = ok(
        _run(cli, "resume", session_id, "more", "--model", cli.script([{"text": HOSTILE}]))
    )
    assert HOSTILE_SHOWN in resumed.stdout


def test_escape_sequences_are_shown_escaped_by_chat_its_history_and_show_command(cli: Cli) -> None:
    (cli.cwd / "hostile.txt").write_text(f"file {HOSTILE}", encoding="utf-8")
    first = ok(_run(cli, "chat", "--model", _hostile_script(cli), stdin="go\n"))
    assert f"end {HOSTILE_SHOWN}" in first.stdout
    session_id = first.stdout.rstrip().rsplit("session: ", 1)[1]  # after the last `you> `

    again = ok(
        _run(
            cli,
            "chat",
            "--session",
            session_id,
            "--model",
            cli.script([{"text": HOSTILE}]),
            stdin=f"steer {HOSTILE}\n/show\n",
        )
    )
    assert f"assistant: model {HOSTILE_SHOWN}" in again.stdout  # recent history
    assert HOSTILE_SHOWN in again.stdout


def test_a_session_id_holding_escape_sequences_is_shown_escaped(cli: Cli) -> None:
    session_id = "id\x1b]0;owned\x07\x9b"
    run = ok(
        _run(cli, "run", "hi", "--session", session_id, "--model", cli.script([{"text": "k"}]))
    )
    assert session_id_of(run) == r"id\x1b]0;owned\x07\x9b"
    assert r"│ id\x1b]0;owned\x07\x9b " in ok(_run(cli, "ls")).stdout
    assert ok(_run(cli, "check", session_id)).stdout.startswith(r"id\x1b]0;owned\x07\x9b: valid")
    assert ok(_run(cli, "show", session_id)).stdout.startswith(
        r"session id\x1b]0;owned\x07\x9b created"
    )


def test_an_error_message_holding_escape_sequences_is_shown_escaped_on_stderr(cli: Cli) -> None:
    script = cli.script([{"error": {"code": "AUTH", "message": f"denied {HOSTILE}"}}])
    result = _run(cli, "run", "hi", "--model", script)
    assert result.returncode == 1
    assert r"denied A\x1b[2J" in result.stderr


def test_a_long_tool_name_is_cut_on_its_one_line(cli: Cli) -> None:
    name = "t" * 1000
    script = cli.script(
        [{"tool_calls": [{"id": "c1", "name": name, "arguments": {}}]}, {"text": "k"}]
    )
    result = ok(_run(cli, "run", "hi", "--model", script))
    assert "⏵ " + "t" * 63 + "…" in result.stdout
    assert "t" * 200 not in result.stdout


# --- show's flags ----------------------------------------------------------------------------


@pytest.fixture
def shown(cli: Cli) -> str:
    return session_id_of(ok(_run(cli, "run", "hi", "--model", cli.script([{"text": "hello"}]))))


def test_show_json_alone_prints_the_events_as_jsonl(cli: Cli, shown: str) -> None:
    alone = ok(_run(cli, "show", shown, "--json")).stdout
    assert alone == ok(_run(cli, "show", shown, "--events", "--json")).stdout
    assert [json.loads(line)["type"] for line in alone.splitlines()][0] == "turn/start"


@pytest.mark.parametrize("extra", [[], ["--json"]], ids=["human", "json"])
def test_show_events_with_messages_is_a_one_line_usage_error_exit_2(
    cli: Cli, shown: str, extra: list[str]
) -> None:
    result = _run(cli, "show", shown, "--events", "--messages", *extra)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(
        "ShowFlagsError: --events and --messages are two different views"
    )
    assert len(result.stderr.splitlines()) == 1


def test_show_events_and_messages_views_print_payloads_without_list_brackets(
    cli: Cli, shown: str
) -> None:
    events = _lines(ok(_run(cli, "show", shown, "--events")))
    assert events[0] == '    0 turn/start {"turn": 1}'
    assert all(re.fullmatch(r" *\d+ [a-z/-]+ \{.*", line) for line in events), events
    messages = _lines(ok(_run(cli, "show", shown, "--messages")))
    assert [line.split(" ", 1)[0] for line in messages] == ["user", "assistant"]
    assert all(line.split(" ", 1)[1].startswith("{") for line in messages), messages
