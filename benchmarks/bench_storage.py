"""Storage backends compared: bytes per event, append throughput and load time.

    /work/venv/bin/python benchmarks/bench_storage.py [--runs 3] [--events 100000] [--steps 300]

Three tables, median of `--runs` (min-max), under a minute on 2 cores:

- **Bytes per event** of one generated ~100k-event tool-heavy session (bench_resume's
  script: per turn a user message, a step with reasoning, text and 2 tool calls, a step with
  text and 3 tool calls, a final text step), stored as JSONL raw without packed rows, raw
  with packed rows (the default), zstd + packed rows, and SQLite (packed rows; database +
  WAL after close). The log is written in the batches the loop's checkpoints make (a cut
  before each `step/start`, after each run of `tool/call`s and after `turn/end`), since a
  zstd frame per batch is what the ratio depends on. Building is not timed; `os.fsync` is
  stubbed while the JSONL copies are written (bytes do not depend on it).
- **Append throughput** with the real loop: scenario S (one turn of `--steps` steps x 3
  no-op tool calls, request encoded each step), durable, for JSONL raw, JSONL zstd and
  SQLite: events/s over the turn, ms per step, and the writer's fsyncs per step (SQLite:
  one per committed transaction, made by SQLite in C).
- **Load time** of the 100k-event session from a fresh store object: `store.load` (read,
  scan, decode, legacy check; nothing to repair) + `Session(seed=...)`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import _scenario as sc
import anyio
import bench_resume

from duraloop.log import Event, Session, SessionHeader, now_ms
from duraloop.loop import AgentLoop, LoopConfig, SessionSetup, new_session_id, start_session
from duraloop.store import JsonlStore, SessionStore, SessionWriter, SqliteStore

# (label, factory of a store under a directory)
LAYOUTS: dict[str, Callable[[Path], SessionStore]] = {
    "JSONL raw, unpacked": lambda root: JsonlStore(root / "store", pack_chunks=False),
    "JSONL raw, packed rows": lambda root: JsonlStore(root / "store"),
    "JSONL zstd, packed rows": lambda root: JsonlStore(root / "store", compression="zstd"),
    "SQLite, packed rows": lambda root: SqliteStore(root / "sessions.db"),
}
APPEND_LAYOUTS = ("JSONL raw, packed rows", "JSONL zstd, packed rows", "SQLite, packed rows")


def _close(store: SessionStore) -> None:
    if isinstance(store, SqliteStore):
        store.close()


# --------------------------------------------------------------------------- the 100k session


async def _generate(root: Path, events: int) -> Session:
    """Run the loop in memory over bench_resume's tool-heavy script until ~`events` events."""
    turns = max(1, -(-events // 81))  # one turn of the script logs 81 events
    script = [r for turn in range(1, turns + 1) for r in bench_resume._large_turn_script(turn)]
    workspace = root / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    sid = new_session_id()
    session = Session(
        sid, header=SessionHeader(id=sid, created_at=now_ms(), cwd=str(workspace.resolve()))
    )
    loop = AgentLoop(
        session,
        model=sc.BenchScriptedModel(script),
        tools=sc.NOOP_TOOLS,
        cwd=workspace,
        config=LoopConfig(max_steps=10),
    )
    for turn in range(1, turns + 1):
        result = await loop.run_turn(f"Task {turn}: check the workspace and report.")
        if result.kind != "completed":
            raise RuntimeError(f"generating turn {turn} ended {result.reason}")
    return session


def checkpoint_batches(events: Sequence[Event]) -> list[list[Event]]:
    """Split a log where the loop's durable checkpoints cut it (see the module docstring)."""
    batches: list[list[Event]] = [[]]
    for index, event in enumerate(events):
        if event.type == "step/start" and batches[-1]:
            batches.append([])
        batches[-1].append(event)
        following = events[index + 1].type if index + 1 < len(events) else None
        if (event.type == "tool/call" and following != "tool/call") or event.type == "turn/end":
            batches.append([])
    return [batch for batch in batches if batch]


@contextlib.contextmanager
def _no_fsync() -> Iterator[None]:
    original = os.fsync
    os.fsync = lambda fd: None
    try:
        yield
    finally:
        os.fsync = original


def _store_bytes(root: Path) -> int:
    return sum(
        path.stat().st_size for path in root.rglob("*") if path.is_file() and path.suffix != ".lock"
    )


def write_layouts(root: Path, session: Session) -> dict[str, Path]:
    """Store `session` once per layout, in checkpoint batches; return each layout's root."""
    batches = checkpoint_batches(list(session.events))
    roots: dict[str, Path] = {}
    for index, (label, factory) in enumerate(LAYOUTS.items()):
        layout_root = root / f"layout-{index}"
        layout_root.mkdir()
        store = factory(layout_root)
        quiet = _no_fsync() if isinstance(store, JsonlStore) else contextlib.nullcontext()
        with quiet:
            store.backend.materialize(session.header, batches[0])
            for batch in batches[1:]:
                store.backend.append(session.id, batch)
        _close(store)
        roots[label] = layout_root
    return roots


# --------------------------------------------------------------------------- append throughput


async def _append_run(label: str, root: Path, steps: int) -> tuple[float, float, float]:
    """Run scenario S on one layout; return (events/s, ms/step, writer fsyncs per step)."""
    workspace = root / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    store = LAYOUTS[label](root)
    model = sc.EncodingModel(sc.step_script(steps))
    try:
        loop = start_session(
            SessionSetup(
                store=store,
                model=model,
                tools=sc.NOOP_TOOLS,
                cwd=workspace,
                config=LoopConfig(max_steps=steps + 1),
            )
        )
        writer = loop.durability
        started = time.perf_counter()
        result = await loop.run_turn("Run the benchmark task.")
        elapsed = time.perf_counter() - started
        loop.close()
    finally:
        await model.aclose()
        _close(store)
    if result.kind != "completed":
        raise RuntimeError(f"scenario S on {label} ended {result.reason}")
    fsyncs = writer.statistics().fsync_count if isinstance(writer, SessionWriter) else 0
    return loop.session.seq / elapsed, elapsed * 1000 / steps, fsyncs / steps


# --------------------------------------------------------------------------- load


def _load_once(label: str, pristine: Path, session_id: str) -> float:
    """Load the session from a copy of `pristine` with a fresh store; return ms."""
    with tempfile.TemporaryDirectory(prefix="duraloop-bench-st-") as tmp:
        root = Path(tmp) / "copy"
        shutil.copytree(pristine, root)
        store = LAYOUTS[label](root)
        try:
            started = time.perf_counter()
            loaded = store.load(session_id)
            Session(session_id, seed=loaded.events, header=loaded.header)
            elapsed = time.perf_counter() - started
        finally:
            _close(store)
    if loaded.repair.repaired:
        raise RuntimeError(f"{label}: the stored session needed a repair")
    return elapsed * 1000


# --------------------------------------------------------------------------- report


def measure(runs: int, events: int, steps: int) -> list[sc.Figure]:
    """Build, measure and print the three tables; return summary figures."""
    started = time.perf_counter()
    rows_size: list[Sequence[Any]] = []
    rows_load: list[Sequence[Any]] = []
    rows_append: list[Sequence[Any]] = []
    summary: list[sc.Figure] = []
    with tempfile.TemporaryDirectory(prefix="duraloop-bench-sb-") as build:
        session = anyio.run(_generate, Path(build), events)
        count = session.seq
        roots = write_layouts(Path(build), session)
        batch_count = len(checkpoint_batches(list(session.events)))
        print(
            f"  generated and stored {count} events ({batch_count} batches) in "
            f"{time.perf_counter() - started:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        raw_bytes = _store_bytes(roots["JSONL raw, unpacked"])
        for label, root in roots.items():
            size = _store_bytes(root)
            rows_size.append(
                (label, f"{size / 1e6:.2f}", f"{size / count:.1f}", f"{raw_bytes / size:.2f}x")
            )
            loads = [_load_once(label, root, session.id) for _ in range(runs)]
            rows_load.append((label, sc.median_of(loads)))
            summary.append(
                sc.Figure("ST", f"bytes/event, {label}", f"{size / count:.1f}", "(info)", None)
            )
            summary.append(
                sc.Figure(
                    "ST",
                    f"load+seed {count // 1000}k events, {label}",
                    sc.median_of(loads) + " ms",
                    "(info)",
                    None,
                )
            )
            print(
                f"  {label}: {size / count:.1f} B/event, "
                f"load {sorted(loads)[len(loads) // 2]:.0f} ms",
                file=sys.stderr,
                flush=True,
            )
    for label in APPEND_LAYOUTS:
        figures = []
        for _ in range(runs):
            with tempfile.TemporaryDirectory(prefix="duraloop-bench-sa-") as tmp:
                figures.append(anyio.run(_append_run, label, Path(tmp), steps))
        rate, ms, fsyncs = ([f[i] for f in figures] for i in range(3))
        rate_text = f"{sorted(rate)[len(rate) // 2]:.0f} ({min(rate):.0f}-{max(rate):.0f})"
        rows_append.append((label, rate_text, sc.median_of(ms), sc.median_of(fsyncs)))
        summary.append(
            sc.Figure("ST", f"append events/s, loop N={steps}, {label}", rate_text, "(info)", None)
        )
        print(
            f"  {label}: {sorted(rate)[len(rate) // 2]:.0f} events/s", file=sys.stderr, flush=True
        )
    print(f"Storage: {count}-event tool-heavy session ({batch_count} checkpoint batches)")
    print(sc.table(("layout", "MB", "bytes/event", "vs raw unpacked"), rows_size))
    print()
    print(f"Append with the real loop: scenario S, N={steps} steps x 3 tool calls, durable")
    print(sc.table(("layout", "events/s", "ms/step", "fsyncs/step (writer)"), rows_append))
    print()
    print(f"Load {count} events from a fresh store: store.load + Session(seed) (ms)")
    print(sc.table(("layout", "load + seed ms"), rows_load))
    print(f"\n  ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return summary


def main(argv: list[str] | None = None) -> list[sc.Figure]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=sc.RUNS)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args(argv)
    return measure(args.runs, args.events, args.steps)


if __name__ == "__main__":
    main()
