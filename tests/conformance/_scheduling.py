"""Helpers for the scheduler cases: open a step with tool calls, run the scheduler on it.

Shared by `tests/conformance/test_loop_basics_cases.py` and `tests/tools/test_scheduler.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from duraloop.log import Session, assistant_message
from duraloop.testing import assert_log_valid
from duraloop.tools import (
    CancelSignal,
    SchedulerOutcome,
    ToolPipeline,
    ToolRegistry,
    execute_tool_calls,
)


def open_step(calls: list[tuple[str, str]]) -> tuple[Session, list[Any]]:
    session = Session("s")
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    blocks = [
        {"type": "tool-call", "id": call_id, "name": name, "arguments": "{}"}
        for call_id, name in calls
    ]
    message = assistant_message(blocks, provider="test", model="test")
    session.append(
        "assistant/message", {"turn": 1, "step": 1, "message": message}, surface_op="append"
    )
    return session, blocks


def close_and_check(session: Session) -> None:
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert_log_valid(session)


class Run:
    def __init__(self) -> None:
        self.outcome: SchedulerOutcome | None = None
        self.error: BaseException | None = None
        self.done = anyio.Event()


async def execute(
    session: Session,
    blocks: list[Any],
    pipeline: ToolPipeline,
    run: Run,
    *,
    cap: Any = 10,
    signal: CancelSignal | None = None,
) -> None:
    try:
        run.outcome = await execute_tool_calls(
            session,
            blocks,
            turn=1,
            step=1,
            pipeline=pipeline,
            signal=signal or CancelSignal(),
            max_parallel_tool_calls=cap,
        )
    except Exception as exc:
        run.error = exc
    finally:
        run.done.set()


def pipeline_for(registry: ToolRegistry, tmp_path: Path) -> ToolPipeline:
    return ToolPipeline(registry, cwd=tmp_path, session_id="s")
