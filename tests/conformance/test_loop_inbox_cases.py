"""Conformance: docs/cases.md#loop-behaviour-cases behaviour cases B40-B47 (pre-step and inbox), and
the driver's sends.

Pins the inbox's durability (a splice is logged before the lists change, claims are pure
deletions right after `turn/start` or between steps) and the turn algorithm's use of it
(docs/loop.md#turns, #pre-step): steering enters at the next step boundary, `turn_stopping`
continues a turn only through the inbox, and a rejecting or failing `pre_step` ends the turn without
a step. With the background driver (docs/loop.md#send-and-cancel), inside `async with loop:` a
waking send from idle opens the turn before it returns and the driver drains queued follow-ups, one
turn each. Ordering rests on `anyio.wait_all_tasks_blocked()` and the log, never on sleeps; every
test checks the whole log (`inbox_log`, `assert_log_valid`) and what the model was sent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from duraloop.errors import UsageError
from duraloop.log import Message, Session, text_of
from duraloop.loop import AgentLoop, LoopHooks, Reject, StepContext
from duraloop.testing import assert_log_valid
from duraloop.tools import Tool, ToolContext
from loop._support import (
    HangFirstModel,
    call,
    inbox_log,
    make_loop,
    of_type,
    tools_step,
    user_texts,
)


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (the backend duraloop ships with)."""
    return "asyncio"


def _texts(messages: tuple[Message, ...] | list[Message]) -> list[str]:
    return [text_of(message) for message in messages]


@pytest.mark.anyio
async def test_b40_rejected_pre_step_ends_turn_blocked_and_keeps_later_followups(
    tmp_path: Path,
) -> None:
    def pre_step(ctx: StepContext) -> Reject | None:
        return Reject("no secrets") if "secret" in _texts(ctx.messages) else None

    session, model, loop = make_loop(tmp_path, [{"text": "ok"}], [])
    loop.hooks = LoopHooks(pre_step=pre_step)
    loop.followup("secret")
    loop.followup("safe")
    results = await loop.run_pending()
    assert [(r.turn, r.kind, r.steps) for r in results] == [(1, "blocked", 0)]
    assert results[0].reason == {"kind": "blocked", "message": "no secrets"}
    assert inbox_log(session.events) == ["ins(nt)", "ins(nt)", "T+1", "claim", "T-1(blocked)"]
    assert model.requests == []
    assert _texts(loop.inbox.next_turn) == ["safe"]
    later = await loop.run_pending()
    assert [(r.turn, r.kind) for r in later] == [(2, "completed")]
    assert user_texts(model.requests[0].messages) == ["safe"]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b41_empty_first_step_entry_completes_turn_without_step(tmp_path: Path) -> None:
    session, model, loop = make_loop(tmp_path, [], [])
    loop.hooks = LoopHooks(pre_step=lambda ctx: [])
    loop.followup("hello")
    result = await loop.run_turn()
    assert (result.kind, result.steps) == ("completed", 0)
    assert inbox_log(session.events) == ["ins(nt)", "T+1", "claim", "T-1(completed)"]
    assert model.requests == [] and not loop.inbox.pending
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b42_throwing_pre_step_fails_turn_and_keeps_queued_followup(tmp_path: Path) -> None:
    def pre_step(ctx: StepContext) -> None:
        raise RuntimeError("prompt hook broke")

    session, model, loop = make_loop(tmp_path, [], [])
    loop.hooks = LoopHooks(pre_step=pre_step)
    loop.followup("first")
    loop.followup("second")
    with pytest.raises(RuntimeError, match="prompt hook broke"):
        await loop.run_pending()
    assert inbox_log(session.events) == ["ins(nt)", "ins(nt)", "T+1", "claim", "T-1(error)"]
    reason = of_type(session.events, "turn/end")[0].data["reason"]
    assert (
        reason["error"]["code"] == "UNKNOWN" and "prompt hook broke" in reason["error"]["message"]
    )
    assert _texts(loop.inbox.next_turn) == ["second"]
    assert model.requests == []
    assert_log_valid(session)


def _kinds(results: list[Any]) -> list[tuple[int, str]]:
    return [(r.turn, r.kind) for r in results]


@pytest.mark.anyio
async def test_a_failed_background_turn_reports_its_error_and_stops_draining(
    tmp_path: Path,
) -> None:
    script: list[dict[str, Any]] = [
        {"error": {"code": "AUTH", "message": "bad key"}},
        {"text": "two"},
        {"text": "three"},
    ]
    session, _model, loop = make_loop(tmp_path, script, [])
    async with loop:
        loop.followup("first")
        loop.followup("second")
        (result,) = await loop.wait_idle()
        assert result.kind == "error"
        assert result.error is not None and "bad key" in str(result.error)
        # B42: no auto-drain after an error turn; the next waking send runs "second".
        assert [m["content"][0]["text"] for m in loop.inbox.next_turn] == ["second"]
        loop.followup("third")
        results = await loop.wait_idle()
    assert _kinds(results) == [(2, "completed"), (3, "completed")]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b43_input_staged_during_pre_step_joins_step_two(tmp_path: Path) -> None:
    stopping: list[int] = []

    async def pre_step(ctx: StepContext) -> None:
        if ctx.step == 1:
            await anyio.lowlevel.checkpoint()
            ctx.loop.inject("C")
            ctx.loop.steer("S")

    def turn_stopping(ctx: StepContext) -> None:
        stopping.append(ctx.step)

    session, model, loop = make_loop(tmp_path, [{"text": "one"}, {"text": "two"}], [])
    loop.hooks = LoopHooks(pre_step=pre_step, turn_stopping=turn_stopping)
    result = await loop.run_turn("P")
    assert (result.kind, result.steps) == ("completed", 2)
    assert inbox_log(session.events) == [
        "T+1",
        "ins(ns)",
        "ins(ns)",
        "S+1",
        "U",
        "H",
        "C",
        "A",
        "S-1",
        "claim",
        "S+2",
        "U",
        "U",
        "A",
        "S-2",
        "T-1(completed)",
    ]
    assert user_texts(model.requests[0].messages) == ["P"]
    assert user_texts(model.requests[1].messages) == ["P", "C", "S"]
    assert stopping == [2]  # skipped after step 1: next-step was not empty
    assert_log_valid(session)


def _steering_tool(holder: list[AgentLoop], text: str) -> Tool:
    """A tool whose body steers the loop running it (B44)."""

    async def body(args: Any, ctx: ToolContext) -> str:
        holder[0].steer(text)
        return "steered"

    return Tool(
        name="steerer",
        description="Steer the loop.",
        parameters={"type": "object", "properties": {}},
        validator=lambda arguments: arguments,
        body=body,
    )


@pytest.mark.anyio
async def test_b44_steering_from_a_tool_enters_after_next_step_start(tmp_path: Path) -> None:
    holder: list[AgentLoop] = []
    session, model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1", "steerer")), {"text": "new plan"}],
        [_steering_tool(holder, "change of plans")],
    )
    holder.append(loop)
    result = await loop.run_turn("go")
    assert (result.kind, result.steps, result.text) == ("completed", 2, "new plan")
    assert inbox_log(session.events) == [
        "T+1",
        "S+1",
        "U",
        "H",
        "C",
        "A(c1)",
        "call(c1)",
        "ins(ns)",
        "res(c1,ok)",
        "S-1",
        "claim",
        "S+2",
        "U",
        "A",
        "S-2",
        "T-1(completed)",
    ]
    assert user_texts(model.requests[1].messages) == ["go", "change of plans"]
    assert model.requests[1].messages[-1]["content"][0]["text"] == "change of plans"
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b45_turn_stopping_steer_continues_for_exactly_three_steps(tmp_path: Path) -> None:
    def turn_stopping(ctx: StepContext) -> None:
        if ctx.step < 3:
            ctx.loop.steer(f"continue after {ctx.step}")

    script = [{"text": "a"}, {"text": "b"}, {"text": "c"}, {"text": "unused"}]
    session, model, loop = make_loop(tmp_path, script, [])
    loop.hooks = LoopHooks(turn_stopping=turn_stopping)
    result = await loop.run_turn("loop")
    assert (result.turn, result.kind, result.steps, result.text) == (1, "completed", 3, "c")
    assert len(model.requests) == 3
    assert len(of_type(session.events, "turn/start")) == 1
    assert user_texts(model.requests[2].messages) == [
        "loop",
        "continue after 1",
        "continue after 2",
    ]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b46_idle_inject_only_records_the_splice(tmp_path: Path) -> None:
    session, model, loop = make_loop(tmp_path, [{"text": "ok"}], [])
    loop.inject("context")
    assert inbox_log(session.events) == ["ins(ns)"]
    assert loop.last_turn == 0 and _texts(loop.inbox.next_step) == ["context"]
    loop.followup("hi")
    result = await loop.run_turn()
    assert result.kind == "completed"
    assert user_texts(model.requests[0].messages) == ["context", "hi"]
    assert inbox_log(session.events)[:5] == ["ins(ns)", "ins(nt)", "T+1", "claim", "claim"]
    assert not loop.inbox.pending
    assert_log_valid(session)


@pytest.mark.anyio
async def test_inject_while_idle_does_not_wake_the_driver(tmp_path: Path) -> None:
    session, model, loop = make_loop(tmp_path, [{"text": "ok"}], [])
    async with loop:
        loop.inject("context only")
        assert await loop.wait_idle() == []
        assert inbox_log(session.events) == ["ins(ns)"]
        loop.followup("now go")
        (result,) = await loop.wait_idle()
    assert result.kind == "completed"
    assert user_texts(model.requests[0].messages) == ["context only", "now go"]
    assert_log_valid(session)


@pytest.mark.anyio
@pytest.mark.parametrize("count", range(1, 7))
async def test_b47_each_followup_runs_its_own_numbered_turn(tmp_path: Path, count: int) -> None:
    session, model, loop = make_loop(tmp_path, [{"text": f"answer {i}"} for i in range(count)], [])
    for i in range(count):
        loop.followup(f"prompt {i}")
    results = await loop.run_pending()
    assert [(r.turn, r.kind) for r in results] == [(i + 1, "completed") for i in range(count)]
    starts = [e.seq for e in of_type(session.events, "turn/start")] + [session.seq]
    for i in range(count):
        in_turn = session.events[starts[i] : starts[i + 1]]
        assert [text_of(e.data) for e in of_type(in_turn, "user/message")] == [f"prompt {i}"]
    assert not loop.inbox.pending
    assert_log_valid(session)


@pytest.mark.anyio
async def test_waking_send_from_idle_appends_turn_start_and_claims_before_it_returns(
    tmp_path: Path,
) -> None:
    session, model, loop = make_loop(tmp_path, [{"text": "hi"}], [])
    async with loop:
        loop.followup("hello")
        # docs/loop.md#send-and-cancel: synchronous start, before any await.
        assert inbox_log(session.events) == ["ins(nt)", "T+1", "claim"]
        assert loop.inbox.pending == 0
        (result,) = await loop.wait_idle()
    assert (result.turn, result.kind, result.text) == (1, "completed", "hi")
    assert user_texts(model.requests[0].messages) == ["hello"]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_idle_steering_starts_a_turn_synchronously(tmp_path: Path) -> None:
    session, _model, loop = make_loop(tmp_path, [{"text": "ok"}], [])
    async with loop:
        loop.steer("look here")
        assert inbox_log(session.events) == ["ins(ns)", "T+1", "claim"]
        (result,) = await loop.wait_idle()
    assert result.kind == "completed"
    assert_log_valid(session)


@pytest.mark.anyio
async def test_the_driver_drains_followups_one_turn_each(tmp_path: Path) -> None:
    session, model, loop = make_loop(
        tmp_path, [{"text": "one"}, {"text": "two"}, {"text": "three"}], []
    )
    async with loop:
        loop.followup("a")
        loop.followup("b")
        loop.followup("c")
        results = await loop.wait_idle()
    assert _kinds(results) == [(1, "completed"), (2, "completed"), (3, "completed")]
    assert [user_texts(r.messages)[-1] for r in model.requests] == ["a", "b", "c"]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_run_turn_is_refused_while_a_background_turn_runs(tmp_path: Path) -> None:
    session = Session("s")
    loop = AgentLoop(session, model=HangFirstModel(), cwd=tmp_path)
    async with loop:
        loop.followup("A")
        with pytest.raises(UsageError, match="already running"):
            await loop.run_turn("B")
        loop.cancel()
        assert _kinds(await loop.wait_idle()) == [(1, "aborted")]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_send_rejects_an_unknown_target(tmp_path: Path) -> None:
    _session, _model, loop = make_loop(tmp_path, [], [])
    with pytest.raises(UsageError, match="unknown send target"):
        loop.send("x", target="later")  # type: ignore[arg-type]
    assert loop.inbox.pending == 0
