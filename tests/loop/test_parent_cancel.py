"""A Ctrl-C under `anyio.run(loop.run_turn, ...)` cancels the turn durably (user trial).

`asyncio.Runner` turns the first SIGINT into a native cancel of the main task. It used to
reach the running tool directly: the scheduler failed the step, waited for the tool body to
finish, and recorded TOOL_OUTCOME_UNKNOWN. Now it becomes the turn's cancel signal: the
tool is cancelled, its call answered ABORTED, the turn ends `aborted {parent}`, and then
`KeyboardInterrupt` reaches the caller. Run in a child process so the SIGINT is real.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = r'''
import json, os, signal, sys, threading, time
from pathlib import Path
import anyio
from duraloop import start_session
from duraloop.llm import ScriptedModel
from duraloop.store import MemoryStore
from duraloop.tools import tool

workspace = Path(sys.argv[1])
started = threading.Event()

@tool(parallel=True)
async def slow(seconds: float) -> str:
    """Sleep for a while."""
    started.set()
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        (workspace / "tool-cancelled").write_text("yes")
        raise
    (workspace / "tool-finished").write_text("yes")
    return "done"

def interrupt() -> None:
    started.wait()
    os.kill(os.getpid(), signal.SIGINT)

model = ScriptedModel([{"tool_calls": [{"name": "slow", "arguments": {"seconds": 60}, "id": "call_1"}]}])
loop = start_session(store=MemoryStore(), model=model, tools=[slow], cwd=workspace, session_id="s")
threading.Thread(target=interrupt, daemon=True).start()
outcome = "returned"
try:
    anyio.run(loop.run_turn, "go")
except KeyboardInterrupt:
    outcome = "KeyboardInterrupt"
events = [{"type": e.type, "data": e.data} for e in loop.session.events]
print(json.dumps({"outcome": outcome, "events": events}))
'''


def test_first_ctrl_c_under_anyio_run_aborts_the_running_tool_durably(tmp_path: Path) -> None:
    script = tmp_path / "interrupted.py"
    script.write_text(SCRIPT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=50, check=False
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["outcome"] == "KeyboardInterrupt"
    assert (tmp_path / "tool-cancelled").exists() and not (tmp_path / "tool-finished").exists()
    results = [e["data"] for e in report["events"] if e["type"] == "tool/result"]
    assert [r["error"]["code"] for r in results] == ["ABORTED"]
    assert report["events"][-1]["type"] == "turn/end"
    assert report["events"][-1]["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "parent"}}
