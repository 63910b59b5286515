"""Scenario P (README.md#performance): 30 tools x 100 ms, cap 10, one step (ideal 300 ms).

One model response with 30 calls of a parallel-safe tool whose body is `anyio.sleep(0.1)`,
`max_parallel_tool_calls=10`, through the real AgentLoop, with the in-memory store and with
the durable JSONL store. The tool phase is timed from the commit of the `assistant/message`
to the commit of the step's last `tool/result` (a session observer records perf_counter),
so it includes planning, `tool/call` appends, the durable flush before the first body
(JSONL: one write + one fsync), the pool, and the model-order commits.

Scheduler overhead per call: the same with 30 x 0 ms tools, (tool phase) / 30. Each run
uses 10 such steps and takes their median; the in-memory figure is the scheduler's own
cost, the JSONL one adds the flush before the first body.

    /work/venv/bin/python benchmarks/bench_parallel.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _scenario as sc
import anyio

from duraloop.log import Event
from duraloop.loop import LoopConfig, SessionSetup, start_session
from duraloop.store import JsonlStore, MemoryStore, SessionStore

CALLS = 30
CAP = 10
SLEEP_S = 0.1
IDEAL_MS = 300.0
TARGET_MS = 303.0
TARGET_OVERHEAD_US = 30.0
NOOP_STEPS = 10


async def tool_phases(*, durable: bool, seconds: float, steps: int, root: Path) -> list[float]:
    """Run `steps` steps of CALLS calls each; return each step's tool phase in seconds."""
    workspace = root / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    store: SessionStore = JsonlStore(root / "store") if durable else MemoryStore()
    script = [
        {"tool_calls": [{"name": "sleep", "arguments": {"i": k}} for k in range(CALLS)]}
        for _ in range(steps)
    ]
    script.append({"text": "Done."})
    model = sc.EncodingModel(script)
    loop = start_session(
        SessionSetup(
            store=store,
            model=model,
            tools=[sc.sleep_tool(seconds)],
            cwd=workspace,
            config=LoopConfig(max_parallel_tool_calls=CAP, max_steps=steps + 1),
        )
    )
    starts: list[float] = []
    ends: list[float] = []

    def observe(event: Event) -> None:
        if event.type == "assistant/message":
            starts.append(time.perf_counter())
        elif event.type == "tool/result":
            if len(ends) < len(starts):
                ends.append(0.0)
            ends[-1] = time.perf_counter()

    loop.session.observe(observe)
    result = await loop.run_turn("Run all the sleeps.")
    loop.close()
    await model.aclose()
    if result.kind != "completed":
        raise RuntimeError(f"scenario P turn ended {result.reason}")
    return [end - start for start, end in zip(starts, ends, strict=False)]


def run(*, durable: bool, seconds: float, steps: int) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="duraloop-bench-p-") as tmp:
        return anyio.run(
            lambda: tool_phases(durable=durable, seconds=seconds, steps=steps, root=Path(tmp))
        )


def measure(runs: int) -> list[sc.Figure]:
    """Run scenario P `runs` times per store; print and return figures."""
    phase: dict[str, list[float]] = {"memory": [], "jsonl": []}
    noop: dict[str, list[float]] = {"memory": [], "jsonl": []}
    for _ in range(runs):
        for name, durable in (("memory", False), ("jsonl", True)):
            phase[name].append(run(durable=durable, seconds=SLEEP_S, steps=1)[0] * 1000)
            per_step = run(durable=durable, seconds=0.0, steps=NOOP_STEPS)
            noop[name].append(statistics.median(per_step) * 1e6 / CALLS)
            print(
                f"  {name}: {phase[name][-1]:.1f} ms, {noop[name][-1]:.1f} us/call",
                file=sys.stderr,
                flush=True,
            )
    print(
        f"Scenario P: {CALLS} tools x {SLEEP_S * 1000:.0f} ms, cap {CAP}, one step (ideal "
        f"{IDEAL_MS:.0f} ms)"
    )
    rows = [
        (
            name,
            sc.median_of(phase[name]),
            sc.median_of([p - IDEAL_MS for p in phase[name]]),
            sc.median_of(noop[name]),
        )
        for name in phase
    ]
    print(
        sc.table(
            ("store", "tool phase ms", "over ideal ms", f"0 ms tools: us/call ({CALLS} calls)"),
            rows,
        )
    )
    print()
    summary = []
    for name in phase:
        ms = statistics.median(phase[name])
        us = statistics.median(noop[name])
        summary.append(
            sc.Figure(
                "P",
                f"30x100ms cap 10, {name} store",
                sc.median_of(phase[name]) + " ms",
                f"<= {TARGET_MS:.0f} ms (ideal {IDEAL_MS:.0f}; {ms / IDEAL_MS:.3f}x ideal)",
                ms <= TARGET_MS,
            )
        )
        summary.append(
            sc.Figure(
                "P",
                f"scheduler overhead/call, {name} store",
                sc.median_of(noop[name]) + " us",
                f"< {TARGET_OVERHEAD_US:.0f} us (ratio {us / TARGET_OVERHEAD_US:.2f}x target)",
                us < TARGET_OVERHEAD_US if name == "memory" else None,
            )
        )
    print(sc.figures_table(summary))
    return summary


def main(argv: list[str] | None = None) -> list[sc.Figure]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=sc.RUNS)
    args = parser.parse_args(argv)
    return measure(args.runs)


if __name__ == "__main__":
    main()
