"""A worker process for the worker tests: `python tests/_worker_child.py URL SCHEMA LEDGER [N]`.

Runs `duraloop.worker.run_worker` with a scripted model whose every turn is one call of the
`slow_ledger` tool, then a text. The tool appends `start <session> <call id>` to the ledger
file before it sleeps and `end <session> <call id>` after, each line one `O_APPEND` write,
so the test can tell whether any body ran twice (two `start` lines for one call id) and
which ones a killed worker left unfinished. `DURALOOP_TOOL_SECONDS` sets the sleep.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import Any

from duraloop.llm import ScriptedModel
from duraloop.loop import SessionSetup
from duraloop.store import PostgresStore
from duraloop.tools import ToolContext, tool
from duraloop.worker import WorkerConfig, run_worker

URL, SCHEMA, LEDGER = sys.argv[1], sys.argv[2], sys.argv[3]
CONCURRENCY = int(sys.argv[4]) if len(sys.argv) > 4 else 4
SECONDS = float(os.environ.get("DURALOOP_TOOL_SECONDS", "0.3"))
TAKEOVER = float(os.environ.get("DURALOOP_TAKEOVER_SECONDS", "3"))
DRAIN = float(os.environ.get("DURALOOP_DRAIN_SECONDS", "5"))
WORKSPACE = tempfile.mkdtemp(prefix="duraloop-worker-")


def _write(line: str) -> None:
    fd = os.open(LEDGER, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


@tool
def slow_ledger(ctx: ToolContext) -> str:
    """Record one side effect slowly (a sync body: it runs in a thread and cannot be stopped)."""
    _write(f"start {ctx.session_id} {ctx.call_id} {os.getpid()}")
    time.sleep(SECONDS)
    _write(f"end {ctx.session_id} {ctx.call_id} {os.getpid()}")
    return "recorded"


def setup(store: PostgresStore, session_id: str) -> SessionSetup:
    """Each turn: one slow ledger call, then a text (ids unique per turn of this drive)."""
    stamp = f"{os.getpid()}-{time.monotonic_ns()}"
    script: list[dict[str, Any]] = []
    for turn in range(20):
        call = {"id": f"c{stamp}-{turn}", "name": "slow_ledger", "arguments": {}}
        script += [{"tool_calls": [call]}, {"text": f"turn done {turn}"}]
    return SessionSetup(
        store=store, model=ScriptedModel(script), tools=[slow_ledger], cwd=WORKSPACE
    )


if __name__ == "__main__":
    print(f"worker {os.getpid()} up", flush=True)
    run_worker(
        WorkerConfig(
            url=URL,
            setup=setup,
            schema=SCHEMA,
            concurrency=CONCURRENCY,
            takeover_seconds=TAKEOVER,
            drain_seconds=DRAIN,
        )
    )
    print(f"worker {os.getpid()} stopped", flush=True)
