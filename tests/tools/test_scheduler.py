"""The tool-call scheduler on its own (docs/scheduler.md#planning-and-groups): cap, barriers, drain
(Laws 6, 7).

`execute_tool_calls` is driven directly over a session holding an open step, so each test
sees exactly what the scheduler appends. Gated bodies (`duraloop.testing.Gates`) and
`anyio.wait_all_tasks_blocked()` decide the order; no test sleeps. The behaviour cases B6-B8
(rolling cap, cap 1, registry swap) are in `tests/conformance/test_loop_basics_cases.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from conformance._scheduling import Run, close_and_check, execute, open_step, pipeline_for
from duraloop.testing import Gates, describe_log, gated_tool
from duraloop.tools import (
    CancelSignal,
    SchedulerOutcome,
    ToolCallRequest,
    ToolPipeline,
    ToolRegistry,
    execute_tool_calls,
)


@pytest.mark.anyio
async def test_cap_getter_is_read_once_per_group(tmp_path: Path) -> None:
    gates = Gates()
    registry = ToolRegistry([gated_tool("p", gates), gated_tool("x", gates, parallel=False)])
    session, blocks = open_step([("c1", "p"), ("c2", "p"), ("c3", "x"), ("c4", "p")])
    reads: list[int] = []

    def cap() -> int:
        reads.append(len(session.events))
        return 10

    gates.release("c1", "c2", "c3", "c4")
    run = Run()
    await execute(session, blocks, pipeline_for(registry, tmp_path), run, cap=cap)
    assert run.error is None
    assert len(reads) == 3, "groups [c1, c2], [c3], [c4]"
    close_and_check(session)


@pytest.mark.anyio
async def test_raising_cap_getter_fails_before_any_tool_call(tmp_path: Path) -> None:
    session, blocks = open_step([("c1", "p"), ("c2", "p")])
    boom = RuntimeError("settings unreadable")

    def cap() -> int:
        raise boom

    run = Run()
    pipeline = pipeline_for(ToolRegistry([gated_tool("p", Gates())]), tmp_path)
    await execute(session, blocks, pipeline, run, cap=cap)
    assert run.error is boom
    assert [e.type for e in session.events][3:] == []


@pytest.mark.anyio
async def test_dispatch_failure_waits_for_in_flight_sibling_before_raising(
    tmp_path: Path,
) -> None:
    gates = Gates()
    boom = RuntimeError("dispatch exploded")

    class FailingFirst(ToolPipeline):
        async def dispatch(self, call: ToolCallRequest, signal: CancelSignal) -> Any:
            if call.call_id == "c1":
                await gates.wait("dispatch-c1")
            return await super().dispatch(call, signal)

    session, blocks = open_step([("c1", "p"), ("c2", "p"), ("c3", "p")])
    pipeline = FailingFirst(ToolRegistry([gated_tool("p", gates)]), cwd=tmp_path, session_id="s")
    run = Run()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: execute(session, blocks, pipeline, run, cap=2))
        await gates.wait_entered("dispatch-c1", "c2")
        gates.release("dispatch-c1", error=boom)
        await anyio.wait_all_tasks_blocked()
        assert not run.done.is_set(), "the scheduler drains c2 before raising (Law 7)"
        gates.release("c2")
    assert run.error is boom
    assert "c3" not in gates.entered
    assert describe_log(session.events)[3:] == ["call(c1)", "call(c2)"]


@pytest.mark.anyio
async def test_abort_before_group_answers_every_call_with_skipped_pairs(tmp_path: Path) -> None:
    gates = Gates()
    session, blocks = open_step([("c1", "p"), ("c2", "x")])
    registry = ToolRegistry([gated_tool("p", gates), gated_tool("x", gates, parallel=False)])
    signal = CancelSignal()
    signal.cancel()
    run = Run()
    await execute(session, blocks, pipeline_for(registry, tmp_path), run, signal=signal)
    assert run.outcome == SchedulerOutcome(aborted=True)
    assert gates.entered == []
    assert describe_log(session.events)[3:] == [
        "call(c1)",
        "res(c1,ABORTED_BEFORE_DISPATCH)",
        "call(c2)",
        "res(c2,ABORTED_BEFORE_DISPATCH)",
    ]
    close_and_check(session)


class _DurableThrough:
    """An `ensure_durable` recording each seq asked for; it fails after `fail_after` calls."""

    def __init__(self, fail: BaseException | None = None, *, fail_after: int = 0) -> None:
        self.asked: list[int] = []
        self.fail = fail
        self.fail_after = fail_after

    async def __call__(self, seq: int) -> None:
        self.asked.append(seq)
        if self.fail is not None and len(self.asked) > self.fail_after:
            raise self.fail


@pytest.mark.anyio
async def test_b4_committed_head_result_is_made_durable_while_a_sibling_still_runs(
    tmp_path: Path,
) -> None:
    gates = Gates()
    session, blocks = open_step([("c1", "p"), ("c2", "p"), ("c3", "p")])
    pipeline = pipeline_for(ToolRegistry([gated_tool("p", gates)]), tmp_path)
    durable = _DurableThrough()
    run = Run()

    async def execute() -> None:
        try:
            run.outcome = await execute_tool_calls(
                session,
                blocks,
                turn=1,
                step=1,
                pipeline=pipeline,
                signal=CancelSignal(),
                ensure_durable=durable,
            )
        finally:
            run.done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(execute)
        await gates.wait_entered("c1", "c2", "c3")
        gates.release("c1", "c3")
        await anyio.wait_all_tasks_blocked()
        (first,) = [e for e in session.events if e.type == "tool/result"]
        # c2 still runs: c1's committed result was flushed; c3's (uncommitted) waits.
        assert max(durable.asked) >= first.seq
        assert max(durable.asked) == session.seq - 1
        flushes = len(durable.asked)
        gates.release("c2")
    assert run.outcome == SchedulerOutcome(aborted=False)
    # c2 and c3 commit together with nothing left running: the step's next flush covers them.
    assert len(durable.asked) == flushes
    close_and_check(session)


@pytest.mark.anyio
async def test_b4_calls_settling_together_add_no_flush(tmp_path: Path) -> None:
    gates = Gates()
    session, blocks = open_step([("c1", "p"), ("c2", "p"), ("c3", "p")])
    pipeline = pipeline_for(ToolRegistry([gated_tool("p", gates)]), tmp_path)
    durable = _DurableThrough()
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: execute_tool_calls(
                session,
                blocks,
                turn=1,
                step=1,
                pipeline=pipeline,
                signal=CancelSignal(),
                ensure_durable=durable,
            )
        )
        await gates.wait_entered("c1", "c2", "c3")
        gates.release("c1", "c2", "c3")
    tool_call_seqs = [e.seq for e in session.events if e.type == "tool/call"]
    assert durable.asked == tool_call_seqs  # one per body (one group commit), none for results


@pytest.mark.anyio
async def test_b4_failed_result_flush_is_a_scheduler_failure_after_the_drain(
    tmp_path: Path,
) -> None:
    gates = Gates()
    session, blocks = open_step([("c1", "p"), ("c2", "p")])
    pipeline = pipeline_for(ToolRegistry([gated_tool("p", gates)]), tmp_path)
    durable = _DurableThrough(fail=OSError("disk full"), fail_after=2)  # the bodies' flushes pass
    run = Run()

    async def execute() -> None:
        try:
            await execute_tool_calls(
                session,
                blocks,
                turn=1,
                step=1,
                pipeline=pipeline,
                signal=CancelSignal(),
                ensure_durable=durable,
            )
        except OSError as exc:
            run.error = exc
        finally:
            run.done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(execute)
        await gates.wait_entered("c1", "c2")
        gates.release("c1")
        await anyio.wait_all_tasks_blocked()
        assert not run.done.is_set()  # the started c2 is drained first
        gates.release("c2")
    assert isinstance(run.error, OSError)
    # c2's result is discarded (docs/scheduler.md#running-a-group); the driver answers it on
    # recovery.
    assert [s for s in describe_log(session.events) if s.startswith("res(")] == ["res(c1,ok)"]
