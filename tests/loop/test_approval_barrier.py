"""An asking call is a barrier (docs/approvals.md#the-barrier).

Before a person is asked, every earlier started call of the step settles and its result is
committed; no later call starts until the ask is decided. A paused step leaves the asking
call and every call after it without `tool/call`; continuing runs them in model order.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from duraloop.log import Event
from duraloop.loop import TurnResult
from duraloop.testing import Gates, gated_tool
from duraloop.tools import ApprovalRequest, Decision

from ._approval_support import assert_approval_log_valid, audit, counting_tool, outcomes
from ._support import call, call_seq, make_loop, of_type, result_for, tools_step

pytestmark = pytest.mark.anyio

DONE = {"text": "done"}


def _result_order(events: Sequence[Event]) -> list[str]:
    return [e.data["message"]["source"]["callId"] for e in of_type(events, "tool/result")]


@pytest.mark.parametrize("asking_parallel", [True, False], ids=["parallel", "exclusive"])
async def test_earlier_calls_commit_before_the_ask_and_later_ones_wait(
    tmp_path: Path, asking_parallel: bool
) -> None:
    runs: list[str] = []
    tools = [
        counting_tool("p", runs, parallel=True),
        counting_tool("danger", runs, parallel=asking_parallel, requires_approval=True),
    ]
    session, _, loop = make_loop(
        tmp_path,
        [tools_step(call("p1", "p"), call("d", "danger"), call("p2", "p")), DONE],
        tools,
    )
    result = await loop.run_turn("go")
    assert result.kind == "paused"
    events = list(session.events)
    (asked,) = of_type(events, "approval/asked")
    assert result_for(events, "p1").seq < asked.seq  # committed before anyone is asked
    assert [e.data["callId"] for e in of_type(events, "tool/call")] == ["p1"]
    assert runs == ["p:p1"]
    assert_approval_log_valid(session)

    await loop.decide("d", allow=True)
    result = await loop.continue_turn()
    assert result.kind == "completed"
    assert _result_order(session.events) == ["p1", "d", "p2"]
    assert sorted(runs) == ["danger:d", "p:p1", "p:p2"]
    assert_approval_log_valid(session)


async def test_the_ask_waits_for_a_running_earlier_call(tmp_path: Path) -> None:
    gates = Gates()
    asked_with: list[int] = []
    session, _, loop = make_loop(
        tmp_path,
        [tools_step(call("g1", "slow"), call("d", "danger"), call("g2", "slow")), DONE],
        [gated_tool("slow", gates), counting_tool("danger", [], requires_approval=True)],
    )

    def approve(request: ApprovalRequest) -> Decision:
        asked_with.append(len(of_type(session.events, "tool/result")))
        return Decision(True)

    loop.approver = approve
    results: list[object] = []

    async def run() -> None:
        results.append(await loop.run_turn("go"))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await gates.wait_entered("g1")
        for _ in range(20):
            await anyio.lowlevel.checkpoint()
        assert of_type(session.events, "approval/asked") == []  # g1 still runs: no ask yet
        assert not gates.is_entered("g2")
        gates.release("g1")
        await gates.wait_entered("g2")
        gates.release("g2")
    assert asked_with == [1]  # g1's result was committed when the approver was asked
    (asked,) = of_type(session.events, "approval/asked")
    assert result_for(session.events, "g1").seq < asked.seq < call_seq(session.events, "g2")
    assert _result_order(session.events) == ["g1", "d", "g2"]
    assert_approval_log_valid(session)


async def test_parallel_calls_before_the_ask_still_run_together(tmp_path: Path) -> None:
    gates = Gates()
    session, _, loop = make_loop(
        tmp_path,
        [tools_step(call("g1", "slow"), call("g2", "slow"), call("d", "danger")), DONE],
        [gated_tool("slow", gates), counting_tool("danger", [], requires_approval=True)],
    )
    results: list[TurnResult] = []

    async def run() -> None:
        results.append(await loop.run_turn("go"))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await gates.wait_entered("g1", "g2")  # both started before the ask
        gates.release("g2", "g1")
    assert results[0].kind == "paused"
    assert _result_order(session.events) == ["g1", "g2"]


async def test_two_asking_calls_pause_the_step_one_at_a_time(tmp_path: Path) -> None:
    runs: list[str] = []
    tools = [
        counting_tool("p", runs, parallel=True),
        counting_tool("danger", runs, parallel=True, requires_approval=True),
    ]
    session, _, loop = make_loop(
        tmp_path,
        [
            tools_step(call("d1", "danger"), call("p1", "p"), call("d2", "danger")),
            DONE,
        ],
        tools,
    )
    first = await loop.run_turn("go")
    assert first.kind == "paused" and first.approval is not None
    assert first.approval.call_id == "d1"
    assert [p.call_id for p in loop.pending_approvals()] == ["d1"]
    await loop.decide("d1", allow=False, feedback="not that one")
    second = await loop.continue_turn()
    assert second.kind == "paused" and second.approval is not None
    assert second.approval.call_id == "d2"
    assert second.approval.step == first.approval.step
    assert [p.call_id for p in loop.pending_approvals()] == ["d2"]
    assert runs == ["p:p1"]
    assert_approval_log_valid(session)
    await loop.decide("d2", allow=True)
    third = await loop.continue_turn()
    assert third.kind == "completed"
    assert outcomes(session.events) == ["rejected", "allowed-once"]
    pairs = audit(session.events)
    assert [ask["callId"] for ask, _ in pairs] == ["d1", "d2"]
    assert _result_order(session.events) == ["d1", "p1", "d2"]
    assert sorted(runs) == ["danger:d2", "p:p1"]
    # The step stayed one step: one step/start, one step/end for the calls' step.
    assert len(of_type(session.events, "step/start")) == 2
    assert_approval_log_valid(session)


async def test_an_exclusive_call_after_the_ask_waits_for_the_decision(tmp_path: Path) -> None:
    runs: list[str] = []
    tools = [
        counting_tool("x", runs, parallel=False),
        counting_tool("danger", runs, parallel=True, requires_approval=True),
    ]
    session, _, loop = make_loop(
        tmp_path,
        [tools_step(call("d", "danger"), call("x1", "x"), call("x2", "x")), DONE],
        tools,
    )
    assert (await loop.run_turn("go")).kind == "paused"
    assert of_type(session.events, "tool/call") == []
    await loop.decide("d", allow=True)
    assert (await loop.continue_turn()).kind == "completed"
    assert runs == ["danger:d", "x:x1", "x:x2"]
    assert _result_order(session.events) == ["d", "x1", "x2"]
