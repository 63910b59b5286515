"""Sends and the background driver around a paused turn (docs/approvals.md#pausing).

A turn the background driver runs pauses like an awaited one. While it waits for an
undecided approval a waking send only queues (durably): it neither raises nor opens a turn,
and it runs after the paused turn is continued. Once decided, a waking send continues it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from duraloop.llm import ScriptedModel
from duraloop.loop import SessionSetup, resume_session, start_session
from duraloop.store import JsonlStore

from ._approval_support import assert_approval_log_valid, counting_tool, types
from ._support import call, make_loop, of_type, tools_step, user_texts

pytestmark = pytest.mark.anyio

DONE = {"text": "done"}


def _tools(runs: list[str]) -> list[Any]:
    return [counting_tool("danger", runs, requires_approval=True)]


async def test_a_background_turn_pauses_and_wait_idle_reports_it(tmp_path: Path) -> None:
    session, _, loop = make_loop(tmp_path, [tools_step(call("d", "danger")), DONE], _tools([]))
    async with loop:
        loop.followup("go")
        (result,) = await loop.wait_idle()
        assert result.kind == "paused"
        assert loop.paused is not None and loop.paused.call_id == "d"
        await loop.decide("d", allow=True)
        assert (await loop.continue_turn()).kind == "completed"
    assert_approval_log_valid(session)


async def test_a_waking_send_while_paused_queues_without_raising(tmp_path: Path) -> None:
    runs: list[str] = []
    store = JsonlStore(tmp_path / "sessions")
    model = ScriptedModel([tools_step(call("d", "danger")), DONE, DONE, DONE])
    setup = SessionSetup(store=store, model=model, tools=_tools(runs), cwd=tmp_path)
    loop = start_session(setup)
    async with loop:
        loop.followup("go")
        assert [r.kind for r in await loop.wait_idle()] == ["paused"]
        before = len(of_type(loop.session.events, "turn/start"))
        loop.followup("while paused")  # queued, not run: the turn waits for its decision
        assert await loop.wait_idle() == []
        assert len(of_type(loop.session.events, "turn/start")) == before
        assert loop.inbox.pending
        _, stored = store.read(loop.session.id)
        assert types(stored)[-1] == "agent/inbox/spliced"  # durable at once
        await loop.decide("d", allow=True)
        loop.followup("after the decision")  # a waking send now continues the turn
        results = await loop.wait_idle()
    assert [(r.turn, r.kind) for r in results] == [
        (1, "completed"),
        (2, "completed"),
        (3, "completed"),
    ]
    assert runs == ["danger:d"]
    # The paused turn went on first; then each follow-up ran as its own turn, in order.
    assert user_texts(model.requests[1].messages) == ["go"]
    assert user_texts(model.requests[2].messages)[-1] == "while paused"
    assert user_texts(model.requests[3].messages)[-1] == "after the decision"
    assert_approval_log_valid(loop.session)


async def test_a_send_queued_while_paused_survives_a_resume(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    script = [tools_step(call("d", "danger"))]
    setup = SessionSetup(store=store, model=ScriptedModel(script), tools=_tools([]), cwd=tmp_path)
    loop = start_session(setup)
    async with loop:
        loop.followup("go")
        await loop.wait_idle()
        loop.followup("later")
    resumed, repair = resume_session(
        loop.session.id,
        SessionSetup(store=store, model=ScriptedModel([DONE, DONE]), tools=_tools([])),
    )
    with resumed:
        assert not repair.repaired
        assert resumed.paused is not None
        assert [m["content"][0]["text"] for m in resumed.inbox.next_turn] == ["later"]
        await resumed.decide("d", allow=False)
        assert (await resumed.continue_turn()).kind == "completed"
        assert (await resumed.run_turn()).kind == "completed"  # the queued follow-up
        assert_approval_log_valid(resumed.session)


async def test_steering_sent_while_paused_enters_after_the_paused_step(tmp_path: Path) -> None:
    session, model, loop = make_loop(tmp_path, [tools_step(call("d", "danger")), DONE], _tools([]))
    assert (await loop.run_turn("go")).kind == "paused"
    loop.steer("and be quick")
    await loop.decide("d", allow=True)
    result = await loop.continue_turn()
    assert (result.kind, result.steps) == ("completed", 2)
    assert user_texts(model.requests[1].messages) == ["go", "and be quick"]
    assert_approval_log_valid(session)
