"""The built-in `bash` tool: run a command in the workspace, in its own process group.

The command runs as `/bin/bash -c <command>` with the workspace as its working directory
and stdin closed, in a new session, so it and every process it starts share one process
group. When the command exits, times out, or the turn is cancelled, the WHOLE group is
terminated (SIGTERM, then SIGKILL after a grace period), so no background child outlives
the call. Output is stdout and stderr combined, decoded as UTF-8 (undecodable bytes shown
as U+FFFD), and capped in bytes. The command's environment is the process's plus
`DURALOOP_IDEMPOTENCY_KEY`, the call's `ToolContext.idempotency_key`
(docs/recovery.md#idempotency-keys), for a command that calls an API taking such keys.
"""

from __future__ import annotations

import os
import signal as signals
import subprocess
from pathlib import Path
from typing import Annotated, Final, Literal

import anyio
from anyio.abc import Process
from pydantic import Field

from ..log.vocabulary import (
    ABORTED_ERROR,
    ABORTED_TEXT,
    IDEMPOTENCY_KEY_ENV,
    TOOL_TIMEOUT_ERROR,
)
from ._context import ToolContext
from ._definition import tool
from ._outcome import DEFAULT_MAX_OUTPUT_BYTES, ToolOutcome, text_block, truncation_note

MAX_OUTPUT_BYTES: Final = DEFAULT_MAX_OUTPUT_BYTES
"""The cap on the command output kept, in bytes; the rest is read and dropped."""

KILL_GRACE_SECONDS: Final = 2.0
"""How long the group gets between SIGTERM and SIGKILL, in seconds."""

_POLL_SECONDS: Final = 0.05


class _CappedOutput:
    """Keep the first `MAX_OUTPUT_BYTES` bytes and count the rest."""

    def __init__(self) -> None:
        self.kept = bytearray()
        self.dropped_bytes = 0

    def add(self, chunk: bytes) -> None:
        room = MAX_OUTPUT_BYTES - len(self.kept)
        self.kept += chunk[: max(room, 0)]
        self.dropped_bytes += max(len(chunk) - room, 0)

    def render(self) -> str:
        text = self.kept.decode("utf-8", errors="replace")
        if self.dropped_bytes:
            text += f"\n{truncation_note(self.dropped_bytes)}"
        return text


@tool(watches_signal=True)
async def bash(
    command: str,
    ctx: ToolContext,
    timeout_seconds: Annotated[float, Field(gt=0, le=3600)] = 60,
) -> ToolOutcome:
    """Run a bash command in the workspace and return its combined output and exit code.

    Background processes are killed when the command exits.

    Args:
        command: the command line, run with `/bin/bash -c`.
        timeout_seconds: the limit in seconds; the command and its children are killed after it.
        ctx: injected; the workspace is the working directory, cancelling `ctx.signal`
            kills the command, and `ctx.idempotency_key` is exported as
            `DURALOOP_IDEMPOTENCY_KEY`.

    Returns:
        A success with the output and a final `[exit code: <n>]` line (a non-zero exit is
        still a success: the model reads the code); a `TOOL_TIMEOUT` failure after the
        timeout, or an `ABORTED` failure when the turn is cancelled, each with the output
        so far.
    """
    output = _CappedOutput()
    process = await anyio.open_process(
        ["/bin/bash", "-c", command],
        cwd=ctx.cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, IDEMPOTENCY_KEY_ENV: ctx.idempotency_key},
    )
    ending: Literal["exited", "timeout", "cancelled"] = "exited"
    terminated = False
    _RUNNING_GROUPS.add(process.pid)
    try:
        async with anyio.create_task_group() as group:
            pumped = anyio.Event()
            group.start_soon(_pump, process, output, pumped)
            with anyio.move_on_after(timeout_seconds) as deadline:
                ending = await _wait_exit_or_cancel(process, ctx)
            if deadline.cancel_called and process.returncode is None:
                ending = "timeout"
            # The command is over (or must be): end every process left in its group, which
            # closes the pipe so the pump finishes. A process that left the group (setsid)
            # may still hold the pipe, so the pump gets a bounded wait.
            await _terminate_group(process)
            terminated = True
            with anyio.move_on_after(KILL_GRACE_SECONDS):
                await pumped.wait()
            if not pumped.is_set():
                output.add(b"\n[output cut: a process outside the group kept the pipe open]")
            group.cancel_scope.cancel("command finished")
    finally:
        if not terminated:
            with anyio.CancelScope(shield=True):
                await _terminate_group(process)
        _RUNNING_GROUPS.discard(process.pid)
    body = output.render()
    if ending == "timeout":
        return ToolOutcome(
            is_error=True,
            content=[text_block(f"Error: command timed out after {timeout_seconds:g}s\n{body}")],
            error=dict(TOOL_TIMEOUT_ERROR),
        )
    if ending == "cancelled":
        return ToolOutcome(
            is_error=True,
            content=[text_block(f"{ABORTED_TEXT}\n{body}")],
            error=dict(ABORTED_ERROR),
        )
    separator = "" if not body or body.endswith("\n") else "\n"
    return ToolOutcome.ok(f"{body}{separator}[exit code: {process.returncode}]")


_RUNNING_GROUPS: set[int] = set()
"""Process groups of `bash` commands still running in this process (for `kill_running_commands`)."""


def kill_running_commands() -> int:
    """SIGKILL the process group of every `bash` command still running, at once.

    For a process about to exit without draining (the CLI's second Ctrl-C): the commands
    would otherwise outlive it. Safe to call from a signal handler.

    Returns:
        The number of process groups signalled.
    """
    killed = 0
    for pgid in list(_RUNNING_GROUPS):
        if _signal_group(pgid, signals.SIGKILL):
            killed += 1
    return killed


async def _pump(process: Process, output: _CappedOutput, pumped: anyio.Event) -> None:
    if process.stdout is None:
        raise RuntimeError("bash process has no stdout pipe")  # internal fault
    async for chunk in process.stdout:
        output.add(chunk)
    pumped.set()


async def _wait_exit_or_cancel(
    process: Process, ctx: ToolContext
) -> Literal["exited", "cancelled"]:
    ending: Literal["exited", "cancelled"] = "exited"
    async with anyio.create_task_group() as race:

        async def on_cancel() -> None:
            nonlocal ending
            await ctx.signal.wait()
            ending = "cancelled"
            race.cancel_scope.cancel("turn cancelled")

        race.start_soon(on_cancel)
        await process.wait()
        race.cancel_scope.cancel("command exited")
    return ending


async def _terminate_group(process: Process) -> None:
    """SIGTERM the process group, wait up to the grace period, then SIGKILL what is left."""
    pgid = process.pid
    if not _signal_group(pgid, signals.SIGTERM):
        await process.wait()
        return
    with anyio.move_on_after(KILL_GRACE_SECONDS):
        await process.wait()  # reap bash, or its zombie keeps the group non-empty
        # No event exists for "the group is empty", so poll it.
        while _group_alive(pgid):  # noqa: ASYNC110
            await anyio.sleep(_POLL_SECONDS)
    _signal_group(pgid, signals.SIGKILL)
    await process.wait()
    # SIGKILL is delivered asynchronously: wait (bounded) until the group is really gone,
    # so a caller that returns from the tool never sees a survivor.
    with anyio.move_on_after(KILL_GRACE_SECONDS):
        while _group_alive(pgid):  # noqa: ASYNC110
            await anyio.sleep(_POLL_SECONDS)


def _group_alive(pgid: int) -> bool:
    """Return whether a process of the group is still running (zombies do not count).

    On Linux this reads `/proc`, because an orphaned zombie keeps `killpg(pgid, 0)`
    succeeding until its reaper (PID 1, which in a container may never reap) collects it.
    Elsewhere it asks `killpg(pgid, 0)`.
    """
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        return _signal_group(pgid, 0)
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # the process exited while we looked: it is not running
        # Fields after the parenthesised command: state, ppid, pgrp, ...
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def _signal_group(pgid: int, signal_number: int) -> bool:
    """Send `signal_number` to the group.

    Returns:
        True if delivered; False when no process is left in the group (not an error: the
        command and its children have already exited).
    """
    try:
        os.killpg(pgid, signal_number)
    except ProcessLookupError:
        return False
    return True
