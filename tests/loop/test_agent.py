"""The AgentLoop driver: durability boundaries (Law 5) and the max_steps cap.

A recording durability object stands in for a store writer: each `flush()` records
`session.seq`, so a test can prove every tool body started only after a flush that covered
its `tool/call`, and count flushes per step. Each test also checks the whole log.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from duraloop.log import Session
from duraloop.testing import assert_log_valid, describe_log
from duraloop.tools import Tool, ToolContext

from ._support import call, make_loop, of_type, tools_step


class RecordingDurability:
    """Records the log length at every flush: events below it are durable."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.flushed_through: list[int] = []

    def flush(self) -> None:
        self.flushed_through.append(self.session.seq)

    def close(self) -> None:
        self.flush()


def _law5_tool(
    name: str,
    durability: RecordingDurability,
    starts: list[tuple[str, int, int]],
    *,
    parallel: bool,
) -> Tool:
    """A tool whose body records `(call id, its tool/call seq, durable length)` at start."""

    async def body(args: Any, ctx: ToolContext) -> str:
        events = durability.session.events
        seq = next(
            e.seq for e in events if e.type == "tool/call" and e.data["callId"] == ctx.call_id
        )
        durable = durability.flushed_through[-1] if durability.flushed_through else 0
        starts.append((ctx.call_id, seq, durable))
        return "ok"

    return Tool(
        name=name,
        description="Record durability at body start.",
        parameters={"type": "object", "properties": {}},
        validator=lambda arguments: arguments,
        body=body,
        parallel=parallel,
    )


@pytest.mark.anyio
async def test_every_body_starts_after_a_flush_covering_its_tool_call(tmp_path: Path) -> None:
    session = Session("s")
    durability = RecordingDurability(session)
    script = [
        tools_step(call("c1"), call("c2"), call("c3"), call("c4", "x")),
        tools_step(call("c5", "x")),
        {"text": "done"},
    ]
    starts: list[tuple[str, int, int]] = []
    tools = [
        _law5_tool("p", durability, starts, parallel=True),
        _law5_tool("x", durability, starts, parallel=False),
    ]
    session, _model, loop = make_loop(
        tmp_path, script, tools, cap=2, durability=durability, session=session
    )
    result = await loop.run_turn("go")
    assert result.kind == "completed"
    assert sorted(call_id for call_id, _, _ in starts) == ["c1", "c2", "c3", "c4", "c5"]
    for call_id, seq, durable in starts:
        assert seq < durable, f"{call_id}: tool/call seq {seq} not durable (flushed < {durable})"
    assert_log_valid(session)


@pytest.mark.anyio
async def test_a_tool_step_within_the_cap_flushes_twice(tmp_path: Path) -> None:
    session = Session("s")
    durability = RecordingDurability(session)
    tools = [_law5_tool("p", durability, [], parallel=True)]
    session, _model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1"), call("c2"), call("c3")), {"text": "done"}],
        tools,
        durability=durability,
        session=session,
    )
    await loop.run_turn("go")
    events = session.events
    starts = {e.data["step"]: e.seq for e in of_type(events, "step/start")}
    ends = {e.data["step"]: e.seq for e in of_type(events, "step/end")}

    def flushes_in(step: int) -> int:
        return sum(starts[step] < at <= ends[step] for at in durability.flushed_through)

    assert flushes_in(1) == 2, "one before the request, one before the first body"
    assert flushes_in(2) == 1, "a text step flushes only before its request"
    turn_end = of_type(events, "turn/end")[0].seq
    assert durability.flushed_through[-1] == turn_end + 1, "turn/end is flushed"
    assert_log_valid(session)


@pytest.mark.anyio
async def test_max_steps_ends_turn_blocked_between_steps(tmp_path: Path) -> None:
    session = Session("s")
    durability = RecordingDurability(session)
    script = [tools_step(call(f"c{i}")) for i in range(1, 4)]
    session, model, loop = make_loop(
        tmp_path,
        script,
        [_law5_tool("p", durability, [], parallel=True)],
        max_steps=2,
        session=session,
    )
    result = await loop.run_turn("go")
    assert result.kind == "blocked" and result.steps == 2
    assert "max_steps=2" in result.reason["message"]
    assert len(model.requests) == 2
    assert describe_log(session.events)[-6:] == [
        "S+2",
        "A(c2)",
        "call(c2)",
        "res(c2,ok)",
        "S-2",
        "T-1(blocked)",
    ]
    assert of_type(session.events, "turn/end")[0].data["reason"] == result.reason
    assert_log_valid(session)


@pytest.mark.anyio
async def test_every_flush_runs_on_the_event_loop_thread(tmp_path: Path) -> None:
    # Issue 11: the flush before a body is made on the event loop (no worker-thread round
    # trip per call); calls started together still share it.
    session = Session("s")
    threads: list[int] = []

    class ThreadRecording(RecordingDurability):
        def flush(self) -> None:
            threads.append(threading.get_ident())
            super().flush()

    durability = ThreadRecording(session)
    tools = [_law5_tool("p", durability, [], parallel=True)]
    session, _model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1"), call("c2"), call("c3")), {"text": "done"}],
        tools,
        durability=durability,
        session=session,
    )
    await loop.run_turn("go")
    assert threads and set(threads) == {threading.get_ident()}
    calls = [e.seq for e in of_type(session.events, "tool/call")]
    assert not [at for at in durability.flushed_through if calls[0] < at <= calls[-1]]
    assert any(at > calls[-1] for at in durability.flushed_through)
