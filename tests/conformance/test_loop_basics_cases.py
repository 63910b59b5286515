"""Conformance: docs/cases.md#loop-behaviour-cases behaviour cases B1-B18 (basics).

Pins Laws 4 and 6 on the live driver: every tool call is answered in model order, commits
wait for earlier calls, an exclusive call is a barrier between parallel groups. B6-B8 drive
the scheduler on its own (docs/scheduler.md#planning-and-groups): `execute_tool_calls` over a
session holding an open step, so each test sees exactly what the scheduler appends (the rolling cap,
a cap of 1, a registry swap that reclassifies the calls not yet started). Reclassification and
ordered middleware also hold on the live driver (B9, B10). A result's `additional_contexts`
(deferred by the body with `ToolContext.defer_context`, or attached by a post-execute hook) are
queued in `next-step` right after their owning `tool/result` and enter at the next step
(docs/scheduler.md#running-a-group, #ordering). `ToolContext.conclude_turn` ends the turn after the
step unless `next-step` holds steering or contexts (B16-B18). Concurrency is ordered with `Gates`
and `anyio.wait_all_tasks_blocked()`, never with sleeps, and every test checks the whole log
afterwards (`assert_log_valid`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import anyio
import pytest

from conformance._scheduling import Run, close_and_check, execute, open_step, pipeline_for
from duraloop.errors import ToolError
from duraloop.log import Event, user_message
from duraloop.loop import AgentLoop
from duraloop.testing import Gates, assert_log_valid, describe_log, gated_tool
from duraloop.tools import (
    Deny,
    SchedulerOutcome,
    Tool,
    ToolCallRequest,
    ToolContext,
    ToolHooks,
    ToolOutcome,
    ToolRegistry,
    tool,
)
from loop._support import (
    TurnOutcome,
    call,
    call_seq,
    inbox_log,
    make_loop,
    of_type,
    plain_tool,
    recorder_tool,
    result_for,
    result_text,
    run_into,
    tool_results_in,
    tools_step,
    user_texts,
)


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (the backend duraloop ships with)."""
    return "asyncio"


@pytest.mark.anyio
async def test_b1_text_turn_logs_one_step_and_completes(tmp_path: Path) -> None:
    session, model, loop = make_loop(tmp_path, [{"text": "hello there"}], [])
    result = await loop.run_turn("hi")
    assert (result.kind, result.text, result.steps) == ("completed", "hello there", 1)
    events = list(session.events)
    assert describe_log(events) == ["T+1", "S+1", "U", "H", "C", "A", "S-1", "T-1(completed)"]
    chunks = [e.seq for e in of_type(events, "assistant/chunk")]
    assert chunks and of_type(events, "assistant/message")[0].source_event_seqs == chunks
    assert of_type(events, "request/header")[0].data["reason"] == "initial"
    assert [m["role"] for m in session.derive_messages()] == ["user", "assistant"]
    assert len(model.requests) == 1
    assert_log_valid(session)


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


@pytest.mark.anyio
async def test_b2_tool_round_trip_sends_result_in_second_request(tmp_path: Path) -> None:
    session, model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1", "echo", text="ping"), text="calling echo"), {"text": "done"}],
        [echo],
    )
    result = await loop.run_turn("go")
    assert result.kind == "completed" and result.steps == 2
    events = list(session.events)
    assert describe_log(events) == [
        "T+1",
        "S+1",
        "U",
        "H",
        "C",
        "A(c1)",
        "call(c1)",
        "res(c1,ok)",
        "S-1",
        "S+2",
        "A",
        "S-2",
        "T-1(completed)",
    ]
    assert result_for(events, "c1").source_event_seqs == [call_seq(events, "c1")]
    assert len(model.requests) == 2
    assert tool_results_in(model.requests[1].messages) == [("c1", False, "echo: ping")]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b3_parallel_siblings_all_start_before_any_is_released(tmp_path: Path) -> None:
    gates = Gates()
    session, _model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1"), call("c2"), call("c3")), {"text": "done"}],
        [gated_tool("p", gates)],
    )
    out = TurnOutcome()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_into, loop, "go", out)
        await gates.wait_entered("c1", "c2", "c3")
        assert gates.entered == ["c1", "c2", "c3"]
        assert gates.passed == []
        gates.release("c3", "c2", "c1")
    assert out.result.kind == "completed"
    assert describe_log(session.events)[5:] == [
        "A(c1,c2,c3)",
        "call(c1)",
        "call(c2)",
        "call(c3)",
        "res(c1,ok)",
        "res(c2,ok)",
        "res(c3,ok)",
        "S-1",
        "S+2",
        "A",
        "S-2",
        "T-1(completed)",
    ]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b4_exclusive_call_is_a_barrier_between_parallel_groups(tmp_path: Path) -> None:
    record: list[str] = []
    session, _model, loop = make_loop(
        tmp_path,
        [tools_step(call("A1", "r"), call("A2", "w"), call("A3", "r")), {"text": "done"}],
        [recorder_tool("r", record), recorder_tool("w", record, parallel=False)],
    )
    await loop.run_turn("go")
    assert record == [
        "r-start-A1",
        "r-end-A1",
        "w-start-A2",
        "w-end-A2",
        "r-start-A3",
        "r-end-A3",
    ]
    assert describe_log(session.events)[6:12] == [
        "call(A1)",
        "res(A1,ok)",
        "call(A2)",
        "res(A2,ok)",
        "call(A3)",
        "res(A3,ok)",
    ]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b5_results_commit_in_model_order(tmp_path: Path) -> None:
    gates = Gates()
    session, _model, loop = make_loop(
        tmp_path, [tools_step(call("c1"), call("c2")), {"text": "done"}], [gated_tool("p", gates)]
    )
    out = TurnOutcome()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_into, loop, "go", out)
        await gates.wait_entered("c1", "c2")
        gates.release("c2")
        await anyio.wait_all_tasks_blocked()
        assert gates.passed == ["c2"]
        assert of_type(session.events, "tool/result") == []
        gates.release("c1")
    results = [
        e.data["message"]["source"]["callId"] for e in of_type(session.events, "tool/result")
    ]
    assert results == ["c1", "c2"]
    assert [cid for cid, _, _ in tool_results_in(session.derive_messages())] == ["c1", "c2"]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b6_rolling_cap_starts_next_call_when_a_slot_frees(tmp_path: Path) -> None:
    gates = Gates()
    session, blocks = open_step([(f"c{i}", "p") for i in range(1, 5)])
    pipeline = pipeline_for(ToolRegistry([gated_tool("p", gates)]), tmp_path)
    run = Run()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: execute(session, blocks, pipeline, run, cap=2))
        await gates.wait_entered("c1", "c2")
        await anyio.wait_all_tasks_blocked()
        assert gates.entered == ["c1", "c2"]
        gates.release("c1")
        await gates.wait_entered("c3")
        await anyio.wait_all_tasks_blocked()
        assert gates.entered == ["c1", "c2", "c3"]
        assert describe_log(session.events)[3:] == [
            "call(c1)",
            "call(c2)",
            "res(c1,ok)",
            "call(c3)",
        ]
        gates.release("c2", "c3", "c4")
    assert run.outcome == SchedulerOutcome(aborted=False)
    assert [s for s in describe_log(session.events) if s.startswith("res(")] == [
        "res(c1,ok)",
        "res(c2,ok)",
        "res(c3,ok)",
        "res(c4,ok)",
    ]
    close_and_check(session)


@pytest.mark.anyio
async def test_b7_cap_one_runs_parallel_calls_serially(tmp_path: Path) -> None:
    gates = Gates()
    session, blocks = open_step([("c1", "p"), ("c2", "p")])
    pipeline = pipeline_for(ToolRegistry([gated_tool("p", gates)]), tmp_path)
    run = Run()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: execute(session, blocks, pipeline, run, cap=1))
        await gates.wait_entered("c1")
        await anyio.wait_all_tasks_blocked()
        assert gates.entered == ["c1"]
        gates.release("c1")
        await gates.wait_entered("c2")
        gates.release("c2")
    assert describe_log(session.events)[3:] == [
        "call(c1)",
        "res(c1,ok)",
        "call(c2)",
        "res(c2,ok)",
    ]
    close_and_check(session)


@pytest.mark.anyio
async def test_b8_registry_swap_by_a_body_reclassifies_unstarted_calls(tmp_path: Path) -> None:
    gates = Gates()
    registry = ToolRegistry([gated_tool("x", gates, parallel=True)])

    async def replace_body(args: Any, ctx: ToolContext) -> str:
        registry.unregister("x")
        registry.register(gated_tool("x", gates, parallel=False))
        return "replaced"

    registry.register(
        Tool(
            name="replace",
            description="Swap x for an exclusive version.",
            parameters={"type": "object", "properties": {}},
            validator=lambda arguments: arguments,
            body=replace_body,
        )
    )
    session, blocks = open_step([("x0", "replace"), ("x1", "x"), ("x2", "x")])
    run = Run()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: execute(session, blocks, pipeline_for(registry, tmp_path), run))
        await gates.wait_entered("x1")
        await anyio.wait_all_tasks_blocked()
        assert gates.entered == ["x1"], "x now runs as barriers: only x1 starts"
        gates.release("x1")
        await gates.wait_entered("x2")
        gates.release("x2")
    assert describe_log(session.events)[3:] == [
        "call(x0)",
        "res(x0,ok)",
        "call(x1)",
        "res(x1,ok)",
        "call(x2)",
        "res(x2,ok)",
    ]
    close_and_check(session)


@pytest.mark.anyio
async def test_b9_observer_swapping_the_tool_for_an_exclusive_one_cuts_the_group(
    tmp_path: Path,
) -> None:
    gates = Gates()
    registry = ToolRegistry([gated_tool("x", gates)])
    session, _model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1", "x"), call("c2", "x"), call("c3", "x")), {"text": "done"}],
        registry,
        cap=2,
    )

    exclusive = gated_tool("x", gates, parallel=False)

    async def replaced_body(args: Any, ctx: ToolContext) -> str:
        return "replacement " + str(await exclusive.body(args, ctx))

    replacement = dataclasses.replace(exclusive, body=replaced_body)

    def swap_on_c1_result(event: Event) -> None:
        if event.type == "tool/result" and event.data["message"]["source"]["callId"] == "c1":
            registry.unregister("x")
            registry.register(replacement)

    session.observe(swap_on_c1_result)
    out = TurnOutcome()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_into, loop, "go", out)
        await gates.wait_entered("c1", "c2")
        gates.release("c1")
        await anyio.wait_all_tasks_blocked()
        assert "res(c1,ok)" in describe_log(session.events)
        assert not gates.is_entered("c3")  # exclusive now: it waits for c2 to settle
        assert [e.data["callId"] for e in of_type(session.events, "tool/call")] == ["c1", "c2"]
        gates.release("c2")
        await gates.wait_entered("c3")
        gates.release("c3")
    assert out.error is None and out.result.kind == "completed"
    assert gates.entered == ["c1", "c2", "c3"]
    assert result_text(result_for(session.events, "c3")) == "replacement x c3 done"
    assert describe_log(session.events)[5:12] == [
        "A(c1,c2,c3)",
        "call(c1)",
        "call(c2)",
        "res(c1,ok)",
        "res(c2,ok)",
        "call(c3)",
        "res(c3,ok)",
    ]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b10_pre_and_post_execute_see_model_order_while_bodies_finish_reversed(
    tmp_path: Path,
) -> None:
    gates = Gates()
    pre_seen: list[str] = []
    post_seen: list[str] = []

    def pre(c: ToolCallRequest) -> None:
        pre_seen.append(c.call_id)

    def post(c: ToolCallRequest, outcome: ToolOutcome) -> None:
        post_seen.append(c.call_id)

    session, _model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1"), call("c2"), call("c3")), {"text": "done"}],
        [gated_tool("p", gates)],
        hooks=ToolHooks(pre_execute=[pre], post_execute=[post]),
    )
    out = TurnOutcome()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_into, loop, "go", out)
        await gates.wait_entered("c1", "c2", "c3")
        for key in ("c3", "c2", "c1"):
            gates.release(key)
            await anyio.wait_all_tasks_blocked()
    assert out.result.kind == "completed"
    assert gates.passed == ["c3", "c2", "c1"]
    assert pre_seen == ["c1", "c2", "c3"]
    assert post_seen == ["c1", "c2", "c3"]
    assert [
        e.data["message"]["source"]["callId"] for e in of_type(session.events, "tool/result")
    ] == [
        "c1",
        "c2",
        "c3",
    ]
    assert_log_valid(session)


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
        [plain_tool("p", body)],
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
        [plain_tool("composite", body)],
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
        [plain_tool("p", body)],
        hooks=ToolHooks(post_execute=[block]),
    )
    await loop.run_turn("go")
    assert user_texts(model.requests[1].messages) == ["go", "why"]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b12_deny_has_no_code_and_pre_execute_throw_skips_post_execute(
    tmp_path: Path,
) -> None:
    record: list[str] = []
    post: list[str] = []

    def pre(c: ToolCallRequest) -> Deny | None:
        if c.call_id == "c2":
            return Deny("blocked by policy")
        if c.call_id == "c3":
            raise RuntimeError("pre exploded")
        return None

    def post_hook(c: ToolCallRequest, o: ToolOutcome) -> None:
        post.append(c.call_id)

    session, _model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1"), call("c2"), call("c3")), {"text": "done"}],
        [recorder_tool("p", record)],
        hooks=ToolHooks(pre_execute=[pre], post_execute=[post_hook]),
    )
    await loop.run_turn("go")
    events = list(session.events)
    assert record == ["p-start-c1", "p-end-c1"]
    assert post == ["c1", "c2"]
    shape = describe_log(events)
    assert [s for s in shape if s.startswith("res(")] == [
        "res(c1,ok)",
        "res(c2,err)",
        "res(c3,err)",
    ]
    assert [s for s in shape if s.startswith("call(")] == ["call(c1)", "call(c2)", "call(c3)"]
    denied, thrown = result_for(events, "c2"), result_for(events, "c3")
    assert "blocked by policy" in result_text(denied) and "error" not in denied.data
    assert result_text(thrown) == "Error: pre exploded" and "error" not in thrown.data
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b13_unknown_tool_is_an_error_result_and_the_turn_continues(
    tmp_path: Path,
) -> None:
    session, model, loop = make_loop(
        tmp_path, [tools_step(call("c1", "nope")), {"text": "sorry"}], [echo]
    )
    result = await loop.run_turn("go")
    assert result.kind == "completed" and len(model.requests) == 2
    event = result_for(session.events, "c1")
    assert event.data["error"] == {"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"}
    assert result_text(event) == 'Error: unknown tool "nope"'
    assert event.data["message"]["content"][0]["isError"] is True
    assert_log_valid(session)


@tool
def strict(count: int) -> str:
    """Take a count."""
    return f"count {count}"


@pytest.mark.anyio
async def test_b14_malformed_arguments_recorded_raw_and_fail_invalid_args(
    tmp_path: Path,
) -> None:
    seen: list[object] = []

    async def raw_body(args: Any, ctx: Any) -> str:
        seen.append(args)
        return "raw ok"

    raw = Tool(
        name="raw",
        description="Take anything.",
        parameters={"type": "object", "properties": {}},
        validator=lambda arguments: arguments,
        body=raw_body,
    )
    script = [
        tools_step(
            {"id": "c1", "name": "strict", "arguments": "not json"},
            {"id": "c2", "name": "raw", "arguments": "not json"},
            {"id": "c3", "name": "raw", "arguments": ""},
        ),
        {"text": "done"},
    ]
    session, _model, loop = make_loop(tmp_path, script, [strict, raw])
    await loop.run_turn("go")
    events = list(session.events)
    calls = {e.data["callId"]: e.data["arguments"] for e in of_type(events, "tool/call")}
    assert calls == {"c1": "not json", "c2": "not json", "c3": ""}
    assert result_for(events, "c1").data["error"] == {
        "name": "ToolArgsError",
        "code": "INVALID_ARGS",
    }
    assert seen == ["not json", {}]
    assert_log_valid(session)


@tool
async def fail(code: str) -> str:
    """Fail with a code."""
    raise ToolError("exploded", code=code)


@pytest.mark.anyio
async def test_b15_tool_error_code_passes_through(tmp_path: Path) -> None:
    session, _model, loop = make_loop(
        tmp_path, [tools_step(call("c1", "fail", code="BOOM")), {"text": "done"}], [fail]
    )
    await loop.run_turn("go")
    event = result_for(session.events, "c1")
    assert event.data["error"] == {"name": "ToolError", "code": "BOOM"}
    assert result_text(event) == "Error: exploded"
    assert_log_valid(session)


def _concluding_tool(holder: list[AgentLoop] | None = None, steer: str | None = None) -> Tool:
    async def body(args: Any, ctx: ToolContext) -> str:
        ctx.conclude_turn()
        if holder is not None and steer is not None:
            holder[0].steer(steer)
        return "concluded"

    return plain_tool("finish", body, parallel=False)


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
        tmp_path,
        [tools_step(call("c1", "finish")), {"text": "after"}],
        [plain_tool("finish", body)],
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
