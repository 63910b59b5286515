"""Run scenarios S, R and P (README.md#performance), storage, start-up, the viewer; a table.

    /work/venv/bin/python benchmarks/run_all.py [--runs 3] [--quick]

`--quick` uses N = 10 / 100 / 300 for S and a 30k-event log for R and the storage
comparison (a smoke run; the figures then do not correspond to the targets' sizes). Each
scenario's own tables are printed as it finishes; progress goes to stderr. Takes ~3-4
minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import platform
import time

import _scenario as sc
import bench_parallel
import bench_resume
import bench_startup
import bench_steps
import bench_storage
import bench_view


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=sc.RUNS)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs = ["--runs", str(args.runs)]
    started = time.perf_counter()
    figures: list[sc.Figure] = []
    print(
        f"duraloop benchmarks on {platform.python_implementation()} {platform.python_version()}, "
        f"{platform.machine()}; median of {args.runs} runs (min-max)\n"
    )
    sizes = "10,100,300" if args.quick else "10,100,1000"
    figures += bench_steps.main(["--sizes", sizes, *runs])
    print()
    figures += bench_resume.main([*runs, "--events", "30000" if args.quick else "100000"])
    print()
    figures += bench_parallel.main(runs)
    print()
    figures += bench_storage.main([*runs, "--events", "30000" if args.quick else "100000"])
    print()
    figures += bench_startup.main(["--runs", "5" if args.quick else str(bench_startup.RUNS)])
    print()
    figures += bench_view.main([*runs, "--events", "30000" if args.quick else "100000"])
    print()
    elapsed = time.perf_counter() - started
    passed = sum(1 for f in figures if f.passed)
    judged = sum(1 for f in figures if f.passed is not None)
    print(f"SUMMARY ({passed}/{judged} targets met; {elapsed:.0f} s)")
    print(sc.figures_table(figures))


if __name__ == "__main__":
    main()
