"""The peers side by side: OpenAI Agents SDK, LangGraph, pydantic-ai and duraloop, one table.

    python benchmarks/peers/run.py --setup [VENV]     # create the peers' venv (once)
    python benchmarks/peers/run.py [--runs 3] [--quick] [--python VENV/bin/python]

Every measurement runs in a fresh child process (`child.py`) of the peers' venv, so no
framework's imports weigh on another's figures; each peer's run is followed by a duraloop
run of the same scenario (interleaved, so a busy machine weighs on both alike). Scenarios
(see README.md beside this file): S = ms per step at N = 10 / 100 / 1000 (`--quick`: 300),
fsyncs (counted by strace, when installed) and bytes on disk at the largest N; R = a new
process resumes the 1000-step session until the model receives the next request (after
imports), and the import of the framework; P = 30 tools x 100 ms with a cap of 10 (tool
span) and 10 steps of 30 x 0 ms tools (per call). Figures are median (min-max) over runs.

    python benchmarks/peers/run.py --store postgres [--runs 3] [--sizes 100,1000]

runs only scenario S with every framework's PostgreSQL store on one server
(`PEERS_POSTGRES_URL`, default `postgresql://127.0.0.1:5432/test`; a fresh schema per run,
dropped after, see `_pg.py`): LangGraph's `PostgresSaver`, the Agents SDK's
`SQLAlchemySession` (async engine over psycopg 3) and duraloop's `PostgresStore`.
pydantic-ai has no store of its own and sits this variant out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WORKTREE = HERE.parent.parent
DEFAULT_VENV = Path(tempfile.gettempdir()) / "duraloop-peers-venv"
PEERS = {"openai_agents": "OpenAI Agents", "langgraph": "LangGraph", "pydantic_ai": "pydantic-ai"}
DURALOOP = "duraloop"
R_STEPS = 1000
DISTS = ("openai-agents", "langgraph", "langgraph-checkpoint-sqlite", "pydantic-ai-slim")
PG_PEERS = ("openai_agents", "langgraph")
"""The peers with a PostgreSQL store (the `--store postgres` variant)."""
PG_DISTS = ("langgraph-checkpoint-postgres", "sqlalchemy", "psycopg")


def setup(venv: Path) -> Path:
    """Create `venv` with the pinned peers and duraloop from this worktree; return its python."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    requirements = HERE / "requirements.txt"
    duraloop = f"{WORKTREE}[postgres]"
    pip = [str(python), "-m", "pip", "install", "-q", "-r", str(requirements), "-e", duraloop]
    subprocess.run(pip, check=True)
    subprocess.run([str(python), "-m", "pip", "check"], check=True)
    return python


def child(python: str, driver: str, scenario: str, root: Path, size: int = 0) -> dict[str, Any]:
    """Run one measurement in a new process; return its JSON (plus `fsyncs` under strace)."""
    command = [python, str(HERE / "child.py"), driver, scenario, str(root), str(size)]
    trace = root / "strace.txt"
    strace = shutil.which("strace")
    if scenario == "steps" and strace is not None:
        filters = ["-f", "-c", "--seccomp-bpf", "-e", "trace=fsync,fdatasync", "-o", str(trace)]
        command = [strace, *filters, *command]
    out = subprocess.run(command, check=False, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{driver} {scenario} failed:\n{out.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    if trace.exists():
        rows = re.findall(
            r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?f(?:data)?sync$",
            trace.read_text(),
            re.MULTILINE,
        )
        result["fsyncs"] = sum(int(n) for n in rows)
    return result


class Figures:
    """Values per (figure, driver), in the order figures were first recorded."""

    def __init__(self) -> None:
        self.values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))

    def add(self, figure: str, driver: str, value: float) -> None:
        self.values[figure][driver].append(value)

    def median(self, figure: str, driver: str) -> float | None:
        values = self.values[figure].get(driver)
        return statistics.median(values) if values else None


def measure(python: str, drivers: list[str], sizes: list[int], runs: int) -> Figures:
    """Run every scenario `runs` times, each peer run followed by a duraloop run."""
    figures = Figures()
    largest = max(sizes)
    with tempfile.TemporaryDirectory(prefix="duraloop-peers-") as tmp:
        work = Path(tmp)
        pristine: dict[str, Path] = {}
        for driver in [*drivers, DURALOOP]:  # the R sessions, built once (not timed)
            pristine[driver] = work / f"r-{driver}"
            pristine[driver].mkdir()
            child(python, driver, "build", pristine[driver], R_STEPS)
        for run in range(1, runs + 1):
            for peer in drivers:
                for driver in (peer, DURALOOP):
                    started = time.perf_counter()
                    one_run(python, driver, figures, work, pristine[driver], sizes, largest)
                    elapsed = time.perf_counter() - started
                    print(f"  run {run}: {driver} done in {elapsed:.0f} s", file=sys.stderr)
            print(f"after run {run}:\n{render(figures, drivers)}", file=sys.stderr, flush=True)
    return figures


def measure_postgres(python: str, drivers: list[str], sizes: list[int], runs: int) -> Figures:
    """Scenario S on PostgreSQL, `runs` times, each peer's sizes followed by duraloop's."""
    figures = Figures()
    largest = max(sizes)
    with tempfile.TemporaryDirectory(prefix="duraloop-peers-pg-") as tmp:
        for run in range(1, runs + 1):
            for peer in drivers:
                for driver in (peer, DURALOOP):
                    started = time.perf_counter()
                    for n in sizes:
                        with tempfile.TemporaryDirectory(dir=tmp) as root:
                            result = child(python, driver, "pgsteps", Path(root), n)
                        figures.add(
                            f"S (PostgreSQL): ms/step at N = {n}", driver, result["ms_per_step"]
                        )
                        if n == largest:
                            figures.add(
                                f"S (PostgreSQL): CPU ms/step at N = {n}",
                                driver,
                                result["cpu_ms_per_step"],
                            )
                            figures.add(
                                f"S (PostgreSQL): MB stored at N = {n}",
                                driver,
                                result["disk_bytes"] / 1e6,
                            )
                    elapsed = time.perf_counter() - started
                    print(f"  run {run}: {driver} done in {elapsed:.0f} s", file=sys.stderr)
            print(f"after run {run}:\n{render(figures, drivers)}", file=sys.stderr, flush=True)
    return figures


def one_run(
    python: str,
    driver: str,
    figures: Figures,
    work: Path,
    pristine: Path,
    sizes: list[int],
    largest: int,
) -> None:
    """Every scenario once for `driver`, each in fresh processes and fresh directories."""
    figures.add(
        "import of the framework (ms)", driver, child(python, driver, "import", work)["import_ms"]
    )
    for n in sizes:
        with tempfile.TemporaryDirectory(dir=work) as root:
            result = child(python, driver, "steps", Path(root), n)
        figures.add(f"S: ms/step at N = {n}", driver, result["ms_per_step"])
        if n == largest:
            figures.add(f"S: CPU ms/step at N = {n}", driver, result["cpu_ms_per_step"])
            if "fsyncs" in result:
                figures.add(f"S: fsyncs at N = {n}", driver, result["fsyncs"])
            figures.add(f"S: MB on disk at N = {n}", driver, result["disk_bytes"] / 1e6)
            figures.add(
                f"S: last request at N = {n} (kB)", driver, result["last_request_bytes"] / 1e3
            )
    with tempfile.TemporaryDirectory(dir=work) as root:
        copy = Path(root) / "copy"
        shutil.copytree(pristine, copy)
        result = child(python, driver, "resume", copy)
    figures.add(f"R: resume {R_STEPS} steps -> request (ms)", driver, result["resume_ms"])
    if "resume_without_snapshot_ms" in result:  # duraloop: the same, its snapshot removed
        figures.add(
            "R: same, duraloop without its snapshot (ms)",
            driver,
            result["resume_without_snapshot_ms"],
        )
    figures.add("R: that request (kB)", driver, result["request_bytes"] / 1e3)
    with tempfile.TemporaryDirectory(dir=work) as root:
        result = child(python, driver, "parallel", Path(root))
    figures.add("P: 30 x 100 ms, cap 10: tool span (ms)", driver, result["span_ms"])
    figures.add("P: 10 x 30 x 0 ms tools: per call (us)", driver, result["per_call_us"])


def number(value: float) -> str:
    """Format a figure: integers from 100 on, one decimal from 10, else 3 significant digits."""
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def cell(values: list[float] | None) -> str:
    """Format `median (min-max)`, or `-`."""
    if not values:
        return "-"
    median = number(statistics.median(values))
    if len(values) == 1:
        return median
    return f"{median} ({number(min(values))}-{number(max(values))})"


def render(figures: Figures, drivers: list[str]) -> str:
    """Render the one table: figures x (peers, duraloop, peer/duraloop ratios)."""
    headers = ["figure", *(PEERS[d] for d in drivers), "duraloop"]
    headers += [f"{PEERS[d]}/duraloop" for d in drivers]
    rows = []
    for figure, by_driver in figures.values.items():
        row = [figure, *(cell(by_driver.get(d)) for d in drivers), cell(by_driver.get(DURALOOP))]
        ours = figures.median(figure, DURALOOP)
        for d in drivers:
            theirs = figures.median(figure, d)
            row.append(f"{theirs / ours:.2f}x" if theirs is not None and ours else "-")
        rows.append(row)
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = [
        " | ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True))
        for r in [headers, *rows]
    ]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def versions(python: str, dists: tuple[str, ...] = DISTS) -> str:
    """Return the installed versions of the peers in the venv of `python`."""
    code = (
        "import importlib.metadata as m, sys\n"
        f"print(', '.join(f'{{d}} {{m.version(d)}}' for d in {dists!r}))"
    )
    return subprocess.run(
        [python, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup", nargs="?", const=str(DEFAULT_VENV), metavar="VENV")
    parser.add_argument("--python", default=str(DEFAULT_VENV / "bin" / "python"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="S at N = 10 / 100 / 300")
    parser.add_argument("--sizes", help="S sizes, comma-separated (default 10,100,1000)")
    parser.add_argument("--peers", help="a subset of " + ",".join(PEERS))
    parser.add_argument(
        "--store",
        choices=("disk", "postgres"),
        default="disk",
        help="disk: scenarios S, R, P on each framework's own on-disk store (the default); "
        "postgres: scenario S on each one's PostgreSQL store (PEERS_POSTGRES_URL)",
    )
    args = parser.parse_args(argv)
    if args.setup:
        print(f"peers' python: {setup(Path(args.setup))}")
        return
    if not Path(args.python).exists():
        raise SystemExit(f"no {args.python}: run `python {sys.argv[0]} --setup` first")
    postgres = args.store == "postgres"
    default_sizes = "100,1000" if postgres else "10,100,1000"
    sizes = [
        int(x) for x in (args.sizes or ("10,100,300" if args.quick else default_sizes)).split(",")
    ]
    drivers = [d for d in (args.peers or ",".join(PG_PEERS if postgres else PEERS)).split(",") if d]
    if postgres and set(drivers) - set(PG_PEERS):
        raise SystemExit(
            f"--store postgres runs only {', '.join(PG_PEERS)} (pydantic-ai has no store)"
        )
    load_before = os.getloadavg()
    started = time.perf_counter()
    if postgres:
        figures = measure_postgres(args.python, drivers, sizes, args.runs)
    else:
        figures = measure(args.python, drivers, sizes, args.runs)
    elapsed = time.perf_counter() - started
    load_after = os.getloadavg()
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    python_version = subprocess.run(
        [args.python, "-c", "import platform; print(platform.python_version())"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    print(
        f"Peers side by side, {now}: {os.cpu_count()} CPUs ({platform.machine()}), Python "
        f"{python_version}, load average {load_before[0]:.2f} before / {load_after[0]:.2f} after "
        f"({elapsed / 60:.0f} min); median (min-max) of {args.runs} runs per peer, duraloop "
        f"after each peer's run ({len(drivers) * args.runs} runs)"
    )
    print(f"Versions: {versions(args.python)}, duraloop from {WORKTREE}")
    if postgres:
        server = subprocess.run(
            [args.python, "-c", "import _pg; print(_pg.server())"],
            check=True,
            capture_output=True,
            text=True,
            cwd=HERE,
        ).stdout.strip()
        print(f"PostgreSQL: {versions(args.python, PG_DISTS)}; server {server}")
    print(render(figures, drivers))


if __name__ == "__main__":
    main()
