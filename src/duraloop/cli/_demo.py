"""`duraloop demo`: a real, offline session that shows what duraloop is for.

1. A scripted model reads four files in parallel (each read takes 400 ms, so the overlap is
   visible) and writes a summary with an exclusive tool.
2. A turn whose step fails mid-way: an audit hook crashes while a result is being
   committed. The loop drains, answers every unanswered call (`TOOL_OUTCOME_UNKNOWN` for
   the recorded call, `TOOL_NOT_STARTED` for the one that never started), closes the step
   and the turn with the original error.
3. The session is closed and resumed from disk, as a new process would; the resumed turn
   continues from the valid history and the provider pairing check passes.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console

from ..errors import DuraloopError, UsageError
from ..llm import ScriptedModel
from ..log import Event, check_log, check_pairing, result_call_id
from ..log.vocabulary import TOOL_RESULT
from ..loop import SessionSetup, resume_session, start_session
from ..store import JsonlStore
from ..tools import Tool, ToolContext, builtin_tools
from ._live import LiveRenderer
from ._render import styled

READ_LATENCY_SECONDS = 0.4

FILES = {
    "notes/architecture.md": "The log is append-only. Every tool call gets exactly one result.\n",
    "notes/recovery.md": (
        "A recorded call without a result is TOOL_OUTCOME_UNKNOWN, never success.\n"
    ),
    "notes/scheduler.md": (
        "Parallel-safe calls share a rolling pool; exclusive calls are barriers.\n"
    ),
    "notes/storage.md": (
        "A tool/call is fsynced before its body runs; a torn tail is repaired on load.\n"
    ),
}


class AuditHookError(DuraloopError):
    """Raised by the demo's audit hook: it simulates a policy service outage."""


def _slow(tool: Tool) -> Tool:
    """Return `tool` with a simulated I/O latency, so parallel overlap is visible."""
    body = tool.body

    async def slow_body(args: Any, ctx: ToolContext) -> Any:
        await anyio.sleep(READ_LATENCY_SECONDS)  # simulates work
        return await body(args, ctx)

    return dataclasses.replace(tool, body=slow_body)


def _tools() -> list[Tool]:
    return [_slow(t) if t.name == "read_file" else t for t in builtin_tools()]


def _script_turns_1_2() -> list[dict[str, Any]]:
    reads = [
        {"id": f"read-{i}", "name": "read_file", "arguments": {"path": p}}
        for i, p in enumerate(FILES, 1)
    ]
    return [
        {
            "reasoning": "Four independent reads: run them together.",
            "text": "I'll read the notes in parallel.",
            "tool_calls": reads,
        },
        {
            "text": "Writing the summary.",
            "tool_calls": [
                {
                    "id": "write-1",
                    "name": "write_file",
                    "arguments": {
                        "path": "SUMMARY.md",
                        "content": (
                            "# Summary\n\n- append-only log\n- every call answered\n- rolling pool "
                            "with barriers\n- durable tool/call\n"
                        ),
                    },
                }
            ],
        },
        {"text": "Done: SUMMARY.md lists the four principles."},
        {
            "text": "Stamping the release and updating the changelog.",
            "tool_calls": [
                {
                    "id": "stamp-1",
                    "name": "bash",
                    "arguments": {"command": "date -u +%Y-%m-%d > RELEASED"},
                },
                {
                    "id": "log-1",
                    "name": "write_file",
                    "arguments": {"path": "CHANGELOG.md", "content": "released\n"},
                },
            ],
        },
    ]


def _script_turn_3() -> list[dict[str, Any]]:
    return [
        {
            "reasoning": "The stamp's outcome is unknown: verify before repeating a side effect.",
            "text": "The last step failed; checking what actually happened.",
            "tool_calls": [
                {"id": "verify-1", "name": "list_dir", "arguments": {"path": "."}},
            ],
        },
        {
            "text": (
                "RELEASED exists, so the stamp ran; CHANGELOG.md was never started, writing it now."
            ),
            "tool_calls": [
                {
                    "id": "log-2",
                    "name": "write_file",
                    "arguments": {"path": "CHANGELOG.md", "content": "released\n"},
                },
            ],
        },
        {"text": "Recovered: the stamp was verified, not repeated, and the changelog is written."},
    ]


def _audit_hook_failing_once(target_call: str) -> Any:
    state = {"failed": False}

    def audit(event: Event) -> None:
        if event.type != TOOL_RESULT or state["failed"]:
            return
        if result_call_id(event.data["message"]) == target_call:
            state["failed"] = True
            raise AuditHookError("audit hook crashed: the policy service is unreachable")

    return audit


def run_demo(out: Console, err: Console, *, base: Path | None) -> None:
    """Run the three-part demo and print where the log is.

    Args:
        out: the results console (stdout).
        err: the diagnostics console (stderr).
        base: a directory for the workspace and store; a new temp dir when None.

    Raises:
        UsageError: if `base` exists and is not a directory, or the workspace cannot be
            written there (a read-only file system, no permission).
    """
    if base is not None and base.exists() and not base.is_dir():
        raise UsageError(
            f"--dir {str(base)!r} is a file; pass a directory (it is created if missing)"
        )
    root = Path(base) if base is not None else Path(tempfile.mkdtemp(prefix="duraloop-demo-"))
    workspace = root / "workspace"
    try:
        for name, text in FILES.items():
            (workspace / name).parent.mkdir(parents=True, exist_ok=True)
            (workspace / name).write_text(text, encoding="utf-8")
        store = JsonlStore(root / "sessions")
    except OSError as exc:
        raise UsageError(
            f"cannot create the demo workspace in {str(root)!r}: {exc.strerror} "
            f"({exc.filename}); pass --dir naming a writable directory"
        ) from exc
    model = ScriptedModel(_script_turns_1_2(), name="demo")

    out.print("[bold]1. Parallel reads, then an exclusive write[/bold]")
    loop = start_session(SessionSetup(store=store, model=model, tools=_tools(), cwd=workspace))
    session_id = loop.session.id
    loop.session.observe(LiveRenderer(out))
    result = anyio.run(loop.run_turn, "Summarize the notes into SUMMARY.md.")
    out.print(f"[dim]turn 1: {result.kind} in {result.steps} steps[/dim]\n")

    out.print("[bold]2. A step that fails mid-way (an audit hook crashes)[/bold]")
    loop.session.add_validator(_audit_hook_failing_once("stamp-1"))
    try:
        anyio.run(loop.run_turn, "Stamp the release and update the changelog.")
    except AuditHookError as exc:
        out.print(
            styled((f"run_turn raised the original error: {type(exc).__name__}: {exc}", "dim"))
        )
    check_pairing(loop.session.derive_messages())
    out.print(
        "[dim]every tool call is answered; the next request would be accepted by any "
        "provider[/dim]\n"
    )
    loop.close()

    out.print("[bold]3. Resume from disk and continue[/bold]")
    loop, repair = resume_session(
        session_id,
        SessionSetup(
            store=store,
            model=ScriptedModel(_script_turn_3(), name="demo"),
            tools=_tools(),
        ),
    )
    out.print(
        f"[dim]loaded {len(loop.session.events)} events; closers needed: "
        f"{len(repair.closers)}[/dim]"
    )
    loop.session.observe(LiveRenderer(out))
    with loop:
        result = anyio.run(loop.run_turn, "What happened to the release? Finish it safely.")
    header, events = store.read(session_id)
    report = check_log(session_id, events)
    out.print(
        styled(
            "\n",
            ("Log:", "bold"),
            f" {store.locate(session_id)}  ({len(events)} events, check: "
            f"{'valid' if report.valid else 'INVALID'})",
        )
    )
    out.print(styled(f"Read it with:  duraloop show {session_id} --store {root / 'sessions'}"))
