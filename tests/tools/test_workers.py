"""The tool workers: a turn's dispatches run on workers it keeps (tools/_workers.py).

A turn opens one `tool_workers()`; a step reuses the workers of the steps before it, and
there are never more workers than the most dispatches that ran at once. What the block
raises comes out as it is, never in an exception group.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from duraloop.testing import assert_log_valid
from duraloop.tools import ToolContext, tool_workers
from loop._support import call, make_loop, plain_tool, tools_step


@pytest.mark.anyio
async def test_the_steps_of_a_turn_share_at_most_cap_worker_tasks(tmp_path: Path) -> None:
    tasks: set[int] = set()
    alive: list[object] = []  # held, so no task id is reused by a later task

    async def body(_args: Any, ctx: ToolContext) -> str:
        tasks.add(anyio.get_current_task().id)
        alive.append(asyncio.current_task())
        await anyio.lowlevel.checkpoint()
        return ctx.call_id

    script = [
        *(tools_step(*(call(f"s{s}c{c}") for c in range(5))) for s in range(3)),
        {"text": "done"},
    ]
    session, _model, loop = make_loop(tmp_path, script, [plain_tool("p", body)], cap=2)
    result = await loop.run_turn("go")
    assert (result.kind, result.steps) == ("completed", 4)
    assert len(tasks) == 2, "15 calls over 3 steps ran on the 2 workers the cap allows"
    assert len([e for e in session.events if e.type == "tool/result"]) == 15
    assert_log_valid(session)


class BoomError(Exception):
    pass


@pytest.mark.anyio
async def test_a_raise_in_the_block_comes_out_unwrapped_after_the_workers_return() -> None:
    ran: list[str] = []

    async def job() -> None:
        ran.append("job")

    with pytest.raises(BoomError):
        async with tool_workers() as workers:
            workers.submit(job)
            await anyio.lowlevel.checkpoint()
            raise BoomError
    assert ran == ["job"]
    with pytest.raises(RuntimeError, match="closed"):
        workers.submit(job)


@pytest.mark.anyio
async def test_a_busy_worker_finishes_its_job_after_close_and_an_idle_one_returns() -> None:
    order: list[str] = []
    release = anyio.Event()

    async def slow() -> None:
        await release.wait()
        order.append("slow done")

    async def quick() -> None:
        order.append("quick done")

    async with tool_workers() as workers:
        workers.submit(slow)
        workers.submit(quick)
        await anyio.lowlevel.checkpoint()
        await anyio.lowlevel.checkpoint()
        workers.submit(quick)  # the idle worker is reused, no third task
        await anyio.lowlevel.checkpoint()
        release.set()
    assert order == ["quick done", "quick done", "slow done"]
