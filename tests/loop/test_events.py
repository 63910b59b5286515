"""`AgentLoop.events()`: a live feed of committed session events (style rule D18)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from duraloop.log import Event

from ._support import make_loop


@pytest.mark.anyio
async def test_events_of_a_running_turn_arrive_in_commit_order(tmp_path: Path) -> None:
    session, _model, loop = make_loop(tmp_path, [{"text": "hello there"}], [])
    before = len(session.events)
    received: list[Event] = []
    async with loop.events() as events, anyio.create_task_group() as group:
        group.start_soon(loop.run_turn, "go")
        async for event in events:
            received.append(event)
            if event.type == "turn/end":
                break
    types = [event.type for event in received]
    assert types == [event.type for event in session.events[before:]]
    assert [t for t in types if t != "assistant/chunk"] == [
        "turn/start",
        "step/start",
        "user/message",
        "request/header",
        "request/context",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    assert "assistant/chunk" in types
    assert [event.seq for event in received] == list(range(before, session.seq))


@pytest.mark.anyio
async def test_breaking_early_removes_the_observer_and_the_loop_still_works(tmp_path: Path) -> None:
    session, _model, loop = make_loop(tmp_path, [{"text": "one"}, {"text": "two"}], [])
    observers = len(session._observers)
    async with loop.events() as events, anyio.create_task_group() as group:
        assert len(session._observers) == observers + 1
        group.start_soon(loop.run_turn, "go")
        async for event in events:
            assert event.type == "turn/start"
            break
    assert len(session._observers) == observers
    result = await loop.run_turn("again")
    assert (result.kind, result.text) == ("completed", "two")
    assert len(session._observers) == observers


@pytest.mark.anyio
async def test_the_feed_is_closed_when_the_context_exits(tmp_path: Path) -> None:
    session, _model, loop = make_loop(tmp_path, [{"text": "one"}], [])
    observers = len(session._observers)
    async with loop.events() as events:
        await loop.run_turn("go")
    assert len(session._observers) == observers
    with pytest.raises(anyio.ClosedResourceError):  # unread events are dropped with it
        await anext(aiter(events))
