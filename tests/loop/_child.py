"""A child process that drives one turn of a real loop on a JSONL store (run as a script).

    python tests/loop/_child.py SCENARIO STORE_DIR WORKSPACE

`parallel-sleep` (issue 9 item 4): three parallel calls; the first returns at once, the
second writes `sleeping` in the workspace and sleeps 60 s, the third returns at once.
`stuck-sync` (item 8): one synchronous tool that writes `blocked` and then sleeps an hour,
run under the CLI's signal handling (`run_turn_live`: SIGTERM cancels the turn) with a 0.5 s
cancel grace. The parent test kills or signals this process and reads the log it left.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import anyio
from rich.console import Console

from duraloop.cli._runner import run_turn_live
from duraloop.llm import ScriptedModel
from duraloop.loop import LoopConfig, SessionSetup, start_session
from duraloop.store import JsonlStore
from duraloop.tools import Tool, ToolContext, tool

SESSION = "child"
GRACE_SECONDS = 0.5


@tool(parallel=True)
async def quick(ctx: ToolContext) -> str:
    """Return at once."""
    return f"{ctx.call_id} finished"


@tool(parallel=True)
async def sleepy(ctx: ToolContext) -> str:
    """Mark that the body runs, then sleep for a minute."""
    (ctx.cwd / "sleeping").write_text("yes")
    await anyio.sleep(60)  # simulates a long call that is killed mid-way
    return "woke up"


@tool
def stuck(ctx: ToolContext) -> str:
    """Mark that the body runs, then block for an hour, ignoring cancellation."""
    (ctx.cwd / "blocked").write_text("yes")
    time.sleep(3600)
    return "never"


def _script(scenario: str) -> tuple[list[dict[str, object]], list[Tool]]:
    if scenario == "parallel-sleep":
        calls = [
            {"id": "c1", "name": "quick", "arguments": {}},
            {"id": "c2", "name": "sleepy", "arguments": {}},
            {"id": "c3", "name": "quick", "arguments": {}},
        ]
        return [{"tool_calls": calls}, {"text": "never requested"}], [quick, sleepy]
    if scenario == "stuck-sync":
        calls = [{"id": "s1", "name": "stuck", "arguments": {}}]
        return [{"tool_calls": calls}, {"text": "never requested"}], [stuck]
    raise SystemExit(f"unknown scenario {scenario!r}")


async def main(scenario: str, store_dir: Path, workspace: Path) -> None:
    script, tools = _script(scenario)
    loop = start_session(
        SessionSetup(
            store=JsonlStore(store_dir),
            model=ScriptedModel(script),
            tools=tools,
            cwd=workspace,
            config=LoopConfig(tool_cancel_grace_seconds=GRACE_SECONDS),
        ),
        session_id=SESSION,
    )
    try:
        if scenario == "stuck-sync":
            result = await run_turn_live(
                loop, "go", console=Console(file=sys.stdout), errors=Console(file=sys.stderr)
            )
        else:
            result = await loop.run_turn("go")
        print(f"turn ended: {result.kind}", flush=True)
    finally:
        loop.close()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
