"""Conformance: loop-spec 8 behaviour cases B1-B5, B12-B15 (basics) and B19-B24 (abort).

Pins Laws 4 and 6 on the live driver: every tool call is answered in model order, commits
wait for earlier calls, cancellation answers unstarted calls with `ABORTED_BEFORE_DISPATCH`
pairs. Concurrency is ordered with `Gates` and `anyio.wait_all_tasks_blocked()`, never with
sleeps, and every test checks the whole log afterwards (`assert_log_valid`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from duraloop.errors import ToolError
from duraloop.llm import ModelRequest, StreamChunk, block_start, finish_chunk, text_delta
from duraloop.log import Event, Session
from duraloop.loop import AgentLoop
from duraloop.testing import Gates, assert_log_valid, describe_log, gated_tool
from duraloop.tools import Deny, Tool, ToolCallRequest, ToolHooks, ToolOutcome, tool
from loop._support import (
    call,
    call_seq,
    make_loop,
    of_type,
    recorder_tool,
    result_for,
    result_text,
    tool_results_in,
    tools_step,
)

ABD = "ABORTED_BEFORE_DISPATCH"


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (the backend duraloop ships with)."""
    return "asyncio"


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


@tool
def strict(count: int) -> str:
    """Take a count."""
    return f"count {count}"


@tool
async def fail(code: str) -> str:
    """Fail with a code."""
    raise ToolError("exploded", code=code)


class _Turn:
    def __init__(self) -> None:
        self.result: Any = None
        self.error: BaseException | None = None


async def _run(loop: AgentLoop, prompt: str, out: _Turn) -> None:
    try:
        out.result = await loop.run_turn(prompt)
    except Exception as exc:
        out.error = exc


# Basics


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
        "T+1", "S+1", "U", "H", "C", "A(c1)", "call(c1)", "res(c1,ok)", "S-1",
        "S+2", "A", "S-2", "T-1(completed)",
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
    out = _Turn()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run, loop, "go", out)
        await gates.wait_entered("c1", "c2", "c3")
        assert gates.entered == ["c1", "c2", "c3"]
        assert gates.passed == []
        gates.release("c3", "c2", "c1")
    assert out.result.kind == "completed"
    assert describe_log(session.events)[5:] == [
        "A(c1,c2,c3)", "call(c1)", "call(c2)", "call(c3)",
        "res(c1,ok)", "res(c2,ok)", "res(c3,ok)", "S-1", "S+2", "A", "S-2", "T-1(completed)",
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
        "r-start-A1", "r-end-A1", "w-start-A2", "w-end-A2", "r-start-A3", "r-end-A3",
    ]
    assert describe_log(session.events)[6:12] == [
        "call(A1)", "res(A1,ok)", "call(A2)", "res(A2,ok)", "call(A3)", "res(A3,ok)",
    ]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b5_results_commit_in_model_order(tmp_path: Path) -> None:
    gates = Gates()
    session, _model, loop = make_loop(
        tmp_path, [tools_step(call("c1"), call("c2")), {"text": "done"}], [gated_tool("p", gates)]
    )
    out = _Turn()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run, loop, "go", out)
        await gates.wait_entered("c1", "c2")
        gates.release("c2")
        await anyio.wait_all_tasks_blocked()
        assert gates.passed == ["c2"]
        assert of_type(session.events, "tool/result") == []
        gates.release("c1")
    results = [e.data["message"]["source"]["callId"] for e in of_type(session.events, "tool/result")]
    assert results == ["c1", "c2"]
    assert [cid for cid, _, _ in tool_results_in(session.derive_messages())] == ["c1", "c2"]
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
    assert [s for s in shape if s.startswith("res(")] == ["res(c1,ok)", "res(c2,err)", "res(c3,err)"]
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
    assert result_for(events, "c1").data["error"] == {"name": "ToolArgsError", "code": "INVALID_ARGS"}
    assert seen == ["not json", {}]
    assert_log_valid(session)


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


# Abort


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
    assert describe_log(events)[5:] == ["A(c1)", "call(c1)", f"res(c1,{ABD})", "S-1", "T-1(aborted)"]
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
        "A(c1,c2)", "call(c1)", f"res(c1,{ABD})", "call(c2)", f"res(c2,{ABD})",
        "S-1", "T-1(aborted)",
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
    out = _Turn()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run, loop, "go", out)
        await gates.wait_entered("c1", "c2")
        loop.cancel()
        gates.release("c1", "c2")
    assert out.result.kind == "aborted"
    assert gates.entered == ["c1", "c2"]
    assert describe_log(session.events)[5:] == [
        "A(c1,c2,c3,c4)", "call(c1)", "call(c2)", "res(c1,ABORTED)", "res(c2,ABORTED)",
        "call(c3)", f"res(c3,{ABD})", "call(c4)", f"res(c4,{ABD})", "S-1", "T-1(aborted)",
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
    out = _Turn()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run, loop, "go", out)
        await gates.wait_entered("c1", "c2")
        loop.cancel()
        gates.release("c1", "c2")
    assert out.result.kind == "aborted"
    assert record == []
    assert describe_log(session.events)[-5:] == [
        "res(c2,ABORTED)", "call(c3)", f"res(c3,{ABD})", "S-1", "T-1(aborted)",
    ]
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
    out = _Turn()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run, loop, "go", out)
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
    texts = [
        block.get("text") for m in model.requests[1].messages for block in m["content"]
    ]
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
