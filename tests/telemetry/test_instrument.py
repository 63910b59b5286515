"""`instrument`'s contract: detach, a tracer that fails, the no-op cases and its import cost.

Tracing never changes the loop: a tracer that raises is logged and the turn completes; with
no provider configured the API's no-op tracer is used; without OpenTelemetry installed
`instrument` is a documented no-op; `import duraloop` and `import duraloop.telemetry` load no
OpenTelemetry module (checked in fresh interpreters). See docs/telemetry.md#cost.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from duraloop.errors import UsageError
from duraloop.log import Session
from duraloop.telemetry import instrument
from loop._support import make_loop

from ._tree import attrs

ROOT = Path(__file__).resolve().parents[2]


def test_detach_ends_open_spans_marked_left_open_and_stops_tracing(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    session = Session("s1")
    detach = instrument(session, tracer_provider=provider)
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("request/context", {"provider": "p", "model": "m"})  # the step's request
    assert exporter.get_finished_spans() == ()
    detach()
    spans = {span.name: attrs(span) for span in exporter.get_finished_spans()}
    assert set(spans) == {"invoke_agent", "chat m"}
    assert all(a["duraloop.left_open"] is True for a in spans.values())
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert len(exporter.get_finished_spans()) == 2, "nothing is traced after detach"


class _BrokenTracer(trace.NoOpTracer):
    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        raise RuntimeError("exporter on fire")


class _BrokenProvider(trace.NoOpTracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _BrokenTracer()


@pytest.mark.anyio
async def test_a_failing_tracer_is_logged_and_never_breaks_the_turn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    session, _model, loop = make_loop(tmp_path, [{"text": "hi"}], [])
    instrument(loop, tracer_provider=_BrokenProvider())
    with caplog.at_level(logging.ERROR, logger="duraloop.telemetry"):
        result = await loop.run_turn("go")
    assert result.kind == "completed"
    assert session.events[-1].type == "turn/end"
    assert any("could not trace turn/start" in r.getMessage() for r in caplog.records)


@pytest.mark.anyio
async def test_without_a_configured_provider_the_global_no_op_tracer_is_used(
    tmp_path: Path,
) -> None:
    _session, _model, loop = make_loop(tmp_path, [{"text": "hi"}], [])
    detach = instrument(loop)
    result = await loop.run_turn("go")
    detach()
    assert result.kind == "completed"


def test_instrument_refuses_what_is_neither_a_loop_nor_a_session() -> None:
    with pytest.raises(UsageError, match="traces an AgentLoop or a Session, not str"):
        instrument("s1")  # type: ignore[arg-type]


def _modules_after(code: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=ROOT,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_importing_duraloop_and_its_telemetry_loads_no_opentelemetry() -> None:
    result = _modules_after(
        """
        import json, sys
        import duraloop
        import duraloop.telemetry
        from duraloop.telemetry import instrument, CAPTURE_CONTENT_ENV
        print(json.dumps({"otel": sorted(m for m in sys.modules if m.startswith("opentelemetry"))}))
        """
    )
    assert result == {"otel": []}


def test_instrument_without_opentelemetry_installed_is_a_no_op() -> None:
    result = _modules_after(
        """
        import json, sys
        sys.modules["opentelemetry"] = None  # as if opentelemetry-api were not installed
        from duraloop.log import Session
        from duraloop.telemetry import instrument
        session = Session("s1")
        detach = instrument(session)
        session.append("turn/start", {"turn": 1})
        detach()
        print(json.dumps({"observers": len(session._observers), "seq": session.seq}))
        """
    )
    assert result == {"observers": 0, "seq": 1}
