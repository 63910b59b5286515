"""Shared helpers for the duraloop benchmarks (scenarios S, R and P of README.md#performance).

The scenario, as the performance targets define it for every framework: each step is one model
response with 3 tool calls of no-op tools, persistence is durable on disk (the JSONL store,
fsync at every durable boundary), and the whole history is sent with each request.

Shape chosen here: N steps run in ONE turn (`LoopConfig(max_steps=N + 1)`), plus one final
text-only step that ends the turn. One turn is the representative shape of an agent run
(a single user task driving many tool steps) and isolates the per-step cost: the per-turn
events (`turn/start`, `user/message`, `turn/end`, the request header) are paid once.

Honest request cost: the scripted model is wrapped by `EncodingModel`, which, before each
response, builds the JSON body of the whole request exactly as the OpenAI-compatible
adapter sends it (`OpenAIChatModel.encode_request`, which reuses the encoded fragments of
the unchanged history prefix and converts and encodes only new messages). That work is
inside every timed figure.

Scripts import this module as `_scenario` (they run as `python benchmarks/<script>.py`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from duraloop.llm import (
    AnthropicMessagesModel,
    ModelRequest,
    OpenAIChatModel,
    ScriptedModel,
    StreamChunk,
)
from duraloop.loop import LoopConfig, SessionSetup, start_session
from duraloop.store import JsonlStore, MemoryStore, SessionStore
from duraloop.tools import Tool, tool

CALLS_PER_STEP = 3
RUNS = 3

# --------------------------------------------------------------------------- tools


@tool(parallel=True)
async def noop_read(i: int) -> str:
    """Return at once (a no-op, parallel-safe tool).

    Args:
        i: the step number.
    """
    return "ok"


@tool(parallel=True)
async def noop_list(i: int) -> str:
    """Return at once (a no-op, parallel-safe tool).

    Args:
        i: the step number.
    """
    return "ok"


@tool(parallel=True)
async def noop_stat(i: int) -> str:
    """Return at once (a no-op, parallel-safe tool).

    Args:
        i: the step number.
    """
    return "ok"


NOOP_TOOLS: tuple[Tool, ...] = (noop_read, noop_list, noop_stat)


def sleep_tool(seconds: float) -> Tool:
    """Return a parallel-safe tool named `sleep` whose body is `anyio.sleep(seconds)`."""

    @tool(name="sleep", parallel=True)
    async def sleep(i: int) -> str:
        """Sleep for a fixed time, then return.

        Args:
            i: the call number.
        """
        if seconds > 0:
            await anyio.sleep(seconds)
        return "ok"

    return sleep


# --------------------------------------------------------------------------- scripts


def step_script(
    steps: int, *, calls_per_step: int = CALLS_PER_STEP, text: str = "", final_text: str = "Done."
) -> list[dict[str, Any]]:
    """Return a ScriptedModel script: `steps` tool steps, then one text-only final step.

    Each tool step is one response with `calls_per_step` calls of the no-op tools (cycling
    through `NOOP_TOOLS`), arguments `{"i": step}`, and optionally some text.
    """
    names = [t.name for t in NOOP_TOOLS]
    script: list[dict[str, Any]] = []
    for step in range(1, steps + 1):
        calls = [
            {"name": names[k % len(names)], "arguments": {"i": step}} for k in range(calls_per_step)
        ]
        response: dict[str, Any] = {"tool_calls": calls}
        if text:
            response["text"] = text
        script.append(response)
    script.append({"text": final_text})
    return script


class BenchScriptedModel(ScriptedModel):
    """ScriptedModel without its input-token estimate (a stand-in for a real provider).

    `ScriptedModel._input_tokens` walks the whole history on every request (O(history) per
    step, ~1 ms at 4000 messages) to fake a usage figure a real provider would report
    itself; the benchmarks measure the loop, not that estimate, so it is stubbed here.
    `bench_steps.py --with-token-estimate` runs the unstubbed model for comparison.
    """

    def _input_tokens(self, request: ModelRequest) -> int:
        return len(request.messages)


if not hasattr(ScriptedModel, "_input_tokens"):  # pragma: no cover - a rename upstream
    print("warning: ScriptedModel._input_tokens is gone; BenchScriptedModel stubs nothing")


class EncodingModel:
    """A ScriptedModel that also builds and JSON-encodes the provider payload of each request.

    Attributes:
        request_times: perf_counter() at the start of each request (one per step).
        encoded_bytes: bytes of the last encoded request body.
    """

    def __init__(self, script: Sequence[dict[str, Any]], *, estimate_tokens: bool = False) -> None:
        self._inner = ScriptedModel(script) if estimate_tokens else BenchScriptedModel(script)
        self.provider = self._inner.provider
        self.model = self._inner.model
        # Used only for its request encoding (with its prefix cache); never sends.
        self._adapter = OpenAIChatModel("bench-model", api_key="sk-bench-not-used")
        self.request_times: list[float] = []
        self.encoded_bytes = 0

    def encode(self, request: ModelRequest) -> bytes:
        """Build the Chat Completions body for `request` as the adapter sends it (bytes)."""
        body = self._adapter.encode_request(request)
        self.encoded_bytes = len(body)
        return body

    def encoded_prefix(self, messages: Sequence[Any]) -> Any:
        """The adapter's encoded prefix for a snapshot (as the real adapter's loop writes it)."""
        return self._adapter.encoded_prefix(messages)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """Encode the request, then stream the next scripted response."""
        self.request_times.append(time.perf_counter())
        self.encode(request)
        async for chunk in self._inner.stream(request):
            yield chunk

    async def aclose(self) -> None:
        """Close the (unused) HTTP client of the payload adapter."""
        await self._adapter.aclose()


def encode_request(
    adapter: OpenAIChatModel | AnthropicMessagesModel,
    messages: Sequence[Any],
    system: str | None,
    tools: Sequence[Any],
) -> bytes:
    """JSON-encode the provider body of one request (used by the resume child)."""
    request = ModelRequest(messages=messages, system=system, tools=tools)
    return adapter.encode_request(request)


# --------------------------------------------------------------------------- fsync counting


@dataclass
class FsyncCounter:
    """Counts every `os.fsync` in the process while installed (files and directories)."""

    count: int = 0
    _original: Callable[[int], None] | None = field(default=None, repr=False)

    @contextlib.contextmanager
    def installed(self) -> Iterator[FsyncCounter]:
        original = os.fsync

        def counting(fd: Any) -> None:
            self.count += 1
            original(fd)

        os.fsync = counting
        try:
            yield self
        finally:
            os.fsync = original


# --------------------------------------------------------------------------- scenario S


@dataclass
class StepRun:
    """Figures of one scenario-S run."""

    steps: int
    turn_seconds: float
    cpu_seconds: float
    request_times: list[float]
    turn_end: float
    fsyncs_writer: int
    fsyncs_os: int
    bytes_written: int
    file_bytes: int
    snapshot_bytes: int
    events: int
    last_request_bytes: int
    session_id: str
    root: Path

    @property
    def ms_per_step(self) -> float:
        return self.turn_seconds * 1000 / self.steps

    @property
    def cpu_ms_per_step(self) -> float:
        return self.cpu_seconds * 1000 / self.steps

    @property
    def tail_ms_per_step(self) -> float:
        """Per-step cost of the last 10% of tool steps (at least one step)."""
        tail = max(1, self.steps // 10)
        first = self.steps - tail  # index of the request of step (steps - tail + 1)
        end = self.request_times[self.steps]  # request of the final text step
        return (end - self.request_times[first]) * 1000 / tail


def log_path(store: SessionStore, session_id: str) -> Path:
    """Return the JSONL file of a stored session."""
    locate = getattr(store.backend, "locate", None)
    path = locate(session_id) if locate is not None else None
    if path is None:
        raise RuntimeError(f"no JSONL log for {session_id}")
    return Path(path)


async def run_steps(
    steps: int,
    root: Path,
    *,
    durable: bool = True,
    estimate_tokens: bool = False,
    compression: str = "none",
    store_factory: Callable[[Path], SessionStore] | None = None,
) -> StepRun:
    """Run scenario S once: one turn of `steps` tool steps (+ a final text step).

    `store_factory(root)`, when given, makes the store instead (e.g. a `PostgresStore`,
    bench_postgres.py); its caller closes it. File and snapshot bytes are a JSONL store's only.
    """
    workspace = root / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    store: SessionStore
    if store_factory is not None:
        store = store_factory(root)
    else:
        store = JsonlStore(root / "store", compression=compression) if durable else MemoryStore()
    on_disk = durable and isinstance(store, JsonlStore)
    model = EncodingModel(step_script(steps), estimate_tokens=estimate_tokens)
    counter = FsyncCounter()
    with counter.installed():
        loop = start_session(
            SessionSetup(
                store=store,
                model=model,
                tools=NOOP_TOOLS,
                cwd=workspace,
                config=LoopConfig(max_steps=steps + 1),
            )
        )
        writer = loop.durability
        started, cpu_started = time.perf_counter(), time.process_time()
        result = await loop.run_turn("Run the benchmark task.")
        ended, cpu_ended = time.perf_counter(), time.process_time()
        loop.close()
    await model.aclose()
    if result.kind != "completed" or result.steps != steps + 1:
        raise RuntimeError(f"scenario S turn ended {result.reason} after {result.steps} steps")
    stats = writer.statistics() if writer is not None and hasattr(writer, "statistics") else None
    file_bytes = log_path(store, loop.session.id).stat().st_size if on_disk else 0
    snapshot = log_path(store, loop.session.id).parent / "session.snapshot" if on_disk else None
    snapshot_bytes = snapshot.stat().st_size if snapshot is not None and snapshot.exists() else 0
    return StepRun(
        steps=steps,
        turn_seconds=ended - started,
        cpu_seconds=cpu_ended - cpu_started,
        request_times=model.request_times,
        turn_end=ended,
        fsyncs_writer=stats.fsync_count if stats is not None else -1,
        fsyncs_os=counter.count,
        bytes_written=stats.bytes_written if stats is not None else -1,
        file_bytes=file_bytes,
        snapshot_bytes=snapshot_bytes,
        events=loop.session.seq,
        last_request_bytes=model.encoded_bytes,
        session_id=loop.session.id,
        root=root,
    )


def run_steps_sync(
    steps: int,
    root: Path | None = None,
    *,
    estimate_tokens: bool = False,
    compression: str = "none",
) -> StepRun:
    """Run scenario S in a fresh temp dir (or `root`) and return its figures."""
    options = {"estimate_tokens": estimate_tokens, "compression": compression}
    if root is not None:
        return anyio.run(functools.partial(run_steps, steps, root, **options))
    with tempfile.TemporaryDirectory(prefix="duraloop-bench-") as tmp:
        return anyio.run(functools.partial(run_steps, steps, Path(tmp), **options))


# --------------------------------------------------------------------------- reporting


def median_of(values: Sequence[float]) -> str:
    """Format `median (min-max)`."""
    return f"{statistics.median(values):.3g} ({min(values):.3g}-{max(values):.3g})"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Render a plain-text table."""
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


@dataclass
class Figure:
    """One summary line: a figure, its target and whether it passes."""

    scenario: str
    name: str
    value: str
    target: str
    passed: bool | None  # None: informational, no target


def figures_table(figures: Sequence[Figure]) -> str:
    """Render figures as `scenario | figure | value | target | pass`."""
    rows = [
        (
            f.scenario,
            f.name,
            f.value,
            f.target,
            "-" if f.passed is None else ("PASS" if f.passed else "FAIL"),
        )
        for f in figures
    ]
    return table(("scenario", "figure", "median (min-max)", "target", "result"), rows)


__all__ = [
    "CALLS_PER_STEP",
    "AnthropicMessagesModel",
    "BenchScriptedModel",
    "NOOP_TOOLS",
    "RUNS",
    "EncodingModel",
    "Figure",
    "FsyncCounter",
    "JsonlStore",
    "MemoryStore",
    "StepRun",
    "encode_request",
    "figures_table",
    "log_path",
    "median_of",
    "run_steps",
    "run_steps_sync",
    "sleep_tool",
    "step_script",
    "table",
]
