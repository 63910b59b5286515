"""Issue 14's worker figures: throughput with 1, 2 and 4 workers, and takeover time.

Throughput: `--sessions` sessions x `--turns` turns, each turn one call of a tool that
returns at once (`DURALOOP_TOOL_SECONDS=0`), submitted up front to worker processes
(`tests/_worker_child.py`, concurrency 4 each) on a fresh schema of the local PostgreSQL;
turns/s and events/s from the first submission done to the last (the submissions are made
before the workers start, so submit's own cost is not in it).

Takeover: one worker runs a session whose turn's tool sleeps 30 s; a second worker stands
by; the first is SIGKILLed once the tool started, and the time until the session's
continuation turn has started (the survivor holds the lease and has repaired the log) is
measured, `--kills` times, with a takeover period of `--takeover-seconds` (3; the default
of `duraloop worker` is 30, and the time scales with it: heartbeat expiry, then the lease's).

    /work/venv/bin/python benchmarks/bench_workers.py [--sessions 60] [--turns 3] [--kills 5]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from _workers_cluster import Cluster  # noqa: E402
from store._postgres import drop_schema, fresh_schema, require_postgres  # noqa: E402


def _fresh(tmp: Path) -> Cluster:
    return Cluster(Path(tempfile.mkdtemp(dir=tmp)), fresh_schema())


def _drop(cluster: Cluster) -> None:
    cluster.stop()
    drop_schema(cluster.schema)
    drop_schema(f"{cluster.schema}_dbos")


def throughput(tmp: Path, workers: int, sessions: int, turns: int) -> tuple[float, float]:
    """Return (turns/s, events/s) of `workers` workers draining the submitted turns."""
    cluster = _fresh(tmp)
    try:
        for turn in range(turns):
            for index in range(sessions):
                cluster.submit(f"t{index}", f"turn {turn}")
        cluster.start(workers, tool_seconds=0.0)
        total = sessions * turns
        while cluster.done() == 0:
            time.sleep(0.01)
        started = time.monotonic()
        first = cluster.done()
        cluster.wait_done(total, timeout=600)
        seconds = time.monotonic() - started
        events = int(
            cluster.rows("SELECT coalesce(sum(last_seq - seq + 1), 0) FROM {s}.events")[0][0]
        )
    finally:
        _drop(cluster)
    done = total - first
    return done / seconds, events * done / total / seconds


def takeover_seconds(tmp: Path, kills: int, period: float) -> list[float]:
    """Seconds from a SIGKILL mid-tool to the continuation turn's start, per kill."""
    times: list[float] = []
    for round_ in range(kills):
        cluster = _fresh(tmp)
        try:
            cluster.takeover_seconds = period
            cluster.start(1, tool_seconds=30.0)
            cluster.submit(f"k{round_}", "one slow turn")
            victim = cluster.first_start_pid()
            cluster.start(1, tool_seconds=0.0)
            time.sleep(0.5)  # the survivor is up and beating
            os.kill(victim, signal.SIGKILL)
            killed = time.monotonic()
            while True:
                turns = cluster.rows(
                    "SELECT count(*) FROM {s}.events WHERE session_id = %s AND record LIKE %s",
                    f"k{round_}",
                    b'%"type":"turn/start"%',
                )[0][0]
                if turns >= 2:
                    break
                if time.monotonic() - killed > 10 * period + 30:
                    raise RuntimeError("no takeover")
                time.sleep(0.02)
            times.append(time.monotonic() - killed)
        finally:
            _drop(cluster)
    return times


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=60)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--takeover-seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    require_postgres()
    print(
        f"workers: {args.sessions} sessions x {args.turns} turns (one instant tool call per "
        f"turn), worker concurrency 4, local PostgreSQL, {os.cpu_count()} CPUs"
    )
    with tempfile.TemporaryDirectory(prefix="duraloop-bench-w-") as tmp:
        for workers in (1, 2, 4):
            turns_s, events_s = throughput(Path(tmp), workers, args.sessions, args.turns)
            print(f"  {workers} worker(s): {turns_s:.1f} turns/s, {events_s:.0f} events/s")
        times = takeover_seconds(Path(tmp), args.kills, args.takeover_seconds)
    print(
        f"  takeover after SIGKILL mid-tool (takeover period {args.takeover_seconds:.0f} s, "
        f"{len(times)} kills): p50 {statistics.median(times):.2f} s, p99 {_pct(times, 0.99):.2f} s "
        f"(min {min(times):.2f}, max {max(times):.2f})"
    )


if __name__ == "__main__":
    main()
