"""Drive the real `duraloop` command line in subprocesses, offline, in temp dirs.

Each `Cli` has its own store and workspace; the environment is scrubbed of `DURALOOP_*`
and provider keys so a developer's settings never leak in and nothing reaches the network.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

COMMAND = [sys.executable, "-m", "duraloop"]
TIMEOUT = 90.0
_SCRUBBED = (
    "DURALOOP_MODEL",
    "DURALOOP_HOME",
    "DURALOOP_STORE",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "DEEPSEEK_API_KEY",
    "DEEPSEEK_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
)
_STORE_COMMANDS = frozenset({"run", "chat", "resume", "fork", "show", "check", "ls", "compact"})
_CWD_COMMANDS = frozenset({"run", "chat", "resume", "compact"})


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    """Return an environment without duraloop settings or provider keys."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env["DURALOOP_HOME"] = str(tmp / "home")  # a default store that is never the user's
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


@dataclass
class Cli:
    """One isolated command-line environment: a store, a workspace and scripts."""

    tmp: Path
    store: Path = field(init=False)
    cwd: Path = field(init=False)

    def __post_init__(self) -> None:
        self.store = self.tmp / "store"
        self.cwd = self.tmp / "workspace"
        self.cwd.mkdir(parents=True, exist_ok=True)
        self._scripts = 0

    def script(self, responses: Sequence[dict[str, Any]]) -> str:
        """Write a scripted-model file and return its model spec."""
        self._scripts += 1
        path = self.tmp / f"script-{self._scripts}.json"
        path.write_text(json.dumps(list(responses)), encoding="utf-8")
        return f"scripted:{path}"

    def argv(self, *args: str, store: bool = True, cwd: bool = True) -> list[str]:
        """Return the full command line, adding `--store`/`--cwd` where the command takes them."""
        argv = [*COMMAND, *args]
        if args and args[0] in _STORE_COMMANDS and store:
            argv += ["--store", str(self.store)]
        if args and args[0] in _CWD_COMMANDS and cwd:
            argv += ["--cwd", str(self.cwd)]
        return argv

    def __call__(
        self, *args: str, store: bool = True, cwd: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run one command to completion and return its result (text stdout/stderr)."""
        return subprocess.run(
            self.argv(*args, store=store, cwd=cwd),
            capture_output=True,
            text=True,
            encoding="utf-8",
            env=env if env is not None else clean_env(self.tmp),
            timeout=TIMEOUT,
            check=False,
            cwd=self.tmp,
        )

    def popen(self, *args: str) -> subprocess.Popen[bytes]:
        """Start a command in its own process group (signals to it never reach pytest)."""
        out = (self.tmp / "popen.out").open("wb")
        err = (self.tmp / "popen.err").open("wb")
        try:
            return subprocess.Popen(
                self.argv(*args),
                stdout=out,
                stderr=err,
                env=clean_env(self.tmp),
                cwd=self.tmp,
                start_new_session=True,
            )
        finally:
            out.close()
            err.close()

    def log_path(self, session_id: str) -> Path:
        """Return the session's JSONL file (one project directory per cwd)."""
        found = list(self.store.glob(f"*/{session_id}/session.jsonl"))
        assert len(found) == 1, found
        return found[0]

    def events(self, session_id: str) -> list[dict[str, Any]]:
        """Return the stored events via `duraloop show ID --events --json`."""
        result = self("show", session_id, "--events", "--json")
        assert result.returncode == 0, result.stderr
        return [json.loads(line) for line in result.stdout.splitlines()]

    def session_ids(self) -> set[str]:
        """Return the ids of every session directory in the store."""
        return {path.parent.name for path in self.store.glob("*/*/session.jsonl")}


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    """Assert exit 0 and return the result (with its output in the failure message)."""
    assert result.returncode == 0, (
        f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    return result


def session_id_of(result: subprocess.CompletedProcess[str]) -> str:
    """Return the id from the `session: <id>` line `run`/`resume` print last on stdout."""
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("session: "), result.stdout
    return last.removeprefix("session: ")


def raw_events(path: Path) -> list[dict[str, Any]]:
    """Parse the complete lines of a log file (a torn last line is skipped); no header."""
    rows: list[dict[str, Any]] = []
    data = path.read_bytes() if path.exists() else b""
    for line in data.split(b"\n")[:-1]:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if row.get("type") != "session":
            rows.append(row)
    return rows


def wait_for(
    condition: Callable[[], bool], *, timeout: float = 30.0, what: str = "condition"
) -> None:
    """Poll `condition` until it holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def tool_call_on_disk(path: Path, name: str) -> bool:
    """Whether the log file holds a durable `tool/call` for a tool named `name`."""
    return any(
        row.get("type") == "tool/call" and row.get("data", {}).get("name") == name
        for row in raw_events(path)
    )


def wait_for_log(cli: Cli, session_id: str, *, timeout: float = 30.0) -> Path:
    """Wait until the session's log file exists and return it."""
    wait_for(
        lambda: len(list(cli.store.glob(f"*/{session_id}/session.jsonl"))) == 1,
        timeout=timeout,
        what=f"the log of {session_id}",
    )
    return cli.log_path(session_id)


def process_group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is in process group `pgid` (Linux /proc)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...; comm may hold spaces, so split after the last ')'.
        fields = text.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def kill_group_quietly(pgid: int) -> None:
    """SIGKILL a process group if it still exists (test cleanup)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
