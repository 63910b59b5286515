"""Conformance: loop-spec 8 cases B11, B16-B18 (contexts, concludeTurn) and abort parking.

A result's `additional_contexts` (deferred by the body with `ToolContext.defer_context`,
or attached by a post-execute hook) are queued in `next-step` right after their owning
`tool/result` and enter at the next step (loop-spec 4.2, 4.3). `ToolContext.conclude_turn`
ends the turn after the step unless `next-step` holds steering or contexts (B16-B18). On
abort the contexts of committed results stay parked in `next-step` (loop-spec 4.4).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import anyio
import pytest

from duraloop.log import user_message
from duraloop.loop import AgentLoop
from duraloop.testing import assert_log_valid
from duraloop.tools import Tool, ToolCallRequest, ToolContext, ToolHooks, ToolOutcome
from loop._support import call, inbox_log, make_loop, tools_step, user_texts


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (the backend duraloop ships with)."""
    return "asyncio"


def _tool(name: str, body: Any, *, parallel: bool = True) -> Tool:
    return Tool(
        name=name,
        description=f"The {name} tool.",
        parameters={"type": "object", "properties": {}},
        validator=lambda arguments: arguments,
        body=body,
        parallel=parallel,
    )


def _add_context(call: ToolCallRequest, outcome: ToolOutcome) -> ToolOutcome:
    """Post-execute: attach `ctx-<callId>` (a hook returning its input changed)."""
    extra = user_message(f"ctx-{call.call_id}")
    return dataclasses.replace(outcome, additional_contexts=(*outcome.additional_contexts, extra))


@pytest.mark.anyio
async def test_b11_contexts_follow_their_results_and_enter_after_next_step_start(
    tmp_path: Path,
) -> None:
    released: dict[str, anyio.Event] = {"c1": anyio.Event(), "c2": anyio.Event()}
    settled: list[str] = []

    async def body(args: Any, ctx: ToolContext) -> str:
        await released[ctx.call_id].wait()
        settled.append(ctx.call_id)
        return "ok"

    session, model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1"), call("c2")), {"text": "done"}],
        [_tool("p", body)],
        hooks=ToolHooks(post_execute=[_add_context]),
    )
    async with anyio.create_task_group() as group:
        group.start_soon(loop.run_turn, "go")
        for _ in range(20):
            await anyio.lowlevel.checkpoint()
        released["c2"].set()  # c2 settles first
        for _ in range(20):
            await anyio.lowlevel.checkpoint()
        released["c1"].set()
    assert settled == ["c2", "c1"]
    log = inbox_log(session.events)
    start = log.index("res(c1,ok)")
    assert log[start:] == [
        "res(c1,ok)",
        "ins(ns)",
        "res(c2,ok)",
        "ins(ns)",
        "S-1",
        "claim",
        "S+2",
        "U",
        "U",
        "A",
        "S-2",
        "T-1(completed)",
    ]
    assert user_texts(model.requests[1].messages)[-2:] == ["ctx-c1", "ctx-c2"]
    # Every context user message comes after the last tool result.
    messages = model.requests[1].messages
    last_result = max(i for i, m in enumerate(messages) if m["source"].get("kind") == "tool")
    contexts = [
        i for i, m in enumerate(messages) if user_texts([m])[:1] in (["ctx-c1"], ["ctx-c2"])
    ]
    assert contexts and min(contexts) > last_result
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b11_composite_tool_deferring_two_contexts_keeps_both_sources(tmp_path: Path) -> None:
    async def body(args: Any, ctx: ToolContext) -> str:
        ctx.defer_context("deferred-1")
        ctx.defer_context(user_message("deferred-2", source={"kind": "tool-context"}))
        return "ok"

    session, model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1", "composite")), {"text": "done"}],
        [_tool("composite", body)],
        hooks=ToolHooks(post_execute=[_add_context]),
    )
    result = await loop.run_turn("go")
    assert (result.kind, result.steps) == ("completed", 2)
    log = inbox_log(session.events)
    start = log.index("res(c1,ok)")
    assert log[start : start + 4] == ["res(c1,ok)", "ins(ns)", "ins(ns)", "ins(ns)"]
    # Tool-deferred contexts precede the hook's; both sources are kept.
    assert user_texts(model.requests[1].messages)[-3:] == ["deferred-1", "deferred-2", "ctx-c1"]
    entered = model.requests[1].messages[-3:]
    assert [m["source"] for m in entered] == [
        {"kind": "user"},
        {"kind": "tool-context"},
        {"kind": "user"},
    ]
    result_event = next(e for e in session.events if e.type == "tool/result")
    assert set(result_event.data) == {"turn", "step", "message"}  # contexts not persisted
    assert_log_valid(session)


@pytest.mark.anyio
async def test_blocking_post_execute_discards_tool_deferred_contexts(tmp_path: Path) -> None:
    async def body(args: Any, ctx: ToolContext) -> str:
        ctx.defer_context("deferred")
        return "ok"

    def block(call: ToolCallRequest, outcome: ToolOutcome) -> ToolOutcome:
        return dataclasses.replace(
            ToolOutcome.failure("blocked"), additional_contexts=(user_message("why"),)
        )

    session, model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1")), {"text": "done"}],
        [_tool("p", body)],
        hooks=ToolHooks(post_execute=[block]),
    )
    await loop.run_turn("go")
    assert user_texts(model.requests[1].messages) == ["go", "why"]
    assert_log_valid(session)


def _concluding_tool(holder: list[AgentLoop] | None = None, steer: str | None = None) -> Tool:
    async def body(args: Any, ctx: ToolContext) -> str:
        ctx.conclude_turn()
        if holder is not None and steer is not None:
            holder[0].steer(steer)
        return "concluded"

    return _tool("finish", body, parallel=False)


@pytest.mark.anyio
async def test_b16_conclude_turn_ends_the_turn_after_one_request(tmp_path: Path) -> None:
    session, model, loop = make_loop(
        tmp_path, [tools_step(call("c1", "finish")), {"text": "unused"}], [_concluding_tool()]
    )
    result = await loop.run_turn("go")
    assert (result.kind, result.steps) == ("completed", 1)
    assert len(model.requests) == 1
    assert inbox_log(session.events)[-3:] == ["res(c1,ok)", "S-1", "T-1(completed)"]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b16_a_failed_call_does_not_conclude(tmp_path: Path) -> None:
    async def body(args: Any, ctx: ToolContext) -> str:
        ctx.conclude_turn()
        raise RuntimeError("nope")

    session, model, loop = make_loop(
        tmp_path, [tools_step(call("c1", "finish")), {"text": "after"}], [_tool("finish", body)]
    )
    result = await loop.run_turn("go")
    assert (result.kind, result.steps, result.text) == ("completed", 2, "after")
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b17_conclude_turn_with_steering_runs_a_second_request(tmp_path: Path) -> None:
    holder: list[AgentLoop] = []
    session, model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1", "finish")), {"text": "steered"}],
        [_concluding_tool(holder, "late steering")],
    )
    holder.append(loop)
    result = await loop.run_turn("go")
    assert (result.turn, result.kind, result.steps, result.text) == (1, "completed", 2, "steered")
    assert len(model.requests) == 2
    assert user_texts(model.requests[1].messages)[-1] == "late steering"
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b18_conclude_turn_with_contexts_runs_a_second_step(tmp_path: Path) -> None:
    session, model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1", "finish")), {"text": "with context"}],
        [_concluding_tool()],
        hooks=ToolHooks(post_execute=[_add_context]),
    )
    result = await loop.run_turn("go")
    assert (result.turn, result.kind, result.steps) == (1, "completed", 2)
    assert len(model.requests) == 2
    assert user_texts(model.requests[1].messages)[-1] == "ctx-c1"
    log = inbox_log(session.events)
    start = log.index("res(c1,ok)")
    assert log[start : start + 5] == ["res(c1,ok)", "ins(ns)", "S-1", "claim", "S+2"]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b23_abort_inside_body_parks_committed_contexts_in_next_step(tmp_path: Path) -> None:
    holder: list[AgentLoop] = []

    async def body(args: Any, ctx: ToolContext) -> str:
        holder[0].inject("A")
        holder[0].cancel()
        return "ok"

    def add_b(call: ToolCallRequest, outcome: ToolOutcome) -> ToolOutcome:
        return dataclasses.replace(outcome, additional_contexts=(user_message("B"),))

    session, model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1", "danger")), {"text": "later"}],
        [_tool("danger", body)],
        hooks=ToolHooks(post_execute=[add_b]),
    )
    holder.append(loop)
    result = await loop.run_turn("go")
    assert result.kind == "aborted"
    kinds = [e.type for e in session.events if e.type in ("tool/result", "step/end", "turn/end")]
    assert kinds == ["tool/result", "step/end", "turn/end"]
    assert [user_texts([m]) for m in loop.inbox.next_step] == [["B"]]
    assert_log_valid(session)
