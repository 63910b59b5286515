"""Laws 4 and 5 end to end, with real processes: `duraloop run` killed with SIGKILL while a
`bash` tool runs, then resumed; and SIGINT/SIGTERM cancelling a running turn durably.

Every wait is a polling loop with a deadline; no fixed sleep decides an outcome.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli._support import (
    Cli,
    kill_group_quietly,
    ok,
    process_group_alive,
    raw_events,
    tool_call_on_disk,
    wait_for,
    wait_for_log,
)

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

SESSION = "crash-me"
EXIT_TIMEOUT = 20.0

# A parallel read, then an exclusive bash call that records its pid (the process group
# leader: the bash tool starts its own group) and sleeps long enough to be interrupted.
SLEEPING_TURN: list[dict[str, Any]] = [
    {
        "text": "Reading, then waiting.",
        "tool_calls": [
            {"id": "read-1", "name": "read_file", "arguments": {"path": "a.txt"}},
            {"id": "bash-1", "name": "bash", "arguments": {"command": "echo $$ > pid; sleep 30"}},
        ],
    },
    {"text": "never requested"},
]


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    c = Cli(tmp_path)
    (c.cwd / "a.txt").write_text("alpha\n", encoding="utf-8")
    yield c
    pid_file = c.cwd / "pid"
    if pid_file.is_file() and pid_file.read_text().strip():
        kill_group_quietly(int(pid_file.read_text()))  # a SIGKILLed run leaves `sleep` orphaned


def _start_sleeping_turn(cli: Cli) -> tuple[subprocess.Popen[bytes], Path, int]:
    """Start `duraloop run` and wait until the bash call is durable and its body is running."""
    proc = cli.popen(
        "run", "Read a.txt, then wait.", "--session", SESSION, "--model", cli.script(SLEEPING_TURN)
    )
    try:
        log = wait_for_log(cli, SESSION)
        wait_for(
            lambda: tool_call_on_disk(log, "bash") or proc.poll() is not None,
            what="the bash tool/call on disk",
        )
        pid_file = cli.cwd / "pid"
        wait_for(
            lambda: (
                (pid_file.is_file() and pid_file.read_text().strip() != "")
                or proc.poll() is not None
            ),
            what="the bash command to start",
        )
        assert proc.poll() is None, (cli.tmp / "popen.err").read_text()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, log, int(pid_file.read_text())


def _call_seq(events: list[dict[str, Any]], call_id: str) -> int:
    (seq,) = [
        e["seq"] for e in events if e["type"] == "tool/call" and e["data"]["callId"] == call_id
    ]
    return int(seq)


def _results(events: list[dict[str, Any]], call_id: str) -> list[dict[str, Any]]:
    return [
        e
        for e in events
        if e["type"] == "tool/result" and e["data"]["message"]["source"]["callId"] == call_id
    ]


def _kill_hard(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=EXIT_TIMEOUT) == -signal.SIGKILL


def _assert_open_turn(cli: Cli) -> None:
    checked = ok(cli("check", SESSION)).stdout
    assert "INVALID" not in checked
    assert "turn 1 is open" in checked


def _resume_and_assert_repaired(cli: Cli) -> subprocess.CompletedProcess[str]:
    result = ok(
        cli("resume", SESSION, "continue", "--model", cli.script([{"text": "Carrying on."}]))
    )
    assert "TOOL_OUTCOME_UNKNOWN for bash-1" in result.stderr
    assert "Carrying on." in result.stdout

    events = cli.events(SESSION)
    call_seq = _call_seq(events, "bash-1")
    (unknown,) = _results(events, "bash-1")
    assert unknown["data"]["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert unknown["data"]["message"]["content"][0]["isError"] is True
    assert unknown["sourceEventSeqs"] == [call_seq]
    (read_result,) = _results(events, "read-1")  # committed before the exclusive barrier
    assert read_result["seq"] < call_seq

    after = events[unknown["seq"] :]
    assert [e["type"] for e in after[:4]] == [
        "tool/result",
        "step/end",
        "turn/end",
        "session/end-seed",
    ]
    assert after[2]["data"] == {"turn": 1, "reason": {"kind": "interrupted"}}
    assert after[4]["type"] == "turn/start" and after[4]["data"]["turn"] == 2
    assert events[-1]["type"] == "turn/end"
    assert events[-1]["data"] == {"turn": 2, "reason": {"kind": "completed"}}
    assert "tool/call" not in [e["type"] for e in after]  # nothing was retried

    checked = ok(cli("check", SESSION)).stdout
    assert ": valid (" in checked and "open" not in checked
    return result


def test_sigkill_during_bash_then_resume_answers_it_outcome_unknown(cli: Cli) -> None:
    proc, _log, _pid = _start_sleeping_turn(cli)
    _kill_hard(proc)
    _assert_open_turn(cli)
    _resume_and_assert_repaired(cli)


def test_sigkill_then_torn_tail_is_truncated_on_resume(cli: Cli) -> None:
    proc, log, _pid = _start_sleeping_turn(cli)
    _kill_hard(proc)
    committed = log.read_bytes()
    torn = b'{"type":"tool/result","seq":99,"time":17960334'  # half a line, no newline
    with log.open("ab") as file:
        file.write(torn)

    _assert_open_turn(cli)
    assert log.read_bytes() == committed + torn  # check never writes, not even a repair

    result = _resume_and_assert_repaired(cli)
    assert f"truncated a torn tail of {len(torn)} bytes" in result.stderr
    data = log.read_bytes()
    assert data.startswith(committed) and torn not in data and data.endswith(b"\n")
    for line in data.splitlines():
        json.loads(line)  # every remaining line is whole


@pytest.mark.parametrize(
    ("signum", "to_group"),
    [(signal.SIGINT, False), (signal.SIGINT, True), (signal.SIGTERM, False)],
    ids=["sigint-process", "sigint-group", "sigterm-process"],
)
def test_signal_cancels_the_turn_durably(cli: Cli, signum: signal.Signals, to_group: bool) -> None:
    proc, log, bash_pid = _start_sleeping_turn(cli)
    try:
        if to_group:
            os.killpg(proc.pid, signum)  # a terminal's Ctrl-C goes to the whole foreground group
        else:
            proc.send_signal(signum)
        assert proc.wait(timeout=EXIT_TIMEOUT) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    stderr = (cli.tmp / "popen.err").read_text(encoding="utf-8")
    assert f"{signum.name}: cancelling the turn" in stderr
    assert "Traceback" not in stderr

    events = raw_events(log)
    assert events[-1]["type"] == "turn/end"
    assert events[-1]["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}
    (result,) = _results(events, "bash-1")
    assert result["data"]["error"]["code"] == "ABORTED"
    assert result["data"]["message"]["content"][0]["isError"] is True
    assert [e["type"] for e in events[-2:]] == ["step/end", "turn/end"]

    checked = ok(cli("check", SESSION)).stdout
    assert ": valid (" in checked and "open" not in checked
    assert "aborted" in ok(cli("ls")).stdout

    # The bash tool's whole process group (bash and its `sleep 30`) is gone.
    wait_for(
        lambda: not process_group_alive(bash_pid),
        timeout=EXIT_TIMEOUT,
        what=f"process group {bash_pid} to exit",
    )
    status = Path(f"/proc/{bash_pid}/status")
    assert not status.exists() or "zombie" in status.read_text()


def test_second_sigint_exits_at_once_and_resume_repairs(cli: Cli) -> None:
    # The bash command ignores SIGTERM, so the first Ctrl-C's drain waits out the kill grace.
    stubborn: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {
                    "id": "bash-1",
                    "name": "bash",
                    "arguments": {"command": "echo $$ > pid; trap '' TERM; sleep 30"},
                }
            ]
        },
    ]
    proc = cli.popen("run", "Wait.", "--session", SESSION, "--model", cli.script(stubborn))
    try:
        log = wait_for_log(cli, SESSION)
        pid_file = cli.cwd / "pid"
        wait_for(
            lambda: (
                (pid_file.is_file() and pid_file.read_text().strip() != "")
                or proc.poll() is not None
            ),
            what="the bash command to start",
        )
        proc.send_signal(signal.SIGINT)
        wait_for(
            lambda: (
                "cancelling the turn" in (cli.tmp / "popen.err").read_text()
                or proc.poll() is not None
            ),
            what="the first SIGINT to be handled",
        )
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=EXIT_TIMEOUT) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # Exiting at once still kills the running command's whole group (it ignores SIGTERM).
    bash_pid = int(pid_file.read_text())
    wait_for(
        lambda: not process_group_alive(bash_pid),
        timeout=EXIT_TIMEOUT,
        what=f"process group {bash_pid} to be killed",
    )
    # Exited at once, mid-drain: the log ends inside the turn, and resume closes it.
    _assert_open_turn(cli)
    ok(cli("resume", SESSION))
    events = raw_events(log)
    (result,) = _results(events, "bash-1")
    assert result["data"]["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    # `resume` without a prompt commits the repair and starts no lifecycle (no end-seed).
    assert [e["type"] for e in events[-3:]] == ["tool/result", "step/end", "turn/end"]
    assert events[-1]["data"]["reason"] == {"kind": "interrupted"}
    assert ": valid (" in ok(cli("check", SESSION)).stdout
