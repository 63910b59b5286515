"""Start-up: `import duraloop`, `import duraloop.cli`, `duraloop --help`, `duraloop ls`.

Each figure is the wall time of a fresh interpreter (`python -c ...` or `python -m duraloop
...`) from spawn to exit, median of `--runs` runs with every command run in turn (interleaved,
so load from other processes spreads over all of them), min-max in brackets. The CPU time of
the child (user + sys) is printed beside it: on a shared machine it moves less than the wall
time. `ls` lists a JSONL store holding one session.

Bytecode: the children write and read `.pyc` files under a temporary `PYTHONPYCACHEPREFIX`
(warmed by one untimed run of each command), as an installed package runs, even when the
caller sets `PYTHONDONTWRITEBYTECODE` (without `.pyc` every module is compiled at each start).

The floors are printed too: the bare interpreter (`python -c pass`) and typer (`import
typer`), which `--help` cannot avoid (its help is click's plain help, docs/architecture.md#start-up:
typer's rich help renderer is never loaded). `--against DIR` runs
the same commands with `PYTHONPATH=DIR` (another checkout's `src/`) interleaved, to compare.

    /work/venv/bin/python benchmarks/bench_startup.py [--runs 15] [--against OLD/src]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _scenario as sc

RUNS = 15
TARGET_IMPORT_MS = 100.0
TARGET_HELP_MS = 200.0

FLOORS: dict[str, list[str]] = {
    "python -c pass (interpreter)": ["-c", "pass"],
    "import typer (help floor)": ["-c", "import typer"],
}


def commands(store: Path) -> dict[str, list[str]]:
    """The timed commands: label -> interpreter arguments."""
    return {
        "import duraloop": ["-c", "import duraloop"],
        "import duraloop.cli": ["-c", "import duraloop.cli"],
        "duraloop --help": ["-m", "duraloop", "--help"],
        "duraloop ls (1 session)": ["-m", "duraloop", "ls", "--store", str(store)],
    }


def child_env(pycache: Path, pythonpath: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return env


def run_once(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run one fresh interpreter; return (wall ms, child CPU ms)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        timeout=120,
    )
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    return wall, cpu


def make_store(root: Path) -> None:
    """Write one finished session (a scripted one-line reply) into a JSONL store at `root`."""
    import anyio

    from duraloop.llm import ScriptedModel
    from duraloop.loop import SessionSetup, start_session
    from duraloop.store import JsonlStore

    workspace = root.parent / "ws"
    workspace.mkdir(exist_ok=True)
    loop = start_session(
        SessionSetup(store=JsonlStore(root), model=ScriptedModel([{"text": "Hi."}]), cwd=workspace)
    )
    with loop:
        anyio.run(loop.run_turn, "Say hi.")


def measure(runs: int, against: str | None) -> list[sc.Figure]:
    """Time every command `runs` times, interleaved; print tables and return figures."""
    with tempfile.TemporaryDirectory(prefix="duraloop-bench-startup-") as tmp:
        store = Path(tmp) / "store"
        make_store(store)
        trees: dict[str, str | None] = {"": None}
        if against is not None:
            trees = {"": None, " [against]": against}
        envs = {
            tree: child_env(Path(tmp) / f"pyc{i}", p) for i, (tree, p) in enumerate(trees.items())
        }
        timed = {**FLOORS, **commands(store)}
        jobs = [(label + tree, args, envs[tree]) for tree in trees for label, args in timed.items()]
        for _, args, env in jobs:
            run_once(args, env)  # warm the .pyc cache
        wall: dict[str, list[float]] = {label: [] for label, _, _ in jobs}
        cpu: dict[str, list[float]] = {label: [] for label, _, _ in jobs}
        for k in range(runs):
            for label, args, env in jobs:
                w, c = run_once(args, env)
                wall[label].append(w)
                cpu[label].append(c)
            print(f"  run {k + 1}/{runs}", file=sys.stderr, flush=True)
    load = os.getloadavg()
    print(f"Start-up: fresh interpreter per run, median of {runs} (load {load[0]:.2f})")
    rows = [(label, sc.median_of(wall[label]), sc.median_of(cpu[label])) for label in wall]
    print(sc.table(("command", "wall ms", "child CPU ms"), rows))
    print()
    targets = {"import duraloop": TARGET_IMPORT_MS, "duraloop --help": TARGET_HELP_MS}
    figures = []
    for label in wall:
        if label.endswith(" [against]"):
            continue
        ms = statistics.median(wall[label])
        target = targets.get(label)
        figures.append(
            sc.Figure(
                "startup",
                label,
                sc.median_of(wall[label]) + " ms",
                f"<= {target:.0f} ms" if target is not None else "-",
                ms <= target if target is not None else None,
            )
        )
    print(sc.figures_table(figures))
    return figures


def main(argv: list[str] | None = None) -> list[sc.Figure]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--against", help="another checkout's src/, timed interleaved")
    args = parser.parse_args(argv)
    return measure(args.runs, args.against)


if __name__ == "__main__":
    main()
