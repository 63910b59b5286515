"""Issue 14's chaos run: worker processes on DBOS, SIGKILLed and SIGSTOPped at random.

3 worker processes (`tests/_worker_child.py`: every turn one call of a slow tool that
writes a side-effect ledger, then a text) on a fresh schema of the local PostgreSQL; 200
sessions x 3 queued turns; every few seconds a random worker is SIGKILLed (and replaced)
or paused with SIGSTOP for 1-5 s. At the end the laws of `tests/_workers_cluster.py` are
checked (every turn once, every session valid, no body twice, recovery results where a
worker died mid-tool, no event by a fenced-out writer) and the counts printed. The reduced
run is `tests/test_worker_processes.py::test_chaos_reduced_random_kills_and_pauses_break_no_law`.

    /work/venv/bin/python benchmarks/chaos_workers.py [--workers 3] [--sessions 200]
        [--turns 3] [--seconds 60] [--seed 1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from _workers_cluster import Cluster, check_cluster, run_chaos  # noqa: E402
from store._postgres import drop_schema, fresh_schema, require_postgres  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=600, help="the most seconds of faults")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    require_postgres()
    schema = fresh_schema()
    sessions = [f"chaos-{i}" for i in range(args.sessions)]
    with tempfile.TemporaryDirectory(prefix="duraloop-chaos-") as tmp:
        cluster = Cluster(Path(tmp), schema)
        started = time.monotonic()
        try:
            faults = run_chaos(
                cluster,
                sessions,
                turns=args.turns,
                workers=args.workers,
                seconds=args.seconds,
                seed=args.seed,
            )
            counts = check_cluster(cluster, sessions, args.turns)
            outcomes = Counter(
                str(row[0]) for row in cluster.rows("SELECT outcome FROM {s}.submissions")
            )
            ledger = cluster.ledger_lines()
        finally:
            cluster.stop()
            drop_schema(schema)
            drop_schema(f"{schema}_dbos")
    elapsed = time.monotonic() - started
    bodies = sum(line[0] == "start" for line in ledger)
    unfinished = bodies - sum(line[0] == "end" for line in ledger)
    print(
        f"chaos: {args.workers} workers, {args.sessions} sessions x {args.turns} turns, "
        f"faults until every turn was done ({faults['seconds']} s, seed {args.seed}), "
        f"{elapsed:.0f} s in all"
    )
    print(f"  faults: {faults['kills']} SIGKILLs, {faults['pauses']} SIGSTOP/SIGCONT pauses")
    print(
        f"  turns: {counts['turns']} ({counts['interrupted']} interrupted by a worker and "
        f"continued); submissions: {dict(outcomes)}"
    )
    print(
        f"  tool bodies: {bodies} started, {unfinished} never finished (a worker died in "
        f"them), 0 run twice; TOOL_OUTCOME_UNKNOWN results: {counts['unknown']}"
    )
    print("  every session passes check; no event by a fenced-out writer")


if __name__ == "__main__":
    main()
