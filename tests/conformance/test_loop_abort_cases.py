"""Conformance: docs/cases.md#loop-behaviour-cases behaviour cases B19-B31 (abort), plus `dispose`.

Pins Laws 4 and 6 under cancellation at every boundary (docs/loop.md#send-and-cancel, F2, F10-F12,
F17): cancellation answers unstarted calls with `ABORTED_BEFORE_DISPATCH` pairs, a cancel mid-stream
keeps the streamed prefix, and on abort the contexts of committed results stay parked in `next-step`
(docs/scheduler.md#cancellation). B28 and B30 are pinned in both modes. Awaited, without a driver, a
send only queues: an idle `cancel()` discards queued follow-ups and `cancel(keep_inbox=True)` parks
them. With the background driver (`async with loop:`, docs/loop.md#send-and-cancel) a waking send
from idle opens the turn before it returns, so a cancel right after it closes the already-open turn
(B28), and a waking send during an abort is latched (B30). Disposal, an exception in the body of
`async with loop:` and a cancelled host scope abort the running turn durably. Concurrency is ordered
with `Gates` and `anyio.wait_all_tasks_blocked()`, never with sleeps, and every test checks the
whole log afterwards.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from duraloop.errors import UsageError
from duraloop.llm import (
    ModelRequest,
    RetryPolicy,
    ScriptedModel,
    StreamChunk,
    block_start,
    finish_chunk,
    text_delta,
)
from duraloop.log import Event, Session, user_message
from duraloop.loop import (
    AgentLoop,
    LoopConfig,
    LoopHooks,
    SessionSetup,
    StepContext,
    resume_session,
    start_session,
)
from duraloop.store import MemoryStore
from duraloop.testing import Gates, assert_log_valid, describe_log, gated_tool
from duraloop.tools import ToolCallRequest, ToolContext, ToolHooks, ToolOutcome
from loop._support import (
    HangFirstModel,
    TurnOutcome,
    call,
    inbox_log,
    make_loop,
    of_type,
    plain_tool,
    recorder_tool,
    result_for,
    run_into,
    tool_results_in,
    tools_step,
    user_texts,
)

ABD = "ABORTED_BEFORE_DISPATCH"
USER = {"kind": "user"}


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (the backend duraloop ships with)."""
    return "asyncio"


@pytest.mark.anyio
async def test_b19_cancel_from_assistant_observer_answers_call_before_dispatch(
    tmp_path: Path,
) -> None:
    record: list[str] = []
    session, model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1", "danger")), {"text": "later"}],
        [recorder_tool("danger", record, parallel=False)],
    )

    def cancel_on_assistant(event: Event) -> None:
        if event.type == "assistant/message":
            loop.cancel()

    unsubscribe = session.observe(cancel_on_assistant)
    result = await loop.run_turn("go")
    unsubscribe()
    assert result.reason == {"kind": "aborted", "reason": {"kind": "user"}}
    assert record == []
    events = list(session.events)
    assert describe_log(events)[5:] == [
        "A(c1)",
        "call(c1)",
        f"res(c1,{ABD})",
        "S-1",
        "T-1(aborted)",
    ]
    assert result_for(events, "c1").data["error"] == {"name": "AbortError", "code": ABD}
    assert_log_valid(session)

    later = await loop.run_turn("again")
    assert later.kind == "completed"
    assert tool_results_in(model.requests[1].messages) == [
        ("c1", True, "Error: tool call aborted before dispatch")
    ]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b20_cancel_during_pre_execute_starts_no_body(tmp_path: Path) -> None:
    record: list[str] = []
    holder: list[AgentLoop] = []

    def pre(c: ToolCallRequest) -> None:
        if c.call_id == "c1":
            holder[0].cancel()

    session, _model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1"), call("c2"))],
        [recorder_tool("p", record)],
        hooks=ToolHooks(pre_execute=[pre]),
    )
    holder.append(loop)
    result = await loop.run_turn("go")
    assert result.kind == "aborted"
    assert record == []
    assert describe_log(session.events)[5:] == [
        "A(c1,c2)",
        "call(c1)",
        f"res(c1,{ABD})",
        "call(c2)",
        f"res(c2,{ABD})",
        "S-1",
        "T-1(aborted)",
    ]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b21_cancel_mid_group_commits_started_and_skips_unstarted(tmp_path: Path) -> None:
    gates = Gates()
    session, _model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1"), call("c2"), call("c3"), call("c4"))],
        [gated_tool("p", gates)],
        cap=2,
    )
    out = TurnOutcome()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_into, loop, "go", out)
        await gates.wait_entered("c1", "c2")
        loop.cancel()
        gates.release("c1", "c2")
    assert out.result.kind == "aborted"
    assert gates.entered == ["c1", "c2"]
    assert describe_log(session.events)[5:] == [
        "A(c1,c2,c3,c4)",
        "call(c1)",
        "call(c2)",
        "res(c1,ABORTED)",
        "res(c2,ABORTED)",
        "call(c3)",
        f"res(c3,{ABD})",
        "call(c4)",
        f"res(c4,{ABD})",
        "S-1",
        "T-1(aborted)",
    ]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b22_aborted_parallel_group_skips_later_exclusive_barrier(tmp_path: Path) -> None:
    gates = Gates()
    record: list[str] = []
    session, _model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1"), call("c2"), call("c3", "x"))],
        [gated_tool("p", gates), recorder_tool("x", record, parallel=False)],
        cap=2,
    )
    out = TurnOutcome()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_into, loop, "go", out)
        await gates.wait_entered("c1", "c2")
        loop.cancel()
        gates.release("c1", "c2")
    assert out.result.kind == "aborted"
    assert record == []
    assert describe_log(session.events)[-5:] == [
        "res(c2,ABORTED)",
        "call(c3)",
        f"res(c3,{ABD})",
        "S-1",
        "T-1(aborted)",
    ]
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
        [plain_tool("danger", body)],
        hooks=ToolHooks(post_execute=[add_b]),
    )
    holder.append(loop)
    result = await loop.run_turn("go")
    assert result.kind == "aborted"
    kinds = [e.type for e in session.events if e.type in ("tool/result", "step/end", "turn/end")]
    assert kinds == ["tool/result", "step/end", "turn/end"]
    assert [user_texts([m]) for m in loop.inbox.next_step] == [["B"]]
    assert_log_valid(session)


class _HangingModel:
    """Streams a text prefix, then waits until cancelled."""

    provider = "test"
    model = "hang"

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        self.requests.append(request)
        yield block_start(0, "text")
        yield text_delta(0, "partial")
        if len(self.requests) == 1:
            await anyio.Event().wait()
        yield finish_chunk("stop")


@pytest.mark.anyio
async def test_b24_cancel_mid_stream_keeps_interrupted_prefix(tmp_path: Path) -> None:
    session = Session("s")
    model = _HangingModel()
    loop = AgentLoop(session, model=model, cwd=tmp_path)
    out = TurnOutcome()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_into, loop, "go", out)
        await anyio.wait_all_tasks_blocked()
        loop.cancel()
    assert out.result.reason == {"kind": "aborted", "reason": {"kind": "user"}}
    events = list(session.events)
    assert describe_log(events)[5:] == ["A!", "S-1", "T-1(aborted)"]
    message = of_type(events, "assistant/message")[0]
    assert message.data["message"]["content"] == [{"type": "text", "text": "partial"}]
    assert message.data["interrupted"] is True
    assert message.source_event_seqs == [e.seq for e in of_type(events, "assistant/chunk")]
    assert_log_valid(session)

    await loop.run_turn("next")
    texts = [block.get("text") for m in model.requests[1].messages for block in m["content"]]
    assert "partial" in texts
    assert_log_valid(session)


@pytest.mark.anyio
async def test_cancel_from_chunk_observer_keeps_interrupted_prefix(tmp_path: Path) -> None:
    """Regression: a cancel between chunks (no await in between) lost the visible prefix."""
    session, _model, loop = make_loop(tmp_path, [{"text": "hello there my good friend"}], [])
    deltas: list[int] = []

    def cancel_on_second_delta(event: Event) -> None:
        if event.type == "assistant/chunk" and event.data["chunk"]["type"] == "text-delta":
            deltas.append(event.seq)
            if len(deltas) == 2:
                loop.cancel()

    session.observe(cancel_on_second_delta)
    result = await loop.run_turn("go")
    assert result.kind == "aborted"
    events = list(session.events)
    assert describe_log(events)[5:] == ["A!", "S-1", "T-1(aborted)"]
    message = of_type(events, "assistant/message")[0]
    committed = "".join(session.events[seq].data["chunk"]["text"] for seq in deltas)
    assert len(deltas) == 2 and committed.strip()
    assert message.data["message"]["content"] == [{"type": "text", "text": committed}]
    assert message.source_event_seqs == [e.seq for e in of_type(events, "assistant/chunk")]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b25_cancel_while_recovering_from_a_request_error_writes_no_message(
    tmp_path: Path,
) -> None:
    # duraloop's request-error recovery is its retry policy: cancel during its backoff wait.
    never = RetryPolicy(initial_delay_ms=600_000, max_delay_ms=600_000, jitter_ratio=0.0)
    script: list[dict[str, Any]] = [
        {"text": "doomed partial", "error": {"code": "RATE_LIMIT", "message": "slow down"}},
        {"text": "never requested"},
    ]
    session, model, loop = make_loop(tmp_path, script, [], config=LoopConfig(retry=never))
    out = TurnOutcome()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_into, loop, "go", out)
        await anyio.wait_all_tasks_blocked()
        assert session.events[-1].type == "llm/retry"
        loop.cancel()
    assert out.result.reason == {"kind": "aborted", "reason": USER}
    assert len(model.requests) == 1
    events = list(session.events)
    assert of_type(events, "assistant/chunk")  # the failed attempt's chunks stay
    assert not of_type(events, "assistant/message")
    assert describe_log(events) == ["T+1", "S+1", "U", "H", "C", "llm/retry", "S-1", "T-1(aborted)"]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b26_cancel_from_a_step_start_observer_requests_nothing(tmp_path: Path) -> None:
    session, model, loop = make_loop(tmp_path, [{"text": "never requested"}], [])
    session.observe(lambda event: loop.cancel() if event.type == "step/start" else None)
    result = await loop.run_turn("go")
    assert result.reason == {"kind": "aborted", "reason": USER}
    assert model.requests == []
    events = list(session.events)
    assert not of_type(events, "assistant/chunk")
    # The claimed prompt enters the step (claims are never returned), then the step closes.
    assert describe_log(events) == ["T+1", "S+1", "U", "S-1", "T-1(aborted)"]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b27_cancel_inside_turn_stopping_ends_after_one_step(tmp_path: Path) -> None:
    def turn_stopping(ctx: StepContext) -> None:
        ctx.loop.steer("keep going")  # would continue the turn, but the cancel wins
        ctx.loop.cancel()

    session, model, loop = make_loop(tmp_path, [{"text": "one"}, {"text": "two"}], [])
    loop.hooks = LoopHooks(turn_stopping=turn_stopping)
    result = await loop.run_turn("go")
    assert result.reason == {"kind": "aborted", "reason": USER}
    assert (result.steps, len(model.requests)) == (1, 1)
    assert inbox_log(session.events)[-5:] == ["A", "S-1", "ins(ns)", "discard", "T-1(aborted)"]
    assert not loop.inbox.pending  # cancel() without keep_inbox discarded the steering
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b28_idle_cancel_after_queued_sends_discards_them_without_a_turn(
    tmp_path: Path,
) -> None:
    session, model, loop = make_loop(tmp_path, [], [])
    loop.followup("A")
    loop.followup("B")
    loop.cancel()
    assert inbox_log(session.events) == ["ins(nt)", "ins(nt)", "discard"]
    assert not loop.inbox.pending and loop.last_turn == 0
    assert model.requests == []
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b28_cancel_right_after_a_waking_send_closes_the_opened_turn_without_a_step(
    tmp_path: Path,
) -> None:
    session, model, loop = make_loop(tmp_path, [{"text": "never"}], [])
    async with loop:
        loop.followup("A")
        loop.followup("B")
        loop.cancel()
        (result,) = await loop.wait_idle()
    assert result.reason == {"kind": "aborted", "reason": USER}
    # T+1 and the claim of A happened synchronously; B got a cancel splice; no step ran.
    assert inbox_log(session.events) == [
        "ins(nt)",
        "T+1",
        "claim",
        "ins(nt)",
        "discard",
        "T-1(aborted)",
    ]
    assert model.requests == []
    assert loop.inbox.pending == 0
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b29_keep_inbox_parks_queued_followup_for_the_next_run_turn(tmp_path: Path) -> None:
    session = Session("s")
    model = HangFirstModel()
    loop = AgentLoop(session, model=model, cwd=tmp_path)
    out = TurnOutcome()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_into, loop, "A", out)
        await anyio.wait_all_tasks_blocked()
        loop.followup("P")
        loop.cancel(keep_inbox=True)
    assert out.result.reason == {"kind": "aborted", "reason": USER}
    assert [m["content"][0]["text"] for m in loop.inbox.next_turn] == ["P"]
    assert len(model.requests) == 1
    loop.followup("W")
    results = await loop.run_pending()
    assert [(r.turn, r.kind) for r in results] == [(2, "completed"), (3, "completed")]
    assert len(model.requests) == 3
    assert user_texts(model.requests[1].messages)[-1] == "P"
    assert user_texts(model.requests[2].messages)[-1] == "W"
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b30_wake_latch_runs_a_send_made_during_the_abort(tmp_path: Path) -> None:
    session = Session("s")
    model = HangFirstModel()
    loop = AgentLoop(session, model=model, cwd=tmp_path)
    async with loop:
        loop.followup("A")
        await anyio.wait_all_tasks_blocked()
        loop.cancel(keep_inbox=True)
        loop.followup("B")  # waking after abort: next-turn, latched
        results = await loop.wait_idle()  # waits through the latch replay's drain too
    assert [r.reason for r in results] == [
        {"kind": "aborted", "reason": USER},
        {"kind": "completed"},
    ]
    assert len(model.requests) == 2
    assert user_texts(model.requests[1].messages)[-1] == "B"
    assert_log_valid(session)


def _kinds(results: list[Any]) -> list[tuple[int, str]]:
    return [(r.turn, r.kind) for r in results]


@pytest.mark.anyio
async def test_b30_cancel_without_keep_inbox_clears_the_latch(tmp_path: Path) -> None:
    session = Session("s")
    model = HangFirstModel()
    loop = AgentLoop(session, model=model, cwd=tmp_path)
    async with loop:
        loop.followup("A")
        await anyio.wait_all_tasks_blocked()
        loop.cancel(keep_inbox=True)
        loop.steer("B")  # steering after abort becomes next-turn work, latched
        assert [m["content"][0]["text"] for m in loop.inbox.next_turn] == ["B"]
        loop.cancel()  # clears the inbox and the latch
        results = await loop.wait_idle()
        await anyio.wait_all_tasks_blocked()
        assert await loop.wait_idle() == []
    assert _kinds(results) == [(1, "aborted")]
    assert len(model.requests) == 1
    assert loop.inbox.pending == 0
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b30_disposal_is_never_latched(tmp_path: Path) -> None:
    session = Session("s")
    model = HangFirstModel()
    loop = AgentLoop(session, model=model, cwd=tmp_path)
    async with loop:
        loop.followup("A")
        await anyio.wait_all_tasks_blocked()
        async with anyio.create_task_group() as tg:
            tg.start_soon(loop.dispose)
            await anyio.wait_all_tasks_blocked()
            with pytest.raises(UsageError, match="closed"):
                loop.followup("late")
    assert [e.data["reason"] for e in session.events if e.type == "turn/end"] == [
        {"kind": "aborted", "reason": {"kind": "disposed"}}
    ]
    assert len(model.requests) == 1
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b31_idle_cancel_is_a_no_op_and_the_next_turn_runs_normally(tmp_path: Path) -> None:
    session, model, loop = make_loop(tmp_path, [{"text": "fine"}], [])
    loop.cancel()
    assert list(session.events) == []
    result = await loop.run_turn("go")
    assert (result.turn, result.kind, result.text) == (1, "completed", "fine")
    assert_log_valid(session)


@pytest.mark.anyio
async def test_dispose_aborts_the_running_turn_as_disposed_then_closes(tmp_path: Path) -> None:
    store = MemoryStore()
    model = HangFirstModel()
    loop = start_session(SessionSetup(store=store, model=model, cwd=tmp_path))
    out = TurnOutcome()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_into, loop, "go", out)
        await anyio.wait_all_tasks_blocked()
        loop.followup("later")
        await loop.dispose()
        assert out.result is not None  # dispose returned only after the turn closed
    assert out.result.reason == {"kind": "aborted", "reason": {"kind": "disposed"}}
    assert describe_log(loop.session.events)[-3:] == ["A!", "S-1", "T-1(aborted)"]
    with pytest.raises(UsageError, match="closed"):
        await loop.run_turn("again")
    with pytest.raises(UsageError, match="closed"):
        loop.followup("too late")
    await loop.dispose()  # idempotent
    # The writer is released and everything is durable, the parked follow-up included.
    resumed, repair = resume_session(
        loop.session.id, SessionSetup(store=store, model=ScriptedModel([]))
    )
    assert repair.closers == []
    assert [m["content"][0]["text"] for m in resumed.inbox.next_turn] == ["later"]
    assert_log_valid(resumed.session)
    resumed.close()


@pytest.mark.anyio
async def test_dispose_while_idle_only_closes(tmp_path: Path) -> None:
    session, _model, loop = make_loop(tmp_path, [{"text": "ok"}], [])
    await loop.run_turn("go")
    count = session.seq
    await loop.dispose()
    assert session.seq == count
    with pytest.raises(UsageError):
        await loop.run_turn("again")


@pytest.mark.anyio
async def test_an_exception_in_the_body_of_async_with_loop_propagates_unwrapped(
    tmp_path: Path,
) -> None:
    # Regression (user trial): it came out as an ExceptionGroup, so `except ValueError` missed it.
    session = Session("s")
    loop = AgentLoop(session, model=HangFirstModel(), cwd=tmp_path)
    with pytest.raises(ValueError, match="my bug"):
        async with loop:
            loop.followup("A")
            await anyio.wait_all_tasks_blocked()
            raise ValueError("my bug")
    assert [e.data["reason"] for e in session.events if e.type == "turn/end"] == [
        {"kind": "aborted", "reason": {"kind": "disposed"}}
    ]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_cancelling_the_scope_around_async_with_loop_aborts_the_turn_durably(
    tmp_path: Path,
) -> None:
    session = Session("s")
    loop = AgentLoop(session, model=HangFirstModel(), cwd=tmp_path)
    with anyio.CancelScope() as scope:
        async with loop:
            loop.followup("A")
            await anyio.wait_all_tasks_blocked()
            scope.cancel()
            await anyio.sleep_forever()
    assert scope.cancelled_caught
    (end,) = [e for e in session.events if e.type == "turn/end"]
    assert end.data["reason"]["kind"] == "aborted"
    assert session.events[-1].type == "turn/end"
    assert_log_valid(session)
