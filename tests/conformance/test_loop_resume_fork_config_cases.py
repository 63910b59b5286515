"""Conformance: docs/cases.md#loop-behaviour-cases behaviour cases B57-B62 (resume, fork and
config).

Resume continues a stored session: the log plus `session/end-seed`, turn numbering going on
with a `resume` request header, pending messages surviving without starting a turn. A live
session cannot be resumed under its writer (Law 8); a fork child numbers its turns after its
seed's last turn; the configuration is validated when it is built (D23); and the step
boundaries survive vetoes and raising observers (F1, F5, F15). Every test checks the whole log
afterwards.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from duraloop.errors import ConfigError, InvariantError, SessionLockedError, StoreError
from duraloop.llm import ScriptedModel
from duraloop.log import Event, Message, text_of
from duraloop.loop import LoopConfig, SessionSetup, resume_session, start_session
from duraloop.store import JsonlStore, MemoryStore
from duraloop.testing import Gates, assert_log_valid, describe_log, gated_tool
from loop._support import (
    TurnOutcome,
    call,
    inbox_log,
    make_loop,
    of_type,
    run_into,
    tools_step,
    user_texts,
)


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (the backend duraloop ships with)."""
    return "asyncio"


@pytest.mark.anyio
async def test_b57_resume_continues_turn_numbering_with_a_resume_header(tmp_path: Path) -> None:
    store = MemoryStore()
    first = start_session(
        SessionSetup(store=store, model=ScriptedModel([{"text": "a"}]), cwd=tmp_path)
    )
    await first.run_turn("one")
    old_events = list(first.session.events)
    old_messages = first.session.derive_messages()
    first.close()
    loop, _repair = resume_session(
        first.session.id,
        SessionSetup(
            store=store,
            model=ScriptedModel([{"text": "b"}]),
        ),
    )
    events = loop.session.events
    assert [e.type for e in events] == [e.type for e in old_events] + ["session/end-seed"]
    assert loop.session.derive_messages() == old_messages
    result = await loop.run_turn("two")
    assert result.turn == 2
    assert [e.seq for e in loop.session.events] == list(range(loop.session.seq))
    headers = of_type(loop.session.events, "request/header")
    assert [h.data["reason"] for h in headers] == ["initial", "resume"]
    assert_log_valid(loop.session)
    loop.close()


def _texts(messages: tuple[Message, ...] | list[Message]) -> list[str]:
    return [text_of(message) for message in messages]


@pytest.mark.anyio
async def test_b58_pending_injection_survives_resume_and_enters_after_followup(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    first = start_session(SessionSetup(store=store, model=ScriptedModel([]), cwd=tmp_path))
    first.inject("remember this")
    first.close()
    model = ScriptedModel([{"text": "noted"}])
    loop, _repair = resume_session(first.session.id, SessionSetup(store=store, model=model))
    assert [e.type for e in loop.session.events] == ["agent/inbox/spliced", "session/end-seed"]
    assert _texts(loop.inbox.next_step) == ["remember this"] and loop.last_turn == 0
    loop.followup("go")
    result = await loop.run_turn()
    assert (result.turn, result.kind) == (1, "completed")
    assert user_texts(model.requests[0].messages) == ["remember this", "go"]
    assert not loop.inbox.pending
    assert_log_valid(loop.session)
    loop.close()


@pytest.mark.anyio
async def test_b59_resume_refuses_a_live_session_and_never_repairs_its_open_turn(
    tmp_path: Path,
) -> None:
    gates = Gates()
    store = JsonlStore(tmp_path / "sessions")
    script = ScriptedModel([tools_step(call("c1", "g")), {"text": "done"}])
    loop = start_session(
        SessionSetup(
            store=store,
            model=script,
            tools=[gated_tool("g", gates)],
            cwd=tmp_path,
        )
    )
    sid = loop.session.id
    out = TurnOutcome()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_into, loop, "go", out)
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
        e.data.get("error", {}).get("code") == "TOOL_OUTCOME_UNKNOWN"
        for e in of_type(events, "tool/result")
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
    parent = start_session(
        SessionSetup(
            store=store,
            model=ScriptedModel([{"text": "a"}, {"text": "b"}]),
            cwd=tmp_path,
        )
    )
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
    assert loop.last_turn == 0 and [m["content"][0]["text"] for m in loop.inbox.next_turn] == [
        "queued"
    ]
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
    loop = start_session(
        SessionSetup(store=store, model=ScriptedModel([{"text": "ok"}]), cwd=tmp_path)
    )
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
    resumed, repair = resume_session(
        loop.session.id,
        SessionSetup(
            store=store,
            model=ScriptedModel([{"text": "again"}]),
        ),
    )
    assert [e.type for e in repair.closers] == ["step/end", "turn/end"]
    assert describe_log(resumed.session.events)[-3:] == [
        "S-1",
        "T-1(interrupted)",
        "session/end-seed",
    ]
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
    assert describe_log(session.events) == [
        "T+1",
        "S+1",
        "U",
        "H",
        "C",
        "A",
        "S-1",
        "T-1(completed)",
    ]
    assert_log_valid(session)
