"""A cancelled turn closes in bounded time though a sync tool body cannot be interrupted.

Issue 9 item 8 (the loop half): a synchronous body blocked for good (`time.sleep(3600)`, a
read that never returns) must not keep a cancelled turn, or a SIGTERMed process, alive. After
`LoopConfig.tool_cancel_grace_seconds` the call is answered `TOOL_OUTCOME_UNKNOWN` with a
text saying the body could not be interrupted (it may still run: its outcome is unknown,
Law 5), `step/end` and `turn/end {aborted}` follow (Law 4), and the process exits. In process
with `loop.cancel()`, then with a real child process (`_child.py stuck-sync`, the CLI's
`run_turn_live`) and SIGTERM. Each wait is a poll with a deadline; nothing asserts a time.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from duraloop.llm import ScriptedModel
from duraloop.log import Session
from duraloop.log.vocabulary import (
    ABORTED_AFTER_COMPLETION_TEXT,
    NOT_INTERRUPTED_TEXT,
    OUTCOME_UNKNOWN_ERROR,
)
from duraloop.loop import AgentLoop, LoopConfig
from duraloop.testing import assert_log_valid
from duraloop.tools import ToolContext, tool

CHILD = Path(__file__).with_name("_child.py")
DEADLINE_SECONDS = 30.0


def _content_text(event: Any) -> str:
    (block,) = event.data["message"]["content"]
    return "".join(part["text"] for part in block["content"])


@pytest.mark.anyio
async def test_cancel_with_a_blocked_sync_body_closes_the_turn_after_the_grace(
    tmp_path: Path,
) -> None:
    release = threading.Event()
    started = threading.Event()

    @tool
    def stuck(ctx: ToolContext) -> str:
        """Block until released, ignoring cancellation."""
        started.set()
        release.wait()
        return "too late"

    script: list[dict[str, Any]] = [
        {"tool_calls": [{"id": "s1", "name": "stuck", "arguments": {}}]},
        {"text": "never"},
    ]
    session = Session("s")
    loop = AgentLoop(
        session,
        model=ScriptedModel(script),
        tools=[stuck],
        cwd=tmp_path,
        config=LoopConfig(tool_cancel_grace_seconds=0.2),
    )
    results = []
    try:
        async with anyio.create_task_group() as group:

            async def run() -> None:
                results.append(await loop.run_turn("go"))

            group.start_soon(run)
            await anyio.to_thread.run_sync(started.wait)
            loop.cancel()
    finally:
        release.set()
    (result,) = results
    assert result.reason == {"kind": "aborted", "reason": {"kind": "user"}}
    (answer,) = [e for e in session.events if e.type == "tool/result"]
    assert answer.data["error"] == OUTCOME_UNKNOWN_ERROR
    assert _content_text(answer) == NOT_INTERRUPTED_TEXT.format(grace_seconds=0.2)
    assert [e.type for e in session.events[-3:]] == ["tool/result", "step/end", "turn/end"]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_cancel_while_a_sync_body_finishes_its_write_records_aborted_with_its_output(
    tmp_path: Path,
) -> None:
    started = threading.Event()

    @tool
    def save(ctx: ToolContext) -> str:
        """Finish writing a note even after the turn is cancelled (item 5)."""
        started.set()
        while not ctx.signal.aborted:
            time.sleep(0.01)  # simulates a write in progress when Ctrl-C comes
        (ctx.cwd / "note.txt").write_text("saved")
        return "wrote note.txt"

    script: list[dict[str, Any]] = [
        {"tool_calls": [{"id": "w1", "name": "save", "arguments": {}}]},
        {"text": "never"},
    ]
    session = Session("s")
    loop = AgentLoop(session, model=ScriptedModel(script), tools=[save], cwd=tmp_path)
    async with anyio.create_task_group() as group:
        group.start_soon(loop.run_turn, "go")
        await anyio.to_thread.run_sync(started.wait)
        loop.cancel()
    assert (tmp_path / "note.txt").read_text() == "saved"
    (answer,) = [e for e in session.events if e.type == "tool/result"]
    assert answer.data["error"] == {"name": "AbortError", "code": "ABORTED"}
    assert _content_text(answer) == f"{ABORTED_AFTER_COMPLETION_TEXT}\nwrote note.txt"
    assert session.events[-1].data["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}
    assert_log_valid(session)


def _log_events(store_dir: Path) -> list[dict[str, Any]]:
    (log,) = store_dir.glob("*/child/session.jsonl")
    return [json.loads(line) for line in log.read_bytes().splitlines()[1:]]


def test_sigterm_ends_a_process_whose_sync_tool_blocks_for_an_hour(tmp_path: Path) -> None:
    store_dir, workspace = tmp_path / "store", tmp_path / "ws"
    workspace.mkdir()
    with (tmp_path / "child.out").open("wb") as out, (tmp_path / "child.err").open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), "stuck-sync", str(store_dir), str(workspace)],
            stdout=out,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + DEADLINE_SECONDS
        while not (workspace / "blocked").is_file():
            assert proc.poll() is None, (tmp_path / "child.err").read_text()
            assert time.monotonic() < deadline, "the stuck body never started"
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        # The body sleeps for an hour: exiting at all proves the wait was bounded.
        assert proc.wait(timeout=DEADLINE_SECONDS) == 0, (tmp_path / "child.err").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "SIGTERM: cancelling the turn" in (tmp_path / "child.err").read_text()
    assert "turn ended: aborted" in (tmp_path / "child.out").read_text()
    events = _log_events(store_dir)
    (answer,) = [e for e in events if e["type"] == "tool/result"]
    assert answer["data"]["error"] == OUTCOME_UNKNOWN_ERROR
    text = answer["data"]["message"]["content"][0]["content"][0]["text"]
    assert "could not be interrupted" in text and "outcome is unknown" in text.lower()
    assert [e["type"] for e in events[-3:]] == ["tool/result", "step/end", "turn/end"]
    assert events[-1]["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}
