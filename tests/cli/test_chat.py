"""`duraloop chat` driven through a real pseudo-terminal, asserting on the session log.

The chat runs as a session leader whose controlling terminal is the pty, so writing Ctrl-C
(0x03) to the master makes the terminal send SIGINT to its foreground process group, as for
a person at a keyboard. Outcomes are decided by the log on disk (polled) and by lines the
chat prints after acting; sleeps never decide anything.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ._support import (
    Cli,
    clean_env,
    kill_group_quietly,
    raw_events,
    tool_call_on_disk,
    wait_for_log,
)

# Make the pty (stdin) the controlling terminal of the new session, then become the chat.
_CTTY = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)
_WAIT_FOR_GO = "while [ ! -f go ]; do sleep 0.05; done; echo done"
DEADLINE = 30.0
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


class PtyChat:
    """A `duraloop chat` process on a pseudo-terminal: type lines, read what it printed."""

    def __init__(self, cli: Cli, *args: str) -> None:
        self.cli = cli
        master, slave = os.openpty()
        self.master = master
        self.process = subprocess.Popen(
            [sys.executable, "-c", _CTTY, *cli.argv("chat", *args)],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=clean_env(cli.tmp),
            cwd=cli.tmp,
            start_new_session=True,
        )
        os.close(slave)
        self.output = ""
        self.typed_at = 0
        self.session_id = ""

    def started(self) -> PtyChat:
        """Wait for the session id and the first prompt; return self."""
        self.session_id = self.expect(r"session: (\S+)").group(1)
        self.expect_prompt()
        return self

    def pump(self, timeout: float = 0.05) -> None:
        """Read whatever the chat printed within `timeout` seconds."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the chat exited and the pty closed
            data = b""
        text = data.decode("utf-8", errors="replace").replace("\r\n", "\n")
        self.output += _ANSI.sub("", text)  # rich styles a terminal; assert on the text

    def wait(self, condition: Callable[[], bool], what: str) -> None:
        """Keep reading the pty until `condition` holds; fail after the deadline."""
        deadline = time.monotonic() + DEADLINE
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out waiting for {what}; the chat printed:\n{self.output}"
                )
            self.pump()

    def expect(self, pattern: str, *, after: int = 0) -> re.Match[str]:
        """Wait until `pattern` appears in the output after offset `after`; return the match."""
        found: list[re.Match[str]] = []

        def seen() -> bool:
            match = re.compile(pattern).search(self.output, after)
            if match is not None:
                found.append(match)
            return match is not None

        self.wait(seen, repr(pattern))
        return found[0]

    def expect_prompt(self) -> None:
        """Wait for a `you> ` prompt printed after the last line typed."""
        self.expect("you> ", after=self.typed_at)

    def type(self, text: str) -> int:
        """Type a line (or control characters); return the output offset before it."""
        self.typed_at = len(self.output)
        os.write(self.master, text.encode())
        return self.typed_at

    @property
    def log(self) -> Path:
        return wait_for_log(self.cli, self.session_id)

    def events(self) -> list[dict[str, Any]]:
        return raw_events(self.log)

    def wait_log(
        self, condition: Callable[[list[dict[str, Any]]], bool], what: str
    ) -> list[dict[str, Any]]:
        """Wait until the events on disk satisfy `condition`; return them."""
        self.wait(lambda: condition(self.events()), what)
        return self.events()

    def wait_exit(self) -> int:
        self.wait(lambda: self.process.poll() is not None, "the chat to exit")
        return self.process.returncode

    def close(self) -> None:
        if self.process.poll() is None:
            kill_group_quietly(self.process.pid)
            self.process.wait(timeout=10)
        os.close(self.master)


@pytest.fixture
def chats() -> Iterator[list[PtyChat]]:
    started: list[PtyChat] = []
    yield started
    for chat in started:
        chat.close()


def _start(chats: list[PtyChat], cli: Cli, *args: str) -> PtyChat:
    chat = PtyChat(cli, *args)
    chats.append(chat)  # cleaned up even if it never starts
    return chat.started()


def _of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] == kind]


def _text(event: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in event["data"]["content"])


def _turn_ends(events: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(e["data"]["turn"], e["data"]["reason"]["kind"]) for e in _of(events, "turn/end")]


def _bash_waiting_for_go(call_id: str = "b1") -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": "bash", "arguments": {"command": _WAIT_FOR_GO}}]}


def test_a_line_typed_while_a_tool_runs_steers_the_turn(cli: Cli, chats: list[PtyChat]) -> None:
    model = cli.script([_bash_waiting_for_go(), {"text": "Done, and hi."}])
    chat = _start(chats, cli, "--model", model)

    chat.type("run the waiter\n")
    chat.wait(lambda: tool_call_on_disk(chat.log, "bash"), "the bash tool/call on disk")
    mark = chat.type("also say hi\n")
    chat.expect("steering: also say hi", after=mark)
    (cli.cwd / "go").touch()
    events = chat.wait_log(lambda e: _turn_ends(e) == [(1, "completed")], "turn 1 to complete")

    steering = [e for e in _of(events, "user/message") if _text(e) == "also say hi"]
    assert len(steering) == 1
    seq = steering[0]["seq"]
    first_step_end = next(e["seq"] for e in _of(events, "step/end") if e["data"]["step"] == 1)
    next_assistant = next(
        e["seq"] for e in _of(events, "assistant/message") if e["seq"] > first_step_end
    )
    assert first_step_end < seq < next_assistant
    turn_start = _of(events, "turn/start")[0]["seq"]
    turn_end = _of(events, "turn/end")[0]["seq"]
    assert turn_start < seq < turn_end  # the same turn
    assert len(_of(events, "turn/start")) == 1

    chat.expect_prompt()
    chat.type("/quit\n")
    assert chat.wait_exit() == 0


def test_ctrl_c_cancels_the_running_turn_and_the_chat_goes_on(
    cli: Cli, chats: list[PtyChat]
) -> None:
    model = cli.script([_bash_waiting_for_go(), {"text": "Turn two."}])
    chat = _start(chats, cli, "--model", model)

    chat.type("run the waiter\n")
    chat.wait(lambda: tool_call_on_disk(chat.log, "bash"), "the bash tool/call on disk")
    chat.type("\x03")
    events = chat.wait_log(lambda e: bool(_of(e, "turn/end")), "turn 1 to close")
    end = _of(events, "turn/end")[0]["data"]
    assert end["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}
    assert len(_of(events, "tool/result")) == 1  # the running call was answered
    chat.expect_prompt()
    assert chat.process.poll() is None

    chat.type("next\n")
    events = chat.wait_log(lambda e: len(_turn_ends(e)) == 2, "turn 2 to close")
    assert _turn_ends(events) == [(1, "aborted"), (2, "completed")]
    chat.expect("Turn two.")
    chat.expect_prompt()
    chat.type("/quit\n")
    assert chat.wait_exit() == 0
    assert not (cli.cwd / "go").exists()


def test_quit_closes_the_log_and_a_second_chat_resumes_with_history(
    cli: Cli, chats: list[PtyChat]
) -> None:
    first = _start(chats, cli, "--model", cli.script([{"text": "First answer."}]))
    first.type("first question\n")
    first.wait_log(lambda e: _turn_ends(e) == [(1, "completed")], "turn 1 to complete")
    first.expect_prompt()
    first.type("/quit\n")
    assert first.wait_exit() == 0
    assert raw_events(first.log)[-1]["type"] == "turn/end"
    check = cli("check", first.session_id, "--json")
    assert check.returncode == 0 and '"openTurn": null' in check.stdout

    second = _start(
        chats,
        cli,
        "--model",
        cli.script([{"text": "Second answer."}]),
        "--session",
        first.session_id,
    )
    assert second.session_id == first.session_id
    history = second.output
    assert "user: first question" in history and "assistant: First answer." in history
    second.type("second question\n")
    events = second.wait_log(lambda e: len(_turn_ends(e)) == 2, "turn 2 to close")
    assert _turn_ends(events) == [(1, "completed"), (2, "completed")]
    assert [e["data"]["turn"] for e in _of(events, "turn/start")] == [1, 2]
    second.expect_prompt()
    second.type("/quit\n")
    assert second.wait_exit() == 0


def test_fork_prints_a_new_session_whose_log_exists(cli: Cli, chats: list[PtyChat]) -> None:
    chat = _start(chats, cli, "--model", cli.script([{"text": "Forkable."}]))
    mark = chat.type("/fork\n")
    chat.expect("nothing to fork yet", after=mark)
    chat.type("hello\n")
    chat.wait_log(lambda e: len(_turn_ends(e)) == 1, "turn 1 to close")
    chat.expect_prompt()
    mark = chat.type("/fork\n")
    child = chat.expect(r"forked: (\S+)", after=mark).group(1)
    chat.expect(f"duraloop chat --session {re.escape(child)}", after=mark)
    assert child != chat.session_id
    child_events = raw_events(wait_for_log(cli, child))
    assert _turn_ends(child_events) == [(1, "completed")]
    assert child_events[-1]["type"] == "session/end-seed"
    chat.type("/quit\n")
    assert chat.wait_exit() == 0


def test_show_prints_the_transcript_and_ctrl_d_exits(cli: Cli, chats: list[PtyChat]) -> None:
    chat = _start(chats, cli, "--model", cli.script([{"text": "Shown answer."}]))
    chat.type("hello there\n")
    chat.wait_log(lambda e: len(_turn_ends(e)) == 1, "turn 1 to close")
    chat.expect_prompt()
    mark = chat.type("/show\n")
    chat.expect(r"user: hello there\n", after=mark)
    chat.expect(r"assistant: Shown answer\.\n", after=mark)
    chat.expect(r"── turn 1 completed", after=mark)
    chat.expect_prompt()
    chat.type("\x04")  # Ctrl-D: EOF while idle
    assert chat.wait_exit() == 0


def test_a_second_ctrl_c_while_cancelling_exits_130_and_the_next_chat_repairs(
    cli: Cli, chats: list[PtyChat]
) -> None:
    # The command ignores SIGTERM, so the cancel drains for the kill grace period (seconds).
    stubborn = {"command": "trap '' TERM; " + _WAIT_FOR_GO}
    model = cli.script([{"tool_calls": [{"id": "b1", "name": "bash", "arguments": stubborn}]}])
    chat = _start(chats, cli, "--model", model)
    chat.type("run the stubborn waiter\n")
    chat.wait(lambda: tool_call_on_disk(chat.log, "bash"), "the bash tool/call on disk")
    mark = chat.type("\x03")
    chat.expect("press Ctrl-C again", after=mark)
    chat.type("\x03")
    assert chat.wait_exit() == 130
    assert not _of(raw_events(chat.log), "turn/end")  # the log ends inside turn 1

    again = _start(
        chats, cli, "--model", cli.script([{"text": "Back."}]), "--session", chat.session_id
    )
    assert "turn/end interrupted" in again.output  # what repair appended
    assert "user: run the stubborn waiter" in again.output
    again.type("/quit\n")
    assert again.wait_exit() == 0
    assert _turn_ends(raw_events(again.log)) == [(1, "interrupted")]


def test_show_during_a_running_turn_says_it_is_running_not_how_to_repair_it(
    cli: Cli, chats: list[PtyChat]
) -> None:
    chat = _start(chats, cli, "--model", cli.script([_bash_waiting_for_go(), {"text": "Done."}]))
    chat.type("run the waiter\n")
    chat.wait(lambda: tool_call_on_disk(chat.log, "bash"), "the bash tool/call on disk")
    mark = chat.type("/show\n")
    chat.expect(r"── turn 1 is running\n", after=mark)
    assert "resume" not in chat.output[mark:]
    (cli.cwd / "go").touch()
    chat.wait_log(lambda e: _turn_ends(e) == [(1, "completed")], "turn 1 to complete")
    chat.expect_prompt()
    chat.type("/quit\n")
    assert chat.wait_exit() == 0


# --- stdin not a terminal: a pipe is a script of turns ------------------------------------


def _piped(cli: Cli, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli.argv("chat", *args),
        input=text,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=clean_env(cli.tmp),
        cwd=cli.tmp,
        timeout=DEADLINE * 3,
        check=False,
    )


def _piped_session(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout.splitlines()[0].removeprefix("session: ")


def _log_of(cli: Cli, session_id: str) -> list[dict[str, Any]]:
    return raw_events(wait_for_log(cli, session_id))


def test_piped_lines_are_each_their_own_turn_in_order(cli: Cli) -> None:
    result = _piped(
        cli, "first\nsecond\n", "--model", cli.script([{"text": "one"}, {"text": "two"}])
    )
    assert result.returncode == 0, result.stderr
    events = _log_of(cli, _piped_session(result))
    assert _turn_ends(events) == [(1, "completed"), (2, "completed")]
    prompts = [(e["seq"], _text(e)) for e in _of(events, "user/message")]
    turn_2 = _of(events, "turn/start")[1]["seq"]
    assert [text for _, text in prompts] == ["first", "second"]
    assert prompts[0][0] < turn_2 < prompts[1][0]  # "second" is turn 2's prompt, not a steer
    assert [
        e["data"]["target"] for e in _of(events, "agent/inbox/spliced") if e["data"]["inserted"]
    ] == ["next-turn"]


def test_a_piped_command_waits_for_the_turns_queued_before_it(cli: Cli) -> None:
    result = _piped(
        cli, "first\nsecond\n/show\n", "--model", cli.script([{"text": "one"}, {"text": "two"}])
    )
    assert result.returncode == 0, result.stderr
    shown = result.stdout.split("session " + _piped_session(result), 1)[1]
    assert "user: second" in shown and "── turn 2 completed" in shown
    assert "is running" not in shown and "is open" not in shown


def test_a_piped_chat_exits_1_when_a_turn_ended_in_error(cli: Cli) -> None:
    result = _piped(cli, "hello\n", "--model", cli.script([]))
    assert result.returncode == 1, result.stderr
    assert _turn_ends(_log_of(cli, _piped_session(result))) == [(1, "error")]


def test_a_spent_session_budget_refuses_each_piped_line_once_and_the_chat_ends(cli: Cli) -> None:
    # Regression: the refused turn left its follow-ups queued, and the chat retried them
    # forever without yielding (deaf to Ctrl-C and SIGTERM).
    script = cli.script([{"text": "one"}, {"text": "two"}, {"text": "three"}])
    result = _piped(cli, "one\ntwo\nthree\n", "--model", script, "--max-requests-per-session", "1")
    assert result.returncode == 1, result.stderr
    refusals = result.stderr.count("BudgetExceededError: session ")
    assert 1 <= refusals <= 2  # the turn after the budget, and a line read after it
    assert _turn_ends(_log_of(cli, _piped_session(result))) == [(1, "completed")]


def test_the_token_count_continues_across_a_resumed_chat(cli: Cli) -> None:
    first = _piped(cli, "hello\n", "--model", cli.script([{"text": "one"}]))
    assert first.returncode == 0, first.stderr
    tokens = re.findall(r"\[idle · ([\d,]+) tokens\]", first.stderr)[-1]
    assert tokens != "0"
    again = _piped(
        cli, "again\n", "--model", cli.script([{"text": "two"}]), "--session", _piped_session(first)
    )
    assert again.returncode == 0, again.stderr
    assert f"[running · step 1 · 0 tools running · {tokens} tokens]" in again.stderr.splitlines()


def test_a_piped_line_that_is_not_utf8_is_refused_like_a_run_prompt_and_the_chat_exits_1(
    tmp_path: Path,
) -> None:
    cli = Cli(tmp_path)
    script = cli.script([{"text": "One."}, {"text": "Two."}])
    result = subprocess.run(
        cli.argv("chat", "--model", script),
        input=b"caf\xe9\nfine\n",
        capture_output=True,
        env=clean_env(tmp_path),
        cwd=tmp_path,
        timeout=90,
        check=False,
    )
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr
    assert "UsageError: the input line is not UTF-8 text" in stderr and "was not sent" in stderr
    (session_id,) = cli.session_ids()
    prompts = [
        e["data"]["content"][0]["text"]
        for e in cli.events(session_id)
        if e["type"] == "user/message"
    ]
    assert prompts == ["fine"]


def test_chat_fork_prints_a_continue_command_naming_the_store(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    script = cli.script([{"text": "One."}])
    result = subprocess.run(
        cli.argv("chat", "--model", script),
        input="a\n/fork\n",
        capture_output=True,
        text=True,
        env=clean_env(tmp_path),
        cwd=tmp_path,
        timeout=90,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if "continue it with:" in line)
    assert line.endswith(f" --store jsonl:{cli.store}")
