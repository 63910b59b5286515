"""duraloop's column, from duraloop's own benchmark code (benchmarks/_scenario.py and friends).

Nothing of the scenarios is written again here: S is `_scenario.run_steps`, R is
`bench_resume.build_steps_log` + `bench_resume.run_child` (itself a new process per resume),
P is `bench_parallel.run` with the durable JSONL store.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _common as c
import _scenario as sc
import bench_parallel
import bench_resume


async def steps(n: int, root: Path) -> dict[str, Any]:
    """Scenario S: `_scenario.run_steps` (one turn of `n` steps, durable JSONL store)."""
    run = await sc.run_steps(n, root)
    return {
        "ms_per_step": run.ms_per_step,
        "cpu_ms_per_step": run.cpu_ms_per_step,
        "requests": len(run.request_times),
        "last_request_bytes": run.last_request_bytes,
        "disk_bytes": c.disk_bytes(root / "store"),
        "fsyncs_python": run.fsyncs_os,
    }


def build(n: int, root: Path) -> None:
    """Persist the scenario-S session of `n` steps with `bench_resume.build_steps_log`."""
    (root / "session-id").write_text(bench_resume.build_steps_log(root, n))


def resume(root: Path) -> dict[str, Any]:
    """Scenario R: `bench_resume.run_child` (a new process resumes and encodes the request)."""
    session_id = (root / "session-id").read_text()
    report, _ = bench_resume.run_child(root, session_id, snapshot=True)
    whole, _ = bench_resume.run_child(root, session_id, snapshot=False)
    return {
        "resume_ms": report["total_ms"],
        "resume_without_snapshot_ms": whole["total_ms"],
        "request_bytes": report["request_bytes"],
    }


def parallel(root: Path) -> dict[str, Any]:
    """Scenario P: `bench_parallel.run` with the JSONL store (its tool phase, per step)."""
    span = bench_parallel.run(durable=True, seconds=0.1, steps=1)[0] * 1000
    noop = bench_parallel.run(durable=True, seconds=0.0, steps=c.P_NOOP_STEPS)
    return {"span_ms": span, "per_call_us": statistics.median(noop) * 1e6 / c.P_CALLS}


async def pgsteps(n: int, root: Path) -> dict[str, Any]:
    """Scenario S on PostgreSQL: `_scenario.run_steps` on a `PostgresStore` in a fresh schema."""
    import _pg

    from duraloop.store import PostgresStore, SessionStore

    schema = _pg.fresh_schema()
    made: list[PostgresStore] = []

    def store(_: Path) -> SessionStore:
        made.append(PostgresStore(_pg.URL, schema=schema))
        return made[-1]

    try:
        run = await sc.run_steps(n, root, store_factory=store)
        stored = _pg.schema_bytes(schema)
    finally:
        for opened in made:
            opened.close()
        _pg.drop_schema(schema)
    return {
        "ms_per_step": run.ms_per_step,
        "cpu_ms_per_step": run.cpu_ms_per_step,
        "requests": len(run.request_times),
        "last_request_bytes": run.last_request_bytes,
        "disk_bytes": stored,
    }
