"""A committed tool result is durable while later calls of its group still run (issue 9 item 4).

Law 6 commits results in model order; the head of that order is committed as soon as it
settles, and must then be durable within one group commit, so a crash loses no committed
result. Real process, real JSONL store, real SIGKILL: the child (`_child.py parallel-sleep`)
runs three parallel calls whose second sleeps a minute. The test waits (polling, with a
deadline) for the first call's result to reach the disk while the second still sleeps, kills
the child, resumes in this process and checks that the first call kept its real result.
Steps whose calls settle together still cost 2 fsyncs (`benchmarks/bench_steps.py`; the
in-process test below counts them).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from duraloop.llm import ScriptedModel
from duraloop.log import Event
from duraloop.log.vocabulary import OUTCOME_UNKNOWN_ERROR
from duraloop.loop import SessionSetup, resume_session, start_session
from duraloop.store import JsonlStore, SessionWriter
from duraloop.tools import tool

CHILD = Path(__file__).with_name("_child.py")
DEADLINE_SECONDS = 30.0


def _events(store_dir: Path) -> list[dict[str, Any]]:
    logs = list(store_dir.glob("*/child/session.jsonl"))
    if not logs:
        return []
    lines = logs[0].read_bytes().split(b"\n")
    return [json.loads(line) for line in lines[1:] if line.endswith(b"}")]  # header, torn tail


def _result_on_disk(store_dir: Path, call_id: str) -> dict[str, Any] | None:
    for event in _events(store_dir):
        if (
            event["type"] == "tool/result"
            and event["data"]["message"]["source"]["callId"] == call_id
        ):
            return event
    return None


def _wait_for(condition: Any, what: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        assert proc.poll() is None, f"the child exited while waiting for {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _results(events: Sequence[Event], call_id: str) -> list[Event]:
    return [
        e
        for e in events
        if e.type == "tool/result" and e.data["message"]["source"]["callId"] == call_id
    ]


def test_first_result_survives_sigkill_while_second_parallel_call_sleeps(tmp_path: Path) -> None:
    store_dir, workspace = tmp_path / "store", tmp_path / "ws"
    workspace.mkdir()
    with (tmp_path / "child.err").open("wb") as errors:
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), "parallel-sleep", str(store_dir), str(workspace)],
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
    try:
        _wait_for(lambda: (workspace / "sleeping").is_file(), "the second call's body", proc)
        _wait_for(
            lambda: _result_on_disk(store_dir, "c1") is not None,
            "the first call's committed result to be durable",
            proc,
        )
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=DEADLINE_SECONDS) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    loop, report = resume_session(
        "child",
        SessionSetup(
            store=JsonlStore(store_dir),
            model=ScriptedModel([]),
            cwd=workspace,
        ),
    )
    loop.close()
    events = loop.session.events
    (first,) = _results(events, "c1")
    assert first.data["message"]["content"][0]["content"] == [
        {"type": "text", "text": "c1 finished"}
    ]
    assert "error" not in first.data
    # The sleeping call and the one behind it (settled, never committed) are unknown.
    for call_id in ("c2", "c3"):
        (recovered,) = _results(events, call_id)
        assert recovered.data["error"] == OUTCOME_UNKNOWN_ERROR
    assert first.seq < _results(events, "c2")[0].seq < _results(events, "c3")[0].seq
    assert [e.type for e in events[-4:]] == [
        "tool/result",
        "step/end",
        "turn/end",
        "session/end-seed",
    ]
    assert events[-2].data["reason"] == {"kind": "interrupted"}
    assert len(report.closers) == 4  # two recovery results, step/end, turn/end: c1 needed none


@tool(parallel=True)
async def instant(i: int) -> str:
    """Return at once.

    Args:
        i: the call number.
    """
    return f"{i} ok"


async def _fsyncs_for(tool_steps: int, root: Path) -> int:
    calls = [{"id": f"c{i}", "name": "instant", "arguments": {"i": i}} for i in range(3)]
    script: list[dict[str, Any]] = [{"tool_calls": calls}] * tool_steps + [{"text": "done"}]
    loop = start_session(
        SessionSetup(
            store=JsonlStore(root),
            model=ScriptedModel(script),
            tools=[instant],
            cwd=root.parent,
        )
    )
    writer = loop.durability
    assert isinstance(writer, SessionWriter)
    await loop.run_turn("go")
    loop.close()
    return writer.statistics().fsync_count


@pytest.mark.anyio
async def test_calls_settling_together_cost_two_fsyncs_per_step(tmp_path: Path) -> None:
    # Each more step: one flush before its model request, one before its bodies run; the
    # three results commit together, so no flush of their own (the next request's covers them).
    few = await _fsyncs_for(2, tmp_path / "few")
    many = await _fsyncs_for(6, tmp_path / "many")
    assert many - few == (6 - 2) * 2
