"""`duraloop demo --approvals`: a person in the loop, across processes, offline.

1. A scripted model lists the workspace and writes RELEASE.md; `write_file` asks for
   approval (as `--ask-before write_file` makes it), so the listing runs and the turn
   pauses: the ask is durable in the log, and this process could exit now.
2. `duraloop pending`, run as a second process, lists the paused session.
3. `duraloop approve` (as printed in part 1, without `--continue`), a third process,
   records the approval under the session's lock.
4. This process resumes the session from disk: the approved write runs once, the model
   answers, and the turn completes; RELEASE.md is printed and the log checks valid.

A `--dir` used before is reused: its workspace starts again from NOTES.md alone (the
demo's RELEASE.md is removed), and its store gains a new session.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

import anyio
from rich.console import Console

from ..errors import DuraloopError, UsageError
from ..llm import ScriptedModel
from ..log import check_log
from ..loop import SessionSetup, resume_session, start_session
from ..tools import Tool, builtin_tools
from ._approval_text import ContinueWith, print_pending
from ._live import LiveRenderer
from ._render import ident, styled
from ._stores import StoreSpec, open_store

NOTES: Final = "- approvals survive restarts\n- a decision can come from any process\n"
CALL_ID: Final = "write-1"
RELEASE: Final = "RELEASE.md"
_TIMEOUT_SECONDS: Final = 120
_MAX_SHOWN_CHARS: Final = 2000
"""Most characters of RELEASE.md the demo prints at its end."""


class DemoStepError(DuraloopError):
    """Raised when a demo step run as a separate `duraloop` process fails."""


def _tools() -> list[Tool]:
    """The built-in tools, `write_file` asking before each call."""
    return [
        dataclasses.replace(tool, requires_approval=True) if tool.name == "write_file" else tool
        for tool in builtin_tools()
    ]


def _first_step() -> list[dict[str, Any]]:
    write = {"path": "RELEASE.md", "content": "# Release notes\n\n" + NOTES}
    return [
        {
            "text": "Listing the workspace, then writing the release notes.",
            "tool_calls": [
                {"id": "list-1", "name": "list_dir", "arguments": {"path": "."}},
                {"id": CALL_ID, "name": "write_file", "arguments": write},
            ],
        }
    ]


def _after_approval() -> list[dict[str, Any]]:
    return [{"text": "RELEASE.md is written: two notes."}]


def _second_process(out: Console, *args: str) -> None:
    """Run `duraloop ARGS` as a separate process and show what it printed, indented.

    Raises:
        DemoStepError: if it exits with a status other than 0.
    """
    command = [sys.executable, "-m", "duraloop", *args]
    out.print(styled(("$ duraloop " + " ".join(args), "cyan")))
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        stdin=subprocess.DEVNULL,
        timeout=_TIMEOUT_SECONDS,
        check=False,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    for line in (done.stdout + done.stderr).splitlines():
        out.print(styled(("  │ ", "dim"), line))
    if done.returncode != 0:
        raise DemoStepError(
            f"`duraloop {args[0]}` exited with status {done.returncode}; its output is above"
        )


def _workspace(base: Path | None) -> Path:
    """Create the demo's root (a new temp dir when `base` is None) and its workspace.

    Raises:
        UsageError: if `base` is a file or the workspace cannot be written there.
    """
    if base is not None and base.exists() and not base.is_dir():
        raise UsageError(
            f"--dir {str(base)!r} is a file; pass a directory (it is created if missing)"
        )
    root = base if base is not None else Path(tempfile.mkdtemp(prefix="duraloop-approvals-"))
    try:
        (root / "workspace").mkdir(parents=True, exist_ok=True)
        (root / "workspace" / "NOTES.md").write_text(NOTES, encoding="utf-8")
        (root / "workspace" / RELEASE).unlink(missing_ok=True)  # a --dir used before
    except OSError as exc:
        raise UsageError(
            f"cannot create the demo workspace in {str(root)!r}: {exc.strerror} "
            f"({exc.filename}); pass --dir naming a writable directory"
        ) from exc
    return root


def run_approvals_demo(out: Console, *, base: Path | None) -> None:
    """Run the four-part approvals demo (see the module) and print where the log is.

    Args:
        out: the results console (stdout).
        base: a directory for the workspace and store; a new temp dir when None.

    Raises:
        UsageError: if `base` is a file or cannot be written.
        DemoStepError: if a step run as a second process fails.
    """
    root = _workspace(base)
    workspace = root / "workspace"
    spec = StoreSpec("jsonl", root / "sessions")
    store = open_store(spec)  # the printed commands name this store
    setup = SessionSetup(
        store=store, model=ScriptedModel(_first_step(), name="demo"), tools=_tools(), cwd=workspace
    )

    out.print("[bold]1. A turn pauses: write_file asks before it runs[/bold]")
    loop = start_session(setup)
    session_id = loop.session.id
    loop.session.observe(LiveRenderer(out))
    with loop:
        result = anyio.run(loop.run_turn, "Write the release notes to RELEASE.md.")
    if result.approval is None:
        raise DemoStepError(f"the demo turn did not pause: it ended {result.kind}")
    # Part 3 records the approval as printed; part 4 is the resume that continues.
    print_pending(
        out, session_id, result.approval, how=ContinueWith(model_placeholder=True, keep_going=False)
    )
    written = (workspace / RELEASE).exists()
    out.print(
        styled(
            (
                f"turn 1 is paused; RELEASE.md exists: {'yes' if written else 'no'}; the ask is in "
                "the log, so this process could exit now\n",
                "dim",
            )
        )
    )

    out.print("[bold]2. A second process lists what waits[/bold]")
    _second_process(out, "pending", "--store", str(spec))
    out.print()
    out.print("[bold]3. A third process approves the write[/bold]")
    _second_process(out, "approve", session_id, CALL_ID, "--store", str(spec))
    out.print()

    out.print("[bold]4. Resume from disk: the approved write runs once, the turn finishes[/bold]")
    loop, _repair = resume_session(
        session_id,
        dataclasses.replace(setup, model=ScriptedModel(_after_approval(), name="demo")),
    )
    loop.session.observe(LiveRenderer(out))
    with loop:
        result = anyio.run(loop.continue_turn)
    content = (workspace / RELEASE).read_text(encoding="utf-8")
    out.print(styled((f"{RELEASE}:", "bold")))
    shown = content[:_MAX_SHOWN_CHARS]
    for line in shown.splitlines():
        out.print(styled(("  │ ", "dim"), line))
    if len(content) > len(shown):
        out.print(styled(("  │ ", "dim"), f"… ({len(content) - len(shown):,} more characters)"))
    events = store.read(session_id)[1]
    report = check_log(session_id, events)
    out.print(
        styled(
            "\n",
            ("Log:", "bold"),
            f" {store.locate(session_id)}  ({len(events)} events, turn 1 {result.kind}, check: "
            f"{'valid' if report.valid else 'INVALID'})",
        )
    )
    out.print(styled(f"Read it with:  duraloop show {ident(session_id)} --store {spec}"))
