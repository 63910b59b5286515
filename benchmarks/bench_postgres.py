"""Scenario S on PostgresStore (records as bytea, and as jsonb) beside the durable JsonlStore.

Issue 14: "payloads as JSONB or bytea: measure both on scenario S and choose". Scenario S is
bench_steps.py's (`_scenario.run_steps`: one turn of N steps, each a scripted response with 3
no-op tool calls, the whole history encoded per request), on three stores:

- `jsonl`: JsonlStore, raw encoding, fsync at every durable boundary (bench_steps.py's);
- `pg-bytea`: PostgresStore, `events.record` bytea (the JSONL line's bytes; the default);
- `pg-jsonb`: PostgresStore with the private `payload="jsonb"` (the line sent as JSON text,
  stored as jsonb, read back as `record::text`).

Every (N, store) runs `--runs` times, interleaved (run 1 of every pair, then run 2, ...), each
on a fresh temp dir and, for PostgreSQL, a fresh schema dropped after the run. Figures:
ms/step (wall) as median (min-max) over runs; the latency of the backend's `append` calls
(wrapped in this script only; each is one durable batch: one transaction, or one
write + fsync) as p50/p99 over every call of every run; the rows and bytes stored at the end
of a run (PostgreSQL: `pg_total_relation_size` of the schema's events table, with its index
and TOAST, and the sum of `pg_column_size(record)`; JSONL: the log file's size); and the time
of one `backend.read` of the whole log after the turn (median (min-max)).

    /work/venv/bin/python benchmarks/bench_postgres.py [--sizes 100,1000] [--runs 3]
        [--url postgresql://127.0.0.1:5432/test]

The server's durability settings (`synchronous_commit`, `fsync`) are printed with the
figures: the comparison with JSONL's fsync is fair only when both are on.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import _scenario as sc
import anyio

from duraloop.store import PostgresStore, SessionStore

STORES = ("jsonl", "pg-bytea", "pg-jsonb")
DEFAULT_URL = os.environ.get("DURALOOP_TEST_POSTGRES", "postgresql://127.0.0.1:5432/test")


@dataclass
class Run:
    """One scenario-S run on one store."""

    store: str
    steps: int
    ms_per_step: float
    appends_ms: list[float]
    rows: int
    relation_bytes: int
    record_bytes: int
    events: int
    read_ms: float


@dataclass
class Timed:
    """Records the duration of every call of one backend's `append` (an instance patch)."""

    durations_ms: list[float] = field(default_factory=list)

    def install(self, backend: Any) -> None:
        original = backend.append

        def append(session_id: str, batch: Sequence[Any]) -> Any:
            started = time.perf_counter()
            try:
                return original(session_id, batch)
            finally:
                self.durations_ms.append((time.perf_counter() - started) * 1000)

        backend.append = append


def _drop(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )


def _pg_sizes(url: str, schema: str) -> tuple[int, int, int]:
    """Return (rows, pg_total_relation_size of events, sum of pg_column_size(record))."""
    import psycopg
    from psycopg import sql

    events = sql.SQL("{}.events").format(sql.Identifier(schema))
    with psycopg.connect(url, autocommit=True) as connection:
        size = connection.execute(  # the bench's schema names need no escaping
            "SELECT pg_total_relation_size(%s::regclass)", (f'"{schema}".events',)
        ).fetchone()
        rows = connection.execute(
            sql.SQL("SELECT count(*), coalesce(sum(pg_column_size(record)), 0) FROM {}").format(
                events
            )
        ).fetchone()
    assert size is not None and rows is not None
    return int(rows[0]), int(size[0]), int(rows[1])


def run_once(store_name: str, steps: int, url: str) -> Run:
    """Run scenario S once on `store_name` in a fresh temp dir (and schema)."""
    timed = Timed()
    schema = f"bench_{uuid.uuid4().hex[:16]}"
    made: list[SessionStore] = []

    def factory(root: Path) -> SessionStore:
        if store_name == "jsonl":
            store: SessionStore = sc.JsonlStore(root / "store")
        else:
            payload: Literal["bytea", "jsonb"] = "jsonb" if store_name == "pg-jsonb" else "bytea"
            store = PostgresStore(url, schema=schema, payload=payload)
        made.append(store)
        timed.install(store.backend)
        return store

    with tempfile.TemporaryDirectory(prefix="duraloop-bench-pg-") as tmp:
        try:
            result = anyio.run(
                functools.partial(sc.run_steps, steps, Path(tmp), store_factory=factory)
            )
            started = time.perf_counter()
            stored = made[0].backend.read(result.session_id)
            read_ms = (time.perf_counter() - started) * 1000
            if len(stored.events) != result.events:
                raise RuntimeError(f"{store_name}: read {len(stored.events)} events")
            if store_name == "jsonl":
                log = next((Path(tmp) / "store").rglob("session.jsonl"))
                file_bytes = log.stat().st_size
                rows, relation, record = sum(1 for _ in log.open("rb")) - 1, file_bytes, 0
            else:
                rows, relation, record = _pg_sizes(url, schema)
        finally:
            for store in made:
                if isinstance(store, PostgresStore):
                    store.close()
            if store_name != "jsonl":
                _drop(url, schema)
    return Run(
        store_name,
        steps,
        result.ms_per_step,
        timed.durations_ms,
        rows,
        relation,
        record,
        result.events,
        read_ms,
    )


def percentile(values: Sequence[float], fraction: float) -> float:
    """The `fraction` quantile of `values` (nearest rank)."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[rank]


def server_settings(url: str) -> str:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        found = [
            f"{name}={connection.execute(f'SHOW {name}').fetchone()[0]}"  # type: ignore[index]
            for name in ("server_version", "synchronous_commit", "fsync", "wal_sync_method")
        ]
    return ", ".join(found)


def measure(
    sizes: Sequence[int], runs: int, url: str, stores: Sequence[str] = STORES
) -> dict[tuple[int, str], list[Run]]:
    """Every (N, store) `runs` times, interleaved; progress on stderr."""
    results: dict[tuple[int, str], list[Run]] = {(n, s): [] for n in sizes for s in stores}
    for index in range(runs):
        for n in sizes:
            for name in stores:
                run = run_once(name, n, url)
                results[n, name].append(run)
                print(
                    f"  run {index + 1} N={n} {name}: {run.ms_per_step:.2f} ms/step, "
                    f"append p50 {percentile(run.appends_ms, 0.5):.2f} ms",
                    file=sys.stderr,
                    flush=True,
                )
    return results


def report(results: dict[tuple[int, str], list[Run]], settings: str) -> None:
    """Print the table."""
    rows = []
    for (n, name), runs in results.items():
        appends = [d for r in runs for d in r.appends_ms]
        rows.append(
            (
                n,
                name,
                sc.median_of([r.ms_per_step for r in runs]),
                f"{percentile(appends, 0.5):.2f}",
                f"{percentile(appends, 0.99):.2f}",
                len(appends) // len(runs),
                runs[0].events,
                runs[0].rows,
                f"{statistics.median(r.relation_bytes for r in runs) / 1e6:.2f}",
                f"{statistics.median(r.record_bytes for r in runs) / 1e6:.2f}"
                if name != "jsonl"
                else "-",
                sc.median_of([r.read_ms for r in runs]),
            )
        )
    print(
        "Scenario S on PostgresStore (bytea, jsonb) and JsonlStore (durable, raw): one turn of "
        "N steps x 3 no-op tool calls, request encoded each step"
    )
    print(f"server: {settings}")
    print(
        sc.table(
            (
                "N",
                "store",
                "ms/step median (min-max)",
                "append p50 ms",
                "append p99 ms",
                "appends/run",
                "events",
                "rows",
                "MB stored",
                "MB records",
                "read ms",
            ),
            rows,
        )
    )
    print(
        "MB stored: PostgreSQL pg_total_relation_size(events) (heap + index + TOAST); "
        "JSONL the log file. MB records: sum(pg_column_size(record)). read ms: "
        "`backend.read` of the whole log after the turn (what a resume reads: no snapshots)."
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--runs", type=int, default=sc.RUNS)
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--stores", default=",".join(STORES))
    args = parser.parse_args(argv)
    sizes = sorted(int(x) for x in args.sizes.split(","))
    stores = [s for s in args.stores.split(",") if s]
    unknown = sorted(set(stores) - set(STORES))
    if unknown:
        parser.error(f"unknown stores {unknown}; choose from {', '.join(STORES)}")
    results = measure(sizes, args.runs, args.url, stores)
    report(results, server_settings(args.url))


if __name__ == "__main__":
    main()
