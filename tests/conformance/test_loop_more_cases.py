"""Conformance: loop-spec 8 cases B9-B10, B25-B31, B37-B38 and B59-B62, plus `dispose`.

Pins the remaining behaviour cases of issue 4 on the live driver: reclassification and
ordered middleware in the scheduler (Law 6), cancellation at every boundary in awaited
mode (loop-spec 2.1, F2, F10-F12, F17), request-building failures that never
reach the model (F7), a live session that cannot be resumed under its writer (Law 8), fork
numbering, config validation (D23) and step-boundary vetoes (F1, F5, F15). Concurrency is
ordered with `Gates` and `anyio.wait_all_tasks_blocked()`, never with sleeps, and every test
checks the whole log afterwards.

B28 and B30 with the background driver (`async with loop:`) are in
`test_loop_driver_cases.py`; here is their awaited-mode half: without a driver a send only
queues, an idle `cancel()` discards queued follow-ups, `cancel(keep_inbox=True)` parks them.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import anyio
import pytest

from duraloop.errors import (
    ConfigError,
    InvariantError,
    LlmError,
    SessionLockedError,
    StoreError,
    UsageError,
)
from duraloop.llm import (
    RetryPolicy,
    ScriptedModel,
)
from duraloop.log import Event, Session
from duraloop.loop import (
    AgentLoop,
    LoopConfig,
    LoopHooks,
    RequestConfig,
    SessionSetup,
    StepContext,
    resume_session,
    start_session,
)
from duraloop.store import JsonlStore, MemoryStore
from duraloop.testing import Gates, assert_log_valid, describe_log, gated_tool
from duraloop.tools import ToolCallRequest, ToolContext, ToolHooks, ToolOutcome, ToolRegistry
from loop._support import (
    HangFirstModel,
    call,
    inbox_log,
    make_loop,
    of_type,
    result_for,
    result_text,
    tools_step,
    user_texts,
)

USER = {"kind": "user"}


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (the backend duraloop ships with)."""
    return "asyncio"


class _Turn:
    def __init__(self) -> None:
        self.result: Any = None
        self.error: BaseException | None = None


async def _run(loop: AgentLoop, prompt: str | None, out: _Turn) -> None:
    try:
        out.result = await loop.run_turn(prompt)
    except Exception as exc:
        out.error = exc


# Scheduler: reclassification and ordered middleware


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
    out = _Turn()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run, loop, "go", out)
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
        "A(c1,c2,c3)", "call(c1)", "call(c2)", "res(c1,ok)", "res(c2,ok)", "call(c3)", "res(c3,ok)",
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
    out = _Turn()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run, loop, "go", out)
        await gates.wait_entered("c1", "c2", "c3")
        for key in ("c3", "c2", "c1"):
            gates.release(key)
            await anyio.wait_all_tasks_blocked()
    assert out.result.kind == "completed"
    assert gates.passed == ["c3", "c2", "c1"]
    assert pre_seen == ["c1", "c2", "c3"]
    assert post_seen == ["c1", "c2", "c3"]
    assert [e.data["message"]["source"]["callId"] for e in of_type(session.events, "tool/result")] == [
        "c1", "c2", "c3",
    ]
    assert_log_valid(session)


# Abort


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
    out = _Turn()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run, loop, "go", out)
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
async def test_b29_keep_inbox_parks_queued_followup_for_the_next_run_turn(tmp_path: Path) -> None:
    session = Session("s")
    model = HangFirstModel()
    loop = AgentLoop(session, model=model, cwd=tmp_path)
    out = _Turn()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run, loop, "A", out)
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
async def test_b31_idle_cancel_is_a_no_op_and_the_next_turn_runs_normally(tmp_path: Path) -> None:
    session, model, loop = make_loop(tmp_path, [{"text": "fine"}], [])
    loop.cancel()
    assert list(session.events) == []
    result = await loop.run_turn("go")
    assert (result.turn, result.kind, result.text) == (1, "completed", "fine")
    assert_log_valid(session)


# dispose (F17)


@pytest.mark.anyio
async def test_dispose_aborts_the_running_turn_as_disposed_then_closes(tmp_path: Path) -> None:
    store = MemoryStore()
    model = HangFirstModel()
    loop = start_session(SessionSetup(store=store, model=model, cwd=tmp_path))
    out = _Turn()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run, loop, "go", out)
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
    resumed, repair = resume_session(loop.session.id, SessionSetup(store=store, model=ScriptedModel([])))
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


# Model requests


@pytest.mark.anyio
async def test_b37_request_hook_llm_error_is_a_turn_error_without_a_request(tmp_path: Path) -> None:
    def request(ctx: StepContext, config: RequestConfig) -> RequestConfig:
        raise LlmError("middleware failed", code="MIDDLEWARE")

    session, model, loop = make_loop(tmp_path, [{"text": "never"}], [])
    loop.hooks = LoopHooks(request=request)
    with pytest.raises(LlmError) as caught:
        await loop.run_turn("go")
    assert caught.value.code == "MIDDLEWARE"
    assert model.requests == []
    events = list(session.events)
    assert not of_type(events, "llm/retry")  # not offered to request-error recovery
    assert describe_log(events) == ["T+1", "S+1", "U", "S-1", "T-1(error)"]
    assert of_type(events, "turn/end")[0].data["reason"] == {
        "kind": "error", "error": {"message": "middleware failed", "code": "MIDDLEWARE"},
    }
    assert_log_valid(session)


@pytest.mark.parametrize(("provider", "model_name", "named"), [("", "m", "provider"), ("p", "", "model")])
@pytest.mark.anyio
async def test_b38_model_without_provider_or_model_fails_the_turn_without_a_request(
    tmp_path: Path, provider: str, model_name: str, named: str
) -> None:
    model = ScriptedModel([{"text": "never"}])
    model.provider = provider
    model.model = model_name
    session, _model, loop = make_loop(tmp_path, [], [])
    loop.model = model
    with pytest.raises(UsageError, match=f"has no {named}") as caught:
        await loop.run_turn("go")
    assert model.requests == []
    events = list(session.events)
    assert describe_log(events) == ["T+1", "S+1", "U", "S-1", "T-1(error)"]
    error = of_type(events, "turn/end")[0].data["reason"]["error"]
    assert f"has no {named}" in error["message"] and str(caught.value) in error["message"]
    assert_log_valid(session)


# Resume, fork, config


@pytest.mark.anyio
async def test_b59_resume_refuses_a_live_session_and_never_repairs_its_open_turn(
    tmp_path: Path,
) -> None:
    gates = Gates()
    store = JsonlStore(tmp_path / "sessions")
    script = ScriptedModel([tools_step(call("c1", "g")), {"text": "done"}])
    loop = start_session(SessionSetup(
        store=store, model=script, tools=[gated_tool("g", gates)], cwd=tmp_path,
    ))
    sid = loop.session.id
    out = _Turn()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run, loop, "go", out)
        await gates.wait_entered("c1")  # the turn is open and its tool/call is durable
        with pytest.raises(StoreError, match="live turn is open"):  # same process, same store
            resume_session(sid, SessionSetup(store=store, model=ScriptedModel([])))
        other = JsonlStore(tmp_path / "sessions")  # another process's store: the lock refuses
        with pytest.raises(SessionLockedError):
            resume_session(sid, SessionSetup(store=other, model=ScriptedModel([])))
        gates.release("c1")
    assert out.result.kind == "completed"
    with pytest.raises(StoreError, match="open writer"):  # idle, but the writer is still open
        resume_session(sid, SessionSetup(store=store, model=ScriptedModel([])))
    events = list(loop.session.events)
    assert len(of_type(events, "turn/end")) == 1  # no closers were written into the live turn
    assert not any(
        e.data.get("error", {}).get("code") == "TOOL_OUTCOME_UNKNOWN" for e in of_type(events, "tool/result")
    )
    loop.close()
    _header, stored = store.read(sid)
    assert [e.type for e in stored] == [e.type for e in events]
    resumed, repair = resume_session(sid, SessionSetup(store=store, model=ScriptedModel([])))
    assert repair.closers == []
    resumed.close()


@pytest.mark.anyio
async def test_b60_driver_over_a_fork_child_numbers_turns_after_the_last(tmp_path: Path) -> None:
    store = MemoryStore()
    parent = start_session(SessionSetup(
        store=store, model=ScriptedModel([{"text": "a"}, {"text": "b"}]), cwd=tmp_path,
    ))
    await parent.run_turn("one")
    await parent.run_turn("two")
    parent.followup("parent's pending follow-up")
    parent.close()
    child_id = store.fork(parent.session.id)
    model = ScriptedModel([{"text": "c"}])
    child, repair = resume_session(child_id, SessionSetup(store=store, model=model))
    assert repair.closers == [] and child.last_turn == 2
    assert not child.inbox.pending  # a fork child ignores its parent's pending inbox
    result = await child.run_turn("three")
    assert (result.turn, result.kind) == (3, "completed")
    headers = of_type(child.session.events[child.session.first_live_seq :], "request/header")
    assert [h.data["reason"] for h in headers] == ["resume"]
    assert user_texts(model.requests[0].messages) == ["one", "two", "three"]
    assert_log_valid(child.session)
    child.close()


@pytest.mark.parametrize("cap", [0, -1, 1.5, True, "2"])
def test_b61_invalid_cap_is_refused_at_construction(cap: Any) -> None:
    with pytest.raises(ConfigError, match=r"loop\.max_parallel_tool_calls must be an integer >= 1"):
        LoopConfig(max_parallel_tool_calls=cap)


def test_b61_omitted_cap_is_ten_and_a_changed_config_is_validated_again() -> None:
    config = LoopConfig()
    assert config.max_parallel_tool_calls == 10
    assert dataclasses.replace(config, max_parallel_tool_calls=1).max_parallel_tool_calls == 1
    with pytest.raises(ConfigError):
        dataclasses.replace(config, max_parallel_tool_calls=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.max_parallel_tool_calls = 3  # type: ignore[misc]


def _veto(kind: str, *, times: int = 1) -> Any:
    left = [times]

    def validator(event: Event) -> None:
        if event.type == kind and left[0] > 0:
            left[0] -= 1
            raise ValueError(f"reject first {kind}")

    return validator


@pytest.mark.anyio
async def test_b62_vetoed_turn_start_leaves_no_turn_and_keeps_the_inbox(tmp_path: Path) -> None:
    session, model, loop = make_loop(tmp_path, [{"text": "ok"}], [])
    loop.followup("queued")
    session.add_validator(_veto("turn/start"))
    with pytest.raises(ValueError, match="reject first turn/start"):
        await loop.run_turn()
    assert inbox_log(session.events) == ["ins(nt)"]
    assert loop.last_turn == 0 and [m["content"][0]["text"] for m in loop.inbox.next_turn] == ["queued"]
    assert model.requests == []
    result = await loop.run_turn()  # the number was not consumed and the follow-up still runs
    assert (result.turn, result.kind) == (1, "completed")
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b62_vetoed_step_start_ends_the_turn_error_without_a_step(tmp_path: Path) -> None:
    session, model, loop = make_loop(tmp_path, [{"text": "ok"}], [])
    session.add_validator(_veto("step/start"))
    with pytest.raises(ValueError, match="reject first step/start"):
        await loop.run_turn("go")
    events = list(session.events)
    assert describe_log(events) == ["T+1", "T-1(error)"]
    assert of_type(events, "turn/end")[0].data["reason"]["error"]["code"] == "UNKNOWN"
    assert model.requests == []
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b62_vetoed_step_end_leaves_the_turn_open_until_crash_repair(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore()
    loop = start_session(SessionSetup(store=store, model=ScriptedModel([{"text": "ok"}]), cwd=tmp_path))
    loop.session.add_validator(_veto("step/end"))
    with caplog.at_level(logging.ERROR), pytest.raises(ValueError, match="reject first step/end"):
        await loop.run_turn("go")
    # The veto replaced the outcome; the invariant checker refused turn/end over the open step.
    assert describe_log(loop.session.events)[-2:] == ["C", "A"]
    assert any("closing turn 1 failed" in record.getMessage() for record in caplog.records)
    assert "still open" in caplog.text
    # The turn stays open in memory, so this loop cannot open another one (F1 path)...
    with pytest.raises(InvariantError, match="turn/start 2 while turn 1 is still open"):
        await loop.run_turn("again")
    # ...until a resume closes the stored log with crash repair's closers.
    loop.close()
    resumed, repair = resume_session(loop.session.id, SessionSetup(
        store=store, model=ScriptedModel([{"text": "again"}]),
    ))
    assert [e.type for e in repair.closers] == ["step/end", "turn/end"]
    assert describe_log(resumed.session.events)[-3:] == ["S-1", "T-1(interrupted)", "session/end-seed"]
    assert_log_valid(resumed.session)
    result = await resumed.run_turn("next")
    assert (result.turn, result.kind) == (2, "completed")
    resumed.close()


@pytest.mark.anyio
async def test_b62_throwing_boundary_observers_change_nothing(tmp_path: Path) -> None:
    session, _model, loop = make_loop(tmp_path, [{"text": "hello"}], [])

    def explode(event: Event) -> None:
        if event.type in ("turn/start", "step/start", "step/end"):
            raise RuntimeError(f"observer exploded on {event.type}")

    session.observe(explode)
    result = await loop.run_turn("hi")
    assert result.kind == "completed"
    assert describe_log(session.events) == ["T+1", "S+1", "U", "H", "C", "A", "S-1", "T-1(completed)"]
    assert_log_valid(session)

