"""Approvals (docs/approvals.md): what an ask costs a step, and resuming a paused session.

1. ms per step of N steps whose one call asks and an in-process approver allows it at once,
   against N steps of the same plain call, on a durable JSONL store: the difference is what
   an approval costs (its `approval/asked` and `approval/decided` events and the two fsyncs
   that make the ask durable before anyone is asked and the decision before the body runs).
2. A session of H closed steps (snapshot written at close), then a turn paused on an ask:
   ms to resume it in a new loop (`resume_session` + `pending_approvals()`), to `decide()`
   (durable), and to `continue_turn()` to the turn's end (the approved body and one more
   model request). Median of RUNS, each in a fresh temp dir.

    /work/venv/bin/python benchmarks/bench_approvals.py [--steps 200] [--history 1000] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from duraloop.llm import ScriptedModel
from duraloop.loop import LoopConfig, SessionSetup, resume_session, start_session
from duraloop.store import JsonlStore
from duraloop.tools import Decision, tool


@tool
def plain(i: int) -> str:
    """Return at once.

    Args:
        i: the step number.
    """
    return "ok"


@tool(requires_approval=True)
def asking(i: int) -> str:
    """Return at once, after a person's approval.

    Args:
        i: the step number.
    """
    return "ok"


def _script(name: str, steps: int) -> list[dict[str, Any]]:
    calls = [
        {"tool_calls": [{"id": f"c{i}", "name": name, "arguments": {"i": i}}]} for i in range(steps)
    ]
    return [*calls, {"text": "done"}]


def _steps_ms(name: str, steps: int) -> float:
    """Wall ms per step of one turn of `steps` steps calling `name` (approved inline)."""
    with tempfile.TemporaryDirectory() as tmp:
        setup = SessionSetup(
            store=JsonlStore(Path(tmp) / "s"),
            model=ScriptedModel(_script(name, steps)),
            tools=[plain, asking],
            cwd=tmp,
            config=LoopConfig(max_steps=steps + 1),
            approver=lambda request: Decision(allow=True),
        )
        with start_session(setup) as loop:
            started = time.perf_counter()
            result = anyio.run(loop.run_turn, "go")
            elapsed = time.perf_counter() - started
        if result.kind != "completed":
            raise SystemExit(f"the {name} turn ended {result.kind}")
    return elapsed * 1000 / steps


def _paused_round_trip(history: int) -> tuple[float, float, float]:
    """(resume ms, decide ms, continue ms) of a session of `history` steps, then a pause."""
    with tempfile.TemporaryDirectory() as tmp:
        store = JsonlStore(Path(tmp) / "s")
        config = LoopConfig(max_steps=history + 1)
        first = SessionSetup(
            store=store,
            model=ScriptedModel(_script("plain", history)),
            tools=[plain, asking],
            cwd=tmp,
            config=config,
        )
        with start_session(first, session_id="bench") as loop:
            anyio.run(loop.run_turn, "warm up")
        pausing = SessionSetup(
            store=store,
            model=ScriptedModel([*_script("asking", 1)]),
            tools=[plain, asking],
            cwd=tmp,
            config=config,
        )
        loop, _ = resume_session("bench", pausing)
        with loop:
            if anyio.run(loop.run_turn, "ask").kind != "paused":
                raise SystemExit("the asking turn did not pause")
        started = time.perf_counter()
        loop, _ = resume_session("bench", pausing)
        (waiting,) = loop.pending_approvals()
        resumed = time.perf_counter()
        with loop:

            async def decide_then_continue() -> tuple[float, float]:
                before = time.perf_counter()
                await loop.decide(waiting.call_id, allow=True)
                decided = time.perf_counter()
                result = await loop.continue_turn()
                if result.kind != "completed":
                    raise SystemExit(f"the continued turn ended {result.kind}")
                return decided - before, time.perf_counter() - decided

            decide_s, continue_s = anyio.run(decide_then_continue)
    return (resumed - started) * 1000, decide_s * 1000, continue_s * 1000


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--history", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    plain_ms = statistics.median(_steps_ms("plain", args.steps) for _ in range(args.runs))
    asking_ms = statistics.median(_steps_ms("asking", args.steps) for _ in range(args.runs))
    trips = [_paused_round_trip(args.history) for _ in range(args.runs)]
    resume_ms, decide_ms, continue_ms = (statistics.median(t[i] for t in trips) for i in range(3))
    print(f"approvals, {args.steps} steps of one call, durable JSONL, median of {args.runs}")
    print(f"  plain call:             {plain_ms:.2f} ms/step")
    print(f"  asking call, approved:  {asking_ms:.2f} ms/step")
    print(f"  cost of one approval:   {asking_ms - plain_ms:.2f} ms ({asking_ms / plain_ms:.2f}x)")
    print(f"paused session after {args.history} steps (snapshot at close), median of {args.runs}")
    print(f"  resume + pending:       {resume_ms:.2f} ms")
    print(f"  decide (durable):       {decide_ms:.2f} ms")
    print(f"  continue to turn end:   {continue_ms:.2f} ms")


if __name__ == "__main__":
    main()
