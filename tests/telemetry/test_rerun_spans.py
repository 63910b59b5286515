"""The spans of a re-run turn and of a compacting turn (docs/telemetry.md#re-runs).

A re-run turn (`AgentLoop.retry_unknown_calls()`) runs a step that sends no model request and
answers the re-run with a content-only replacement of the unknown result, which keeps the old
turn's number and call id; compaction's prunes are content-only `tool/result` replacements too.
Neither may open a span for the old turn, leave the re-run's span open, or make a `chat` span
for a step without a request.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from duraloop import SessionSetup, resume_session
from duraloop.llm import ScriptedModel
from duraloop.log import Event, SessionHeader
from duraloop.store import MemoryStore
from duraloop.telemetry import instrument
from duraloop.tools import ToolContext, tool
from loop._compaction_support import compacting_loop, tool_script

from ._tree import attrs, children, only, tool_spans, turn_span


def _crashed(store: MemoryStore, cwd: Path) -> None:
    """Store a session that died with call c1 (`idem`, idempotent) recorded, unanswered."""
    call = {"type": "tool-call", "id": "c1", "name": "idem", "arguments": '{"x": 1}'}
    message = {
        "id": "m",
        "role": "assistant",
        "content": [call],
        "source": {"kind": "model", "provider": "scripted", "model": "s"},
    }
    user = {"id": "u", "role": "user", "content": [{"type": "text", "text": "go"}]}
    step = {"turn": 1, "step": 1}
    store.backend.materialize(
        SessionHeader(id="s", created_at=1, cwd=str(cwd)),
        [
            Event("turn/start", 0, 1, {"turn": 1}),
            Event("step/start", 1, 1, step),
            Event("user/message", 2, 1, {**user, "source": {"kind": "user"}}, None, "append"),
            Event("assistant/message", 3, 1, {**step, "message": message}, None, "append"),
            Event(
                "tool/call", 4, 1, {**step, "callId": "c1", "name": "idem", "arguments": '{"x": 1}'}
            ),
        ],
    )


def _setup(store: MemoryStore, script: list[dict[str, Any]], *, fail: bool) -> SessionSetup:
    @tool(idempotent=True)
    def idem(ctx: ToolContext, x: int) -> str:
        """An idempotent call."""
        if fail:
            raise RuntimeError("still broken")
        return f"idem ran with x={x}"

    return SessionSetup(store=store, model=ScriptedModel(script), tools=[idem])


async def _rerun_spans(
    tmp_path: Path,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    *,
    continue_with_model: bool,
    fail: bool = False,
) -> tuple[ReadableSpan, ...]:
    store = MemoryStore()
    _crashed(store, tmp_path)
    script = [{"text": "seen it"}] if continue_with_model else []
    loop, repair = resume_session("s", _setup(store, script, fail=fail))
    assert repair.closers  # crash repair answered c1 TOOL_OUTCOME_UNKNOWN before tracing
    with loop:
        detach = instrument(loop, tracer_provider=provider, capture_content=True)
        report = await loop.retry_unknown_calls(continue_with_model=continue_with_model)
        detach()
    (rerun,) = report.reruns
    assert rerun.result_seq is not None and rerun.failed is fail
    return exporter.get_finished_spans()


def _assert_one_rerun_turn(spans: tuple[ReadableSpan, ...]) -> dict[str, Any]:
    """Exactly one turn span (turn 2), nothing for turn 1, nothing left open: the re-run span."""
    turn = turn_span(spans)
    assert attrs(turn)["duraloop.turn"] == 2
    assert "duraloop.turn.continued" not in attrs(turn)
    assert attrs(turn)["duraloop.turn.reason"] == "completed"
    assert [attrs(s)["duraloop.turn"] for s in spans] == [2] * len(spans)
    assert not [s.name for s in spans if "duraloop.left_open" in attrs(s)]
    (tool_span,) = only(spans, "execute_tool")
    assert tool_span.parent is not None and turn.context is not None
    assert tool_span.parent.span_id == turn.context.span_id
    tools = tool_spans(spans)
    assert set(tools) == {"c1-rerun-1"}  # the re-run's own call id
    tool = tools["c1-rerun-1"]
    assert (tool["gen_ai.tool.name"], tool["duraloop.step"]) == ("idem", 1)
    assert (tool["duraloop.rerun"], tool["duraloop.rerun_of"]) == (True, "c1")
    assert tool["duraloop.recovery"] is False
    return tool


@pytest.mark.anyio
async def test_a_rerun_turn_with_a_model_step_is_one_turn_with_the_rerun_ended_ok(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    spans = await _rerun_spans(tmp_path, provider, exporter, continue_with_model=True)
    tool = _assert_one_rerun_turn(spans)
    assert tool["duraloop.tool.outcome"] == "ok"
    assert "error.type" not in tool
    assert "idem ran with x=1" in tool["gen_ai.tool.call.result"]
    (span,) = only(spans, "execute_tool")
    assert span.status.status_code == StatusCode.UNSET
    assert children(spans, turn_span(spans)) == ["execute_tool idem", "chat scripted"]
    (chat,) = only(spans, "chat")  # the model step only: the re-run step sent no request
    assert attrs(chat)["duraloop.step"] == 2
    assert "idem ran with x=1" in attrs(chat)["gen_ai.input.messages"]  # the replacement


@pytest.mark.anyio
async def test_a_rerun_only_turn_makes_no_chat_span(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    spans = await _rerun_spans(tmp_path, provider, exporter, continue_with_model=False)
    _assert_one_rerun_turn(spans)
    assert only(spans, "chat") == []
    assert sorted(s.name for s in spans) == ["execute_tool idem", "invoke_agent"]


@pytest.mark.anyio
async def test_a_failed_rerun_ends_its_span_as_an_error(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    spans = await _rerun_spans(tmp_path, provider, exporter, continue_with_model=False, fail=True)
    tool = _assert_one_rerun_turn(spans)
    assert (tool["duraloop.tool.outcome"], tool["error.type"]) == ("error", "error")
    (span,) = only(spans, "execute_tool")
    assert span.status.status_code == StatusCode.ERROR


def _renamed(script: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    """`script` with its call ids prefixed (two turns' calls must not share ids)."""
    return [
        {**step, "tool_calls": [{**c, "id": prefix + c["id"]} for c in step.get("tool_calls", [])]}
        for step in script
    ]


@pytest.mark.anyio
async def test_compaction_and_prunes_make_no_spurious_spans(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    script = _renamed(tool_script(3, final="one"), "a") + _renamed(tool_script(6), "b")
    session, _model, loop = compacting_loop(tmp_path, script, window=8000)
    instrument(loop, tracer_provider=provider)
    assert (await loop.run_turn("first")).kind == "completed"
    assert (await loop.run_turn("second")).kind == "completed"
    events = session.events
    replaces = [e for e in events if e.type == "tool/result" and isinstance(e.surface_op, dict)]
    assert any(e.data["turn"] == 1 and e.seq > _turn_start(events, 2) for e in replaces)
    assert any(e.type == "compaction/summary" for e in events)
    spans = exporter.get_finished_spans()
    turns = only(spans, "invoke_agent")
    assert [attrs(t)["duraloop.turn"] for t in turns] == [1, 2]
    assert not [s.name for s in spans if "duraloop.left_open" in attrs(s)]
    assert not [s.name for s in turns if "duraloop.turn.continued" in attrs(s)]
    calls = [e.data["callId"] for e in events if e.type == "tool/call"]
    assert sorted(tool_spans(spans)) == sorted(calls)
    assert len(only(spans, "execute_tool")) == len(calls)  # one span per call, none per prune
    messages = [e for e in events if e.type == "assistant/message"]
    assert len(only(spans, "chat")) == len(messages)


def _turn_start(events: Sequence[Event], number: int) -> int:
    """The seq of turn `number`'s `turn/start`."""
    return next(e.seq for e in events if e.type == "turn/start" and e.data["turn"] == number)
