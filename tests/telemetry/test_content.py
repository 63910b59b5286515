"""Content capture is opt-in (docs/telemetry.md#content-capture): off, no message text leaves.

Off by default (and with the standard variable unset), no prompt, output, tool argument or
tool result appears in any span name, attribute, event or status; `capture_content=True` or
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` puts them in, each attribute cut to
its bound; an explicit False wins over the variable.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from duraloop.telemetry import CAPTURE_CONTENT_ENV, instrument
from duraloop.tools import Tool, ToolContext
from loop._support import make_loop

from ._tree import attrs, every_string, only

SECRET_PROMPT = "prompt-secret-4711"
SECRET_OUTPUT = "output-secret-0815"
SECRET_ARGUMENT = "argument-secret-1234"
SECRET_RESULT = "result-secret-9999"


def _echo_tool() -> Tool:
    async def body(args: Any, ctx: ToolContext) -> str:
        return f"{SECRET_RESULT} " + "r" * 40_000

    return Tool(
        name="echo",
        description="Echo.",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}},
        validator=lambda value: value,
        body=body,
    )


def _script() -> list[dict[str, Any]]:
    return [
        {"tool_calls": [{"id": "c1", "name": "echo", "arguments": {"q": SECRET_ARGUMENT}}]},
        {"text": f"{SECRET_OUTPUT} " + "o" * 40_000},
    ]


async def _run(tmp_path: Path, provider: TracerProvider, capture: bool | None) -> None:
    _session, _model, loop = make_loop(tmp_path, _script(), [_echo_tool()])
    instrument(loop, tracer_provider=provider, capture_content=capture)
    result = await loop.run_turn(SECRET_PROMPT)
    assert result.kind == "completed"


def _leaks(exporter: InMemorySpanExporter) -> list[str]:
    secrets = (SECRET_PROMPT, SECRET_OUTPUT, SECRET_ARGUMENT, SECRET_RESULT)
    return [
        s for s in secrets if any(s in text for text in every_string(exporter.get_finished_spans()))
    ]


@pytest.mark.anyio
async def test_no_content_leaves_by_default(
    tmp_path: Path,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    await _run(tmp_path, provider, None)
    assert len(exporter.get_finished_spans()) == 4
    assert _leaks(exporter) == []


@pytest.mark.anyio
async def test_capture_content_true_records_bounded_messages_arguments_and_results(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    await _run(tmp_path, provider, True)
    assert sorted(_leaks(exporter)) == sorted(
        (SECRET_PROMPT, SECRET_OUTPUT, SECRET_ARGUMENT, SECRET_RESULT)
    )
    spans = exporter.get_finished_spans()
    first, second = only(spans, "chat")
    inputs = json.loads(attrs(first)["gen_ai.input.messages"])
    assert inputs == [{"role": "user", "parts": [{"type": "text", "content": SECRET_PROMPT}]}]
    (tool,) = only(spans, "execute_tool")
    assert json.loads(attrs(tool)["gen_ai.tool.call.arguments"]) == {"q": SECRET_ARGUMENT}
    assert SECRET_RESULT in attrs(tool)["gen_ai.tool.call.result"]
    output = attrs(second)["gen_ai.output.messages"]
    assert SECRET_OUTPUT in output
    for span in spans:
        for value in attrs(span).values():
            assert len(str(value)) <= 16_384, span.name


@pytest.mark.anyio
async def test_capture_env_var_true_turns_capture_on(
    tmp_path: Path,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "TRUE")
    await _run(tmp_path, provider, None)
    assert sorted(_leaks(exporter)) == sorted(
        (SECRET_PROMPT, SECRET_OUTPUT, SECRET_ARGUMENT, SECRET_RESULT)
    )


@pytest.mark.anyio
async def test_explicit_false_wins_over_the_env_var(
    tmp_path: Path,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    await _run(tmp_path, provider, False)
    assert _leaks(exporter) == []
