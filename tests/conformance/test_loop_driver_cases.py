"""Conformance: the background driver (loop-spec 2.1, 10.1): send, wake, latch, drain.

Inside `async with loop:` a waking send from idle opens the turn before it returns, the
driver drains queued follow-ups, a waking send during an abort is latched (B30), and a
cancel right after a waking send closes the already-open turn (B28). Ordering rests on
`anyio.wait_all_tasks_blocked()` and the log, never on sleeps; every test checks the whole
log afterwards.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from duraloop.errors import UsageError
from duraloop.log import Session
from duraloop.loop import AgentLoop, LoopHooks, StepContext
from duraloop.testing import assert_log_valid
from loop._support import HangFirstModel, inbox_log, make_loop, user_texts

USER = {"kind": "user"}


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (the backend duraloop ships with)."""
    return "asyncio"


def _kinds(results: list[Any]) -> list[tuple[int, str]]:
    return [(r.turn, r.kind) for r in results]


@pytest.mark.anyio
async def test_waking_send_from_idle_appends_turn_start_and_claims_before_it_returns(
    tmp_path: Path,
) -> None:
    session, model, loop = make_loop(tmp_path, [{"text": "hi"}], [])
    async with loop:
        loop.followup("hello")
        # loop-spec 10.1: synchronous start, before any await.
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
async def test_the_driver_drains_followups_one_turn_each(tmp_path: Path) -> None:
    session, model, loop = make_loop(tmp_path, [{"text": "one"}, {"text": "two"}, {"text": "three"}], [])
    async with loop:
        loop.followup("a")
        loop.followup("b")
        loop.followup("c")
        results = await loop.wait_idle()
    assert _kinds(results) == [(1, "completed"), (2, "completed"), (3, "completed")]
    assert [user_texts(r.messages)[-1] for r in model.requests] == ["a", "b", "c"]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b28_cancel_right_after_a_waking_send(tmp_path: Path) -> None:
    session, model, loop = make_loop(tmp_path, [{"text": "never"}], [])
    async with loop:
        loop.followup("A")
        loop.followup("B")
        loop.cancel()
        (result,) = await loop.wait_idle()
    assert result.reason == {"kind": "aborted", "reason": USER}
    # T+1 and the claim of A happened synchronously; B got a cancel splice; no step ran.
    assert inbox_log(session.events) == ["ins(nt)", "T+1", "claim", "ins(nt)", "discard", "T-1(aborted)"]
    assert model.requests == []
    assert loop.inbox.pending == 0
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
    assert [r.reason for r in results] == [{"kind": "aborted", "reason": USER}, {"kind": "completed"}]
    assert len(model.requests) == 2
    assert user_texts(model.requests[1].messages)[-1] == "B"
    assert_log_valid(session)


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
async def test_a_failed_background_turn_reports_its_error_and_stops_draining(tmp_path: Path) -> None:
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


@pytest.mark.anyio
async def test_b39c_turn_stopping_steer_after_max_tokens_runs_a_step_and_the_turn_stays_max_tokens(
    tmp_path: Path,
) -> None:
    steered: list[int] = []

    def turn_stopping(ctx: StepContext) -> None:
        if not steered:
            steered.append(ctx.step)
            ctx.loop.steer("please continue")

    script = [{"text": "cut sho", "finish": "max-tokens"}, {"text": "rest of it"}]
    session, model, loop = make_loop(tmp_path, script, [])
    loop.hooks = LoopHooks(turn_stopping=turn_stopping)
    result = await loop.run_turn("go")
    assert (result.reason, result.steps, result.text) == ({"kind": "max-tokens"}, 2, "rest of it")
    assert steered == [1]
    assert user_texts(model.requests[1].messages)[-1] == "please continue"
    assert_log_valid(session)


@pytest.mark.anyio
async def test_an_exception_in_the_body_of_async_with_loop_propagates_unwrapped(tmp_path: Path) -> None:
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
async def test_cancelling_the_scope_around_async_with_loop_aborts_the_turn_durably(tmp_path: Path) -> None:
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
