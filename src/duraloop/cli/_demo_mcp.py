"""`duraloop demo --mcp`: MCP tools in a real, offline session, scheduled like any tool.

The demo starts the bundled stdio MCP server (`_demo_mcp_server.py`, written with the MCP
SDK, run with this Python), and a scripted model calls four of its tools in one step:
three read-only ones (`readOnlyHint`, each taking 400 ms), which run in parallel, and a
destructive `publish`, which runs alone after them. The timings measured around the tool
bodies are printed, the log is checked, and the server is stopped. No network, no key.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import anyio
from rich.console import Console

from ..errors import UsageError
from ..llm import ScriptedModel
from ..log import check_log, check_pairing
from ..loop import SessionSetup, start_session
from ..store import JsonlStore
from ..tools import Tool, ToolContext, builtin_tools
from ._live import LiveRenderer
from ._mcp_config import mcp_client
from ._render import styled

SERVER: Final = "notes"
SERVER_FILE: Final = Path(__file__).with_name("_demo_mcp_server.py")
READS: Final = (("lookup_note", "log"), ("lookup_note", "recovery"), ("count_words", "scheduler"))
PUBLISH: Final = "publish"


def _name(tool: str) -> str:
    from ..tools.mcp import mcp_tool_name

    return mcp_tool_name(SERVER, tool)


def _script() -> list[dict[str, Any]]:
    calls = [
        {"id": f"read-{i}", "name": _name(tool), "arguments": {"topic": topic}}
        for i, (tool, topic) in enumerate(READS, 1)
    ]
    calls.append(
        {
            "id": "publish-1",
            "name": _name(PUBLISH),
            "arguments": {"summary": "append-only log; unknown outcomes; rolling pool"},
        }
    )
    return [
        {
            "reasoning": "Three lookups are read-only: run them together; publishing is not.",
            "text": "Looking up the notes on the MCP server, then publishing a summary.",
            "tool_calls": calls,
        },
        {"text": "Done: the three lookups overlapped and the summary is published once."},
    ]


@dataclasses.dataclass
class _Timings:
    """When each call's body ran: tool name -> [(start, end)] on the monotonic clock."""

    spans: dict[str, list[tuple[float, float]]] = dataclasses.field(default_factory=dict)

    def timed(self, tool: Tool) -> Tool:
        body = tool.body

        async def timed_body(args: Any, ctx: ToolContext) -> Any:
            start = time.monotonic()
            try:
                return await body(args, ctx)
            finally:
                self.spans.setdefault(tool.name, []).append((start, time.monotonic()))

        return dataclasses.replace(tool, body=timed_body)


def _report(out: Console, timings: _Timings) -> None:
    reads = [
        span for name, spans in timings.spans.items() if name != _name(PUBLISH) for span in spans
    ]
    publish = timings.spans.get(_name(PUBLISH), [])
    if len(reads) != len(READS) or len(publish) != 1:
        out.print(styled((f"MCP: the calls did not all run ({len(reads)} reads)", "yellow")))
        return
    first, last = min(s for s, _ in reads), max(e for _, e in reads)
    work = sum(e - s for s, e in reads)
    together = max(s for s, _ in reads) < min(e for _, e in reads)
    how = "all running at once" if together else "NOT overlapping"
    out.print(
        styled(
            (f"MCP: {len(reads)} read-only calls took {last - first:.2f} s together ", "dim"),
            (f"({work:.2f} s of work): {how}", "dim"),
        )
    )
    alone = publish[0][0] >= last
    out.print(
        styled(
            (f"MCP: {PUBLISH} (destructive, exclusive) ran ", "dim"),
            ("alone, after the reads had ended" if alone else "DURING the reads", "dim"),
        )
    )


def _workspace(base: Path | None) -> Path:
    if base is not None and base.exists() and not base.is_dir():
        raise UsageError(
            f"--dir {str(base)!r} is a file; pass a directory (it is created if missing)"
        )
    root = Path(base) if base is not None else Path(tempfile.mkdtemp(prefix="duraloop-demo-"))
    try:
        (root / "workspace").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"cannot create the demo workspace in {str(root)!r}: {exc.strerror}; pass --dir "
            "naming a writable directory"
        ) from exc
    return root


def run_mcp_demo(out: Console, *, base: Path | None) -> None:
    """Run the MCP demo and print where the log is.

    Args:
        out: the results console (stdout).
        base: a directory for the workspace and store; a new temp dir when None.

    Raises:
        UsageError: if `base` is a file or cannot be written, or the `mcp` extra is not
            installed.
        McpServerError: if the bundled server fails to start.
    """
    McpServers = mcp_client("duraloop demo --mcp")  # noqa: N806 - the class
    from ..tools.mcp import McpServerConfig

    root = _workspace(base)
    store = JsonlStore(root / "sessions")
    config = McpServerConfig(name=SERVER, command=(sys.executable, str(SERVER_FILE)))
    timings = _Timings()

    async def main() -> str:
        servers = McpServers([config])
        async with servers:
            mcp_tools = [timings.timed(tool) for tool in servers.tools]
            kinds = ", ".join(
                f"{tool.name} ({'parallel-safe' if tool.parallel is True else 'exclusive'})"
                for tool in mcp_tools
            )
            out.print(styled((f"MCP server {SERVER!r} started (stdio); its tools: {kinds}", "dim")))
            setup = SessionSetup(
                store=store,
                model=ScriptedModel(_script(), name="demo"),
                tools=[*builtin_tools(), *mcp_tools],
                cwd=root / "workspace",
            )
            with start_session(setup) as loop:
                loop.session.observe(LiveRenderer(out))
                result = await loop.run_turn("Summarize the release notes and publish it.")
                check_pairing(loop.session.derive_messages())
                out.print(f"[dim]turn 1: {result.kind} in {result.steps} steps[/dim]")
                return loop.session.id

    out.print("[bold]MCP tools: three read-only calls in parallel, then a destructive one[/bold]")
    session_id = anyio.run(main)
    out.print(styled((f"MCP server {SERVER!r} stopped", "dim")))
    _report(out, timings)
    events = store.read(session_id)[1]
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
