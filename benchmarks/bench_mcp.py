"""Issue 15: the cost of an MCP tool call against a local tool, per call and per step.

Two measurements, each against a local async tool doing the same work (`echo`: return
`"step {i}"`):

1. Per call: the tool's body called directly `--calls` times in a row (what the MCP client
   adds: JSON-RPC encoding, the transport, the server's dispatch and the result conversion).
2. Per step: one AgentLoop turn of `--steps` steps, each one scripted model response with one
   call of the tool, on a durable JSONL store (what a user sees per step).

The MCP server (`_mcp_echo_server.py`, the SDK's `MCPServer`) runs as a stdio subprocess and
as a streamable HTTP subprocess on 127.0.0.1. Figures are medians of `--runs` runs.

    /work/venv/bin/python benchmarks/bench_mcp.py [--calls 500] [--steps 200] [--runs 3]
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import _scenario as sc
import anyio

from duraloop.loop import LoopConfig, SessionSetup, start_session
from duraloop.store import JsonlStore
from duraloop.tools import CancelSignal, Tool, ToolContext, tool
from duraloop.tools.mcp import McpServerConfig, McpServers

SERVER = Path(__file__).with_name("_mcp_echo_server.py")


@tool(parallel=True)
async def echo(i: int) -> str:
    """Return the step number as text.

    Args:
        i: the step number.
    """
    return f"step {i}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def _http_server() -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the MCP HTTP server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait()


@contextlib.asynccontextmanager
async def _tool(kind: str, url: str) -> AsyncIterator[Tool]:
    if kind == "local":
        yield echo
        return
    config = (
        McpServerConfig(name="bench", command=(sys.executable, str(SERVER), "stdio"))
        if kind == "stdio"
        else McpServerConfig(name="bench", url=url)
    )
    async with McpServers([config]) as servers:
        (found,) = [t for t in servers.tools if t.name == "mcp__bench__echo"]
        yield found


def _context(workspace: Path, name: str) -> ToolContext:
    return ToolContext(
        cwd=workspace, signal=CancelSignal(), call_id="c", tool_name=name, session_id="bench"
    )


async def _per_call(kind: str, url: str, calls: int, workspace: Path) -> float:
    """Return microseconds per direct call of the tool's body."""
    async with _tool(kind, url) as found:
        ctx = _context(workspace, found.name)
        args = found.validator({"i": 0})
        for _ in range(20):  # warm up (connection, caches)
            await found.body(args, ctx)
        started = time.perf_counter()
        for i in range(calls):
            await found.body(found.validator({"i": i}), ctx)
        return (time.perf_counter() - started) / calls * 1e6


async def _per_step(kind: str, url: str, steps: int, root: Path) -> float:
    """Return milliseconds per step of a turn with one call of the tool per step."""
    async with _tool(kind, url) as found:
        script: list[dict[str, Any]] = [
            {"tool_calls": [{"name": found.name, "arguments": {"i": i}}]}
            for i in range(1, steps + 1)
        ]
        script.append({"text": "Done."})
        workspace = root / "ws"
        workspace.mkdir(parents=True, exist_ok=True)
        loop = start_session(
            SessionSetup(
                store=JsonlStore(root / "store"),
                model=sc.BenchScriptedModel(script),
                tools=[found],
                cwd=workspace,
                config=LoopConfig(max_steps=steps + 1),
            )
        )
        started = time.perf_counter()
        result = await loop.run_turn("Run the benchmark task.")
        elapsed = time.perf_counter() - started
        loop.close()
        if result.kind != "completed" or result.steps != steps + 1:
            raise RuntimeError(f"the {kind} turn ended {result.reason} after {result.steps} steps")
        return elapsed / steps * 1e3


def _median(measure: Callable[[], float], runs: int) -> float:
    return statistics.median(measure() for _ in range(runs))


def main(argv: list[str] | None = None) -> dict[str, tuple[float, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    figures: dict[str, tuple[float, float]] = {}
    with _http_server() as url, tempfile.TemporaryDirectory(prefix="duraloop-bench-mcp-") as tmp:
        root = Path(tmp)
        for kind in ("local", "stdio", "http"):

            def call(kind: str = kind) -> float:
                return anyio.run(_per_call, kind, url, args.calls, root)

            def step(kind: str = kind) -> float:
                with tempfile.TemporaryDirectory(dir=root) as run_root:
                    return anyio.run(_per_step, kind, url, args.steps, Path(run_root))

            figures[kind] = (_median(call, args.runs), _median(step, args.runs))
            print(f"  {kind}: {figures[kind][0]:.0f} us/call", file=sys.stderr, flush=True)
    local_call, local_step = figures["local"]
    rows = [
        (
            kind,
            f"{per_call:.0f}",
            f"{per_call - local_call:+.0f}",
            f"{per_step:.2f}",
            f"{per_step - local_step:+.2f}",
        )
        for kind, (per_call, per_step) in figures.items()
    ]
    print(
        f"MCP tool call vs a local tool ({args.calls} direct calls; a turn of {args.steps} steps "
        f"with one call each, durable JSONL; median of {args.runs})"
    )
    print(
        sc.table(
            ("tool", "us/call", "over local", "ms/step", "over local"),
            rows,
        )
    )
    return figures


if __name__ == "__main__":
    main()
