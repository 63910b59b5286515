"""A Ctrl-C under `anyio.run(loop.run_turn, ...)` cancels the turn durably (user trial).

`asyncio.Runner` turns the first SIGINT into a native cancel of the main task. It used to
reach the running tool directly: the scheduler failed the step, waited for the tool body to
finish, and recorded TOOL_OUTCOME_UNKNOWN. Now it becomes the turn's cancel signal: the
tool is cancelled, its call answered ABORTED, the turn ends `aborted {parent}`, and then
`KeyboardInterrupt` reaches the caller. Run in a child process that the test interrupts from
outside, as a terminal's Ctrl-C does, once its tool has started.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

SCRIPT = r'''
import json, sys
from pathlib import Path
import anyio
from duraloop import SessionSetup, start_session
from duraloop.llm import ScriptedModel
from duraloop.store import MemoryStore
from duraloop.tools import tool

workspace = Path(sys.argv[1])

@tool(parallel=True)
async def slow(seconds: float) -> str:
    """Sleep for a while."""
    print("tool started", flush=True)
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        (workspace / "tool-cancelled").write_text("yes")
        raise
    (workspace / "tool-finished").write_text("yes")
    return "done"

model = ScriptedModel(
    [{"tool_calls": [{"name": "slow", "arguments": {"seconds": 60}, "id": "call_1"}]}]
)
loop = start_session(
    SessionSetup(store=MemoryStore(), model=model, tools=[slow], cwd=workspace), session_id="s"
)
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
    child = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "tool started"
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=50)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0, stderr
    report = json.loads(stdout.strip().splitlines()[-1])
    assert report["outcome"] == "KeyboardInterrupt"
    assert (tmp_path / "tool-cancelled").exists() and not (tmp_path / "tool-finished").exists()
    results = [e["data"] for e in report["events"] if e["type"] == "tool/result"]
    assert [r["error"]["code"] for r in results] == ["ABORTED"]
    assert report["events"][-1]["type"] == "turn/end"
    assert report["events"][-1]["data"]["reason"] == {
        "kind": "aborted",
        "reason": {"kind": "parent"},
    }
