"""The span tree of a turn (docs/telemetry.md#spans), read back from the SDK's in-memory exporter.

Each test drives a real AgentLoop over a scripted model with `instrument(loop, tracer_provider=
...)`, then asserts the finished spans: names, kinds, parents, the GenAI attributes, the retry
span events and the status of failed and cancelled turns. No times are asserted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from duraloop.errors import LlmError
from duraloop.llm import RetryPolicy
from duraloop.log import Event
from duraloop.loop import LoopConfig
from duraloop.telemetry import instrument
from duraloop.testing import Gates, gated_tool
from loop._support import call, make_loop, recorder_tool, tools_step

from ._tree import attrs, children, only, tool_spans, turn_span

FAST = RetryPolicy(initial_delay_ms=1, max_delay_ms=8, jitter_ratio=0.0)


@pytest.mark.anyio
async def test_turn_with_parallel_tools_is_invoke_agent_over_chats_and_execute_tools(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    record: list[str] = []
    session, _model, loop = make_loop(
        tmp_path,
        [tools_step(call("a"), call("b")), {"text": "done"}],
        [recorder_tool("p", record)],
    )
    instrument(loop, tracer_provider=provider, agent_name="helper")
    result = await loop.run_turn("go")
    assert result.kind == "completed"
    spans = exporter.get_finished_spans()
    turn = turn_span(spans)
    assert turn.name == "invoke_agent helper" and turn.kind == SpanKind.INTERNAL
    assert turn.parent is None
    assert children(spans, turn) == [
        "chat scripted",
        "execute_tool p",
        "execute_tool p",
        "chat scripted",
    ]
    assert attrs(turn) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "helper",
        "gen_ai.conversation.id": session.id,
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "scripted",
        "duraloop.turn": 1,
        "duraloop.turn.reason": "completed",
    }
    assert turn.status.status_code == StatusCode.UNSET
    first, second = only(spans, "chat")
    assert first.kind == SpanKind.CLIENT
    chat = attrs(first)
    assert chat["gen_ai.operation.name"] == "chat"
    assert (chat["gen_ai.provider.name"], chat["gen_ai.response.model"]) == ("scripted", "scripted")
    assert (chat["duraloop.turn"], chat["duraloop.step"]) == (1, 1)
    assert chat["gen_ai.response.finish_reasons"] == ("tool_call",)
    assert chat["gen_ai.usage.input_tokens"] > 0 and chat["gen_ai.usage.output_tokens"] >= 1
    assert attrs(second)["gen_ai.response.finish_reasons"] == ("stop",)
    assert attrs(second)["duraloop.step"] == 2
    tools = tool_spans(spans)
    assert set(tools) == {"a", "b"}
    for call_id, tool in tools.items():
        assert tool["gen_ai.operation.name"] == "execute_tool"
        assert (tool["gen_ai.tool.name"], tool["gen_ai.tool.type"]) == ("p", "function")
        assert (tool["duraloop.tool.outcome"], tool["duraloop.recovery"]) == ("ok", False)
        assert tool["gen_ai.conversation.id"] == session.id and tool["duraloop.step"] == 1
        assert "error.type" not in tool, call_id
    # the two calls ran in parallel: both started before either ended
    a_span, b_span = only(spans, "execute_tool")
    assert (b_span.start_time or 0) <= (a_span.end_time or 0)


@pytest.mark.anyio
async def test_failed_step_marks_recovery_results_outcome_unknown_and_not_started(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    record: list[str] = []
    session, _model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1", "x"), call("c2", "x"), call("c3", "x"))],
        [recorder_tool("x", record, parallel=False)],
    )
    failed: list[str] = []

    def hook(event: Event) -> None:
        if event.type == "tool/result" and event.data["message"]["source"]["callId"] == "c2":
            if not failed:
                failed.append("c2")
                raise ValueError("audit hook failed on c2")

    session.add_validator(hook)
    instrument(loop, tracer_provider=provider)
    with pytest.raises(ValueError, match="audit hook failed"):
        await loop.run_turn("go")
    spans = exporter.get_finished_spans()
    tools = tool_spans(spans)
    assert (tools["c1"]["duraloop.tool.outcome"], tools["c1"]["duraloop.recovery"]) == ("ok", False)
    assert tools["c2"]["duraloop.tool.outcome"] == "unknown"
    assert tools["c2"]["duraloop.recovery"] is True
    assert tools["c2"]["error.type"] == "TOOL_OUTCOME_UNKNOWN"
    assert tools["c3"]["duraloop.tool.outcome"] == "not_started"
    assert tools["c3"]["duraloop.recovery"] is True
    assert tools["c3"]["duraloop.tool.error_code"] == "TOOL_NOT_STARTED"
    assert tools["c3"]["gen_ai.tool.name"] == "x", "named from the assistant message"
    by_id = {attrs(s)["gen_ai.tool.call.id"]: s for s in only(spans, "execute_tool")}
    assert by_id["c2"].status.status_code == StatusCode.ERROR
    assert by_id["c1"].status.status_code == StatusCode.UNSET
    turn = turn_span(spans)
    assert children(spans, turn) == ["chat scripted", *["execute_tool x"] * 3]
    assert turn.status.status_code == StatusCode.ERROR
    assert attrs(turn)["duraloop.turn.reason"] == "error"
    assert attrs(turn)["error.type"]  # the original error's code


@pytest.mark.anyio
async def test_retries_are_span_events_of_one_chat_span(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    script: list[dict[str, Any]] = [
        {"error": {"code": "RATE_LIMIT", "message": "slow down"}},
        {"error": {"code": "SERVER", "message": "oops"}},
        {"text": "finally"},
    ]
    _session, model, loop = make_loop(tmp_path, script, [], config=LoopConfig(retry=FAST))
    instrument(loop, tracer_provider=provider)
    result = await loop.run_turn("go")
    assert (result.kind, len(model.requests)) == ("completed", 3)
    spans = exporter.get_finished_spans()
    (chat,) = only(spans, "chat")
    assert [e.name for e in chat.events] == [
        "duraloop.llm.retry",
        "duraloop.llm.retry_started",
        "duraloop.llm.retry",
        "duraloop.llm.retry_started",
    ]
    retries = [dict(e.attributes or {}) for e in chat.events if e.name == "duraloop.llm.retry"]
    assert [(r["duraloop.retry.attempt"], r["error.type"]) for r in retries] == [
        (1, "RATE_LIMIT"),
        (2, "SERVER"),
    ]
    assert [r["duraloop.retry.delay_ms"] for r in retries] == [1, 2]
    assert attrs(chat)["gen_ai.response.finish_reasons"] == ("stop",)
    assert chat.status.status_code == StatusCode.UNSET, "the retried request succeeded"


@pytest.mark.anyio
async def test_provider_error_ends_chat_and_turn_with_its_code(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    script = [{"error": {"code": "AUTH", "message": "bad key"}}]
    _session, _model, loop = make_loop(tmp_path, script, [], config=LoopConfig(retry=None))
    instrument(loop, tracer_provider=provider)
    with pytest.raises(LlmError):
        await loop.run_turn("go")
    spans = exporter.get_finished_spans()
    (chat,) = only(spans, "chat")
    assert chat.status.status_code == StatusCode.ERROR
    assert attrs(chat)["error.type"] == "AUTH"
    assert attrs(chat)["gen_ai.response.finish_reasons"] == ("error",)
    turn = turn_span(spans)
    assert (attrs(turn)["error.type"], attrs(turn)["duraloop.turn.reason"]) == ("AUTH", "error")
    assert "bad key" not in (turn.status.description or ""), "no provider text by default"


@pytest.mark.anyio
async def test_cancelled_turn_ends_invoke_agent_with_error_type_aborted(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    gates = Gates()
    _session, _model, loop = make_loop(
        tmp_path, [tools_step(call("c1"), call("c2"), call("c3"))], [gated_tool("p", gates)], cap=2
    )
    instrument(loop, tracer_provider=provider)
    scopes: list[anyio.CancelScope] = []

    async def run() -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await loop.run_turn("go")

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await gates.wait_entered("c1", "c2")
        scopes[0].cancel()
    spans = exporter.get_finished_spans()
    turn = turn_span(spans)
    assert turn.status.status_code == StatusCode.ERROR
    assert attrs(turn)["error.type"] == "aborted"
    assert attrs(turn)["duraloop.turn.abort_reason"] == "parent"
    tools = tool_spans(spans)
    assert {call_id: t["duraloop.tool.outcome"] for call_id, t in tools.items()} == {
        "c1": "aborted",
        "c2": "aborted",
        "c3": "aborted",
    }
    assert tools["c3"]["error.type"] == "ABORTED_BEFORE_DISPATCH"
    assert all(not t["duraloop.recovery"] for t in tools.values())
    assert all(span.end_time is not None for span in spans), "no span is left open"


@pytest.mark.anyio
async def test_paused_turn_is_left_open_then_continued_in_a_new_turn_span(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    from loop._approval_support import counting_tool

    runs: list[str] = []
    danger = counting_tool("danger", runs, requires_approval=True)
    _session, _model, loop = make_loop(
        tmp_path, [tools_step(call("c1", "danger")), {"text": "done"}], [danger]
    )
    detach = instrument(loop, tracer_provider=provider)
    paused = await loop.run_turn("go")
    assert paused.kind == "paused"
    detach()  # the process that paused exits: its open spans end, marked
    first = exporter.get_finished_spans()
    assert {s.name: attrs(s).get("duraloop.left_open") for s in first} == {
        "invoke_agent": True,
        "chat scripted": None,
    }
    exporter.clear()
    instrument(loop, tracer_provider=provider)  # a later process continues the turn
    await loop.decide("c1", allow=True)
    result = await loop.continue_turn()
    assert result.kind == "completed" and runs == ["danger:c1"]
    spans = exporter.get_finished_spans()
    turn = turn_span(spans)
    assert attrs(turn)["duraloop.turn.continued"] is True
    assert attrs(turn)["duraloop.turn.reason"] == "completed"
    assert children(spans, turn) == ["execute_tool danger", "chat scripted"]
    assert tool_spans(spans)["c1"]["duraloop.step"] == 1
    assert tool_spans(spans)["c1"]["duraloop.tool.outcome"] == "ok"
