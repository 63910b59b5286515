"""The built-in `bash` tool: output, exit code, and process-group termination.

The durability promise is that a timed-out or cancelled command leaves nothing running, so
these tests start a background child, read its pid from the output and check the process
is gone (or a zombie awaiting its reaper, which no longer runs).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import anyio
import pytest

from duraloop.log.vocabulary import ABORTED_ERROR, TOOL_TIMEOUT_ERROR
from duraloop.tools._bash_tool import bash
from duraloop.tools._outcome import ToolOutcome
from duraloop.tools._pipeline import ToolPipeline
from duraloop.tools._registry import ToolRegistry
from duraloop.tools._request import ToolCallRequest
from duraloop.tools._signal import CancelSignal


async def _bash(cwd: Path, signal: CancelSignal | None = None, **arguments: object) -> ToolOutcome:
    pipeline = ToolPipeline(ToolRegistry([bash]), cwd=cwd, session_id="s")
    call = ToolCallRequest(
        call_id="c",
        name="bash",
        raw_arguments=json.dumps(arguments),
        arguments=arguments,
        turn=1,
        step=1,
    )
    used = signal or CancelSignal()
    return await pipeline.finalize(call, await pipeline.dispatch(call, used), used)


def _wait_for_content(path: Path) -> None:
    """Block until the command has written `path` (the child is running), or fail."""
    deadline = time.monotonic() + 10
    while not path.exists() or not path.read_text().strip():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} was never written")
        time.sleep(0.02)


def _process_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")


@pytest.mark.anyio
async def test_bash_returns_combined_output_and_exit_code(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("x")
    outcome = await _bash(tmp_path, command="ls; echo err >&2; exit 3")
    assert outcome == ToolOutcome.ok("f.txt\nerr\n[exit code: 3]")


@pytest.mark.anyio
async def test_bash_runs_in_workspace(tmp_path: Path, real_tmp_path: Path) -> None:
    outcome = await _bash(tmp_path, command="pwd")
    assert outcome.text == f"{real_tmp_path}\n[exit code: 0]"


@pytest.mark.anyio
async def test_bash_timeout_kills_background_child_in_group(tmp_path: Path) -> None:
    outcome = await _bash(
        tmp_path, command="sleep 30 & echo child=$!; sleep 30", timeout_seconds=0.5
    )
    assert outcome.error == TOOL_TIMEOUT_ERROR
    assert outcome.text.startswith("Error: command timed out after 0.5s")
    match = re.search(r"child=(\d+)", outcome.text)
    assert match is not None
    assert not _process_alive(int(match.group(1)))


@pytest.mark.anyio
async def test_bash_exit_kills_leftover_background_child(tmp_path: Path) -> None:
    outcome = await _bash(tmp_path, command="sleep 30 & echo child=$!")
    assert outcome.text.endswith("[exit code: 0]")
    match = re.search(r"child=(\d+)", outcome.text)
    assert match is not None
    assert not _process_alive(int(match.group(1)))


@pytest.mark.anyio
async def test_bash_cancel_signal_kills_group_and_reports_aborted(tmp_path: Path) -> None:
    signal = CancelSignal()
    pid_file = tmp_path / "child.pid"
    outcome: list[ToolOutcome] = []

    async def run() -> None:
        outcome.append(
            await _bash(tmp_path, signal, command=f"sleep 30 & echo $! > {pid_file}; sleep 30")
        )

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await anyio.to_thread.run_sync(_wait_for_content, pid_file)
        signal.cancel()
    assert outcome[0].error == ABORTED_ERROR
    assert outcome[0].text.startswith("Error: tool call aborted")
    assert not _process_alive(int(pid_file.read_text()))


@pytest.mark.anyio
async def test_bash_output_is_capped(tmp_path: Path) -> None:
    outcome = await _bash(tmp_path, command="head -c 400000 /dev/zero | tr '\\0' a")
    kept, note = outcome.text.split("\n", 1)
    assert kept == "a" * 256 * 1024
    assert note == "[truncated: 137856 more bytes of output]\n[exit code: 0]"


@pytest.mark.anyio
async def test_bash_child_ignoring_sigterm_is_killed_after_grace(tmp_path: Path) -> None:
    outcome = await _bash(
        tmp_path,
        command="(trap '' TERM; sleep 30) & echo child=$!; sleep 30",
        timeout_seconds=0.3,
    )
    assert outcome.error == TOOL_TIMEOUT_ERROR
    match = re.search(r"child=(\d+)", outcome.text)
    assert match is not None
    assert not _process_alive(int(match.group(1)))
