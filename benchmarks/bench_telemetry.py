"""Tracing overhead per step (docs/telemetry.md#cost): tracing off, and on in three set-ups.

One turn of N steps (each one model response with 3 no-op tool calls) plus a final text
step, through the real AgentLoop over an in-memory session (no store: the figure is the
loop's and the tracer's cost, not the disk's), with `BenchScriptedModel`. Each step makes 4
spans (a `chat` and 3 `execute_tool`). The modes:

- `off`: no `instrument` (the baseline);
- `api no-op`: `instrument` with the API's no-op provider (an application that installed
  the extra but configured no SDK);
- `sdk in-memory`: the SDK with a `SimpleSpanProcessor` into the `InMemorySpanExporter`
  (every span exported synchronously, kept in memory);
- `sdk batch`: the SDK with a `BatchSpanProcessor` into an exporter that drops the spans
  (what `--otel` does, minus the network).

Each mode runs `--runs` times, interleaved; figures are median (min-max) wall and CPU
microseconds per step, the added cost per step against `off`, and the ratio on/off.

The loop's own time varies a lot on a busy machine, so the tracer's cost is also measured
alone: the events of one recorded turn are appended again to a fresh `Session` under each
mode (`Session.append` with its checks, then the observer), best of `--runs`; the
difference to `off` is what the observer adds to one step's ~30 appends.

    /work/venv/bin/python benchmarks/bench_telemetry.py [--steps 300] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import _scenario as sc
import anyio
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from duraloop.log import Event, Session
from duraloop.loop import AgentLoop, LoopConfig
from duraloop.telemetry import instrument

SPANS_PER_STEP = 1 + sc.CALLS_PER_STEP


class DropExporter(SpanExporter):
    """An exporter that counts and drops spans (the network left out)."""

    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        return SpanExportResult.SUCCESS


@dataclass
class Mode:
    """A tracing set-up: builds the provider (None: tracing off) and counts exported spans."""

    name: str
    build: Callable[[], tuple[trace.TracerProvider | None, Callable[[], int]]]


def _off() -> tuple[trace.TracerProvider | None, Callable[[], int]]:
    return None, lambda: 0


def _api_noop() -> tuple[trace.TracerProvider | None, Callable[[], int]]:
    return trace.NoOpTracerProvider(), lambda: 0


def _in_memory() -> tuple[trace.TracerProvider | None, Callable[[], int]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, lambda: len(exporter.get_finished_spans())


def _batch() -> tuple[trace.TracerProvider | None, Callable[[], int]]:
    exporter = DropExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))

    def exported() -> int:
        provider.force_flush()
        return exporter.count

    return provider, exported


MODES = (
    Mode("off", _off),
    Mode("api no-op", _api_noop),
    Mode("sdk in-memory", _in_memory),
    Mode("sdk batch", _batch),
)


@dataclass
class Run:
    """One timed turn: microseconds per step (wall, CPU) and the spans exported."""

    wall_us: float
    cpu_us: float
    spans: int


def run_once(mode: Mode, steps: int, workspace: Path) -> Run:
    """Run one turn of `steps` tool steps under `mode`; time it from the first step."""
    provider, exported = mode.build()
    session = Session("bench")
    loop = AgentLoop(
        session,
        model=sc.BenchScriptedModel(sc.step_script(steps)),
        tools=sc.NOOP_TOOLS,
        cwd=workspace,
        config=LoopConfig(max_steps=steps + 1),
    )
    detach = instrument(loop, tracer_provider=provider) if provider is not None else None
    wall, cpu = time.perf_counter(), time.process_time()
    result = anyio.run(loop.run_turn, "go")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert result.kind == "completed", result
    if detach is not None:
        detach()
    spans = exported()
    if isinstance(provider, TracerProvider):
        provider.shutdown()
    return Run(wall / steps * 1e6, cpu / steps * 1e6, spans)


def record_turn(steps: int, workspace: Path) -> list[Event]:
    """The events of one untraced turn of `steps` tool steps."""
    session = Session("bench")
    loop = AgentLoop(
        session,
        model=sc.BenchScriptedModel(sc.step_script(steps)),
        tools=sc.NOOP_TOOLS,
        cwd=workspace,
        config=LoopConfig(max_steps=steps + 1),
    )
    anyio.run(loop.run_turn, "go")
    return list(session.events)


def replay_once(mode: Mode, events: Sequence[Event], steps: int) -> float:
    """Append `events` to a fresh session under `mode`; return CPU microseconds per step."""
    provider, _exported = mode.build()
    session = Session("replay")
    detach = instrument(session, tracer_provider=provider) if provider is not None else None
    cpu = time.process_time()
    for event in events:
        session.append(
            event.type,
            event.data,
            surface_op=event.surface_op,
            source_event_seqs=event.source_event_seqs,
            copy=False,
        )
    cpu = time.process_time() - cpu
    if detach is not None:
        detach()
    if isinstance(provider, TracerProvider):
        provider.shutdown()
    return cpu / steps * 1e6


def measure_replay(steps: int, runs: int) -> dict[str, float]:
    """Best-of-`runs` CPU microseconds per step of re-appending one turn, per mode."""
    with tempfile.TemporaryDirectory(prefix="duraloop-bench-t-") as tmp:
        events = record_turn(steps, Path(tmp))
    best: dict[str, float] = {}
    for _ in range(runs):
        for mode in MODES:
            value = replay_once(mode, events, steps)
            best[mode.name] = min(best.get(mode.name, value), value)
    return best


def report_replay(best: dict[str, float], steps: int) -> list[sc.Figure]:
    """Print the replay table and return its figures."""
    base = best["off"]
    print(f"Tracer alone: one turn's events ({steps} steps) appended again, best CPU us/step")
    rows = [
        (name, f"{value:.0f}", f"{value - base:+.0f}", f"{value / base:.2f}")
        for name, value in best.items()
    ]
    print(sc.table(("mode", "us/step (CPU)", "+us/step", "ratio"), rows))
    return [
        sc.Figure(
            "T",
            f"tracer alone, {name}: added CPU per step",
            f"{value - base:+.0f} us (ratio {value / base:.2f})",
            "(info)",
            None,
        )
        for name, value in best.items()
        if name != "off"
    ]


def measure(steps: int, runs: int) -> dict[str, list[Run]]:
    """Run every mode `runs` times, interleaved (a busy machine slows all modes alike)."""
    results: dict[str, list[Run]] = {mode.name: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="duraloop-bench-t-") as tmp:
        run_once(MODES[0], 10, Path(tmp))  # warm-up: imports, first-call caches
        run_once(MODES[2], 10, Path(tmp))
        for index in range(runs):
            for mode in MODES:
                run = run_once(mode, steps, Path(tmp))
                results[mode.name].append(run)
                print(
                    f"  run {index + 1} {mode.name}: {run.wall_us:.0f} us/step",
                    file=sys.stderr,
                    flush=True,
                )
    return results


def report(results: dict[str, list[Run]], steps: int) -> list[sc.Figure]:
    """Print the table and return the summary figures (informational: no target)."""
    base_wall = statistics.median(r.wall_us for r in results["off"])
    base_cpu = statistics.median(r.cpu_us for r in results["off"])
    rows = []
    figures = []
    for name, runs in results.items():
        wall = statistics.median(r.wall_us for r in runs)
        cpu = statistics.median(r.cpu_us for r in runs)
        rows.append(
            (
                name,
                sc.median_of([r.wall_us for r in runs]),
                sc.median_of([r.cpu_us for r in runs]),
                f"{wall - base_wall:+.0f}",
                f"{cpu - base_cpu:+.0f}",
                f"{wall / base_wall:.2f}",
                f"{cpu / base_cpu:.2f}",
                runs[0].spans,
            )
        )
        if name != "off":
            figures.append(
                sc.Figure(
                    "T",
                    f"tracing {name}: ratio on/off per step (CPU)",
                    f"{cpu / base_cpu:.2f} ({cpu - base_cpu:+.0f} us/step)",
                    "(info)",
                    None,
                )
            )
    print(
        f"Scenario T: one turn of {steps} steps x {sc.CALLS_PER_STEP} no-op tool calls, "
        f"in-memory session, {SPANS_PER_STEP} spans per step when traced"
    )
    print(
        sc.table(
            (
                "mode",
                "us/step (wall)",
                "us/step (CPU)",
                "+us/step (wall)",
                "+us/step (CPU)",
                "ratio (wall)",
                "ratio (CPU)",
                "spans exported",
            ),
            rows,
        )
    )
    print()
    return figures


def main(argv: list[str] | None = None) -> list[sc.Figure]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    figures = report(measure(args.steps, args.runs), args.steps)
    figures += report_replay(measure_replay(args.steps, args.runs), args.steps)
    print()
    print(sc.figures_table(figures))
    return figures


if __name__ == "__main__":
    main()
