"""Scenario S (README.md#performance): ms/step at N = 10 / 100 / 1000, bytes and fsyncs at 1000.

One turn of N steps (each one model response with 3 no-op tool calls) plus a final text
step, durable JSONL store, whole history built and JSON-encoded for every request (see
`_scenario.py`). Each N runs 3 times in a fresh temp dir; figures are median (min-max).

    /work/venv/bin/python benchmarks/bench_steps.py [--sizes 10,100,1000] [--runs 3]

Figures: wall ms per step (turn time / N), CPU ms per step (process time, less sensitive to
a busy machine), ms per step over the last 10% of steps (exposes growth), the ratio of
per-step cost at the largest N to the smallest, bytes on disk, fsyncs (writer statistics
and a process-wide `os.fsync` count) and fsyncs per step. Per step is judged on the marginal
cost ((F(N_max) - F(N_min)) / (N_max - N_min)); the fixed part (creating the file and
fsyncing its directory, the final text step, `turn/end`) is shown next to it. The largest N
also runs with the zstd encoding (one frame per durable batch) for its bytes on disk and
ms per step.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import _scenario as sc

TARGET_MS = 2.0
TARGET_RATIO = 2.0
TARGET_BYTES = 500_000
TARGET_FSYNCS_PER_STEP = 2.0


def measure(
    sizes: list[int], runs: int, *, estimate_tokens: bool = False
) -> tuple[dict[int, list[sc.StepRun]], list[int]]:
    """Run every size `runs` times (raw), and the largest N with zstd; return both."""
    results: dict[int, list[sc.StepRun]] = {n: [] for n in sizes}
    zstd: list[sc.StepRun] = []
    largest = max(sizes)
    for _ in range(runs):
        for n in sizes:
            with tempfile.TemporaryDirectory(prefix="duraloop-bench-s-") as tmp:
                run = sc.run_steps_sync(n, Path(tmp), estimate_tokens=estimate_tokens)
            results[n].append(run)
            print(f"  N={n}: {run.ms_per_step:.2f} ms/step", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="duraloop-bench-s-") as tmp:
            run = sc.run_steps_sync(
                largest, Path(tmp), estimate_tokens=estimate_tokens, compression="zstd"
            )
        zstd.append(run)
        print(
            f"  N={largest} zstd: {run.ms_per_step:.2f} ms/step, {run.file_bytes} B",
            file=sys.stderr,
            flush=True,
        )
    return results, zstd


def report(results: dict[int, list[sc.StepRun]], zstd: list[sc.StepRun]) -> list[sc.Figure]:
    """Print the scenario-S tables and return the summary figures."""
    sizes = sorted(results)
    rows = []
    for n in sizes:
        runs = results[n]
        rows.append(
            (
                n,
                sc.median_of([r.ms_per_step for r in runs]),
                sc.median_of([r.cpu_ms_per_step for r in runs]),
                sc.median_of([r.tail_ms_per_step for r in runs]),
                sc.median_of([r.fsyncs_writer / n for r in runs]),
                sc.median_of([r.file_bytes / 1e6 for r in runs]),
                runs[0].events,
                f"{runs[0].last_request_bytes / 1e3:.0f} kB",
            )
        )
    print(
        "Scenario S: one turn of N steps x 3 no-op tool calls, durable JSONL, request encoded "
        "each step"
    )
    print(
        sc.table(
            (
                "N",
                "ms/step (wall)",
                "ms/step (CPU)",
                "ms/step last 10%",
                "fsyncs/step",
                "MB on disk",
                "events",
                "last request",
            ),
            rows,
        )
    )
    small, large = sizes[0], sizes[-1]
    big = results[large]
    ratio_wall = statistics.median(r.ms_per_step for r in big) / statistics.median(
        r.ms_per_step for r in results[small]
    )
    ratio_cpu = statistics.median(r.cpu_ms_per_step for r in big) / statistics.median(
        r.cpu_ms_per_step for r in results[small]
    )
    ratio_tail = statistics.median(r.tail_ms_per_step for r in big) / statistics.median(
        r.tail_ms_per_step for r in results[small]
    )
    ms = statistics.median(r.ms_per_step for r in big)
    fsyncs = statistics.median(r.fsyncs_writer for r in big)
    fsyncs_os = statistics.median(r.fsyncs_os for r in big)
    fsyncs_small = statistics.median(r.fsyncs_writer for r in results[small])
    marginal = (fsyncs - fsyncs_small) / (large - small) if large > small else fsyncs / large
    fixed = fsyncs - marginal * large
    print()
    summary = [
        sc.Figure(
            "S",
            f"ms/step at N={large}",
            sc.median_of([r.ms_per_step for r in big]),
            f"<= {TARGET_MS} (ratio {ms / TARGET_MS:.2f}x target)",
            ms <= TARGET_MS,
        ),
        sc.Figure(
            "S",
            f"ratio per-step N={large}/N={small} (wall)",
            f"{ratio_wall:.2f}",
            f"<= {TARGET_RATIO}",
            ratio_wall <= TARGET_RATIO,
        ),
        sc.Figure(
            "S",
            f"ratio per-step N={large}/N={small} (CPU)",
            f"{ratio_cpu:.2f}",
            f"<= {TARGET_RATIO}",
            None,
        ),
        sc.Figure(
            "S",
            f"ratio last-10% step N={large}/N={small}",
            f"{ratio_tail:.2f}",
            f"<= {TARGET_RATIO}",
            None,
        ),
        sc.Figure(
            "S",
            f"bytes on disk at N={large} (raw JSONL, info)",
            sc.median_of([r.file_bytes / 1e6 for r in big]) + " MB",
            "(raw is the readable default)",
            None,
        ),
        sc.Figure(
            "S",
            f"bytes on disk at N={large} (zstd + packed rows)",
            sc.median_of([r.file_bytes / 1e6 for r in zstd]) + " MB",
            f"<= {TARGET_BYTES / 1e6:g} MB (ratio "
            f"{statistics.median(r.file_bytes for r in zstd) / TARGET_BYTES:.2f}x target)",
            statistics.median(r.file_bytes for r in zstd) <= TARGET_BYTES,
        ),
        sc.Figure(
            "S",
            f"  + its snapshot beside it at N={large} (zstd body)",
            sc.median_of([r.snapshot_bytes / 1e6 for r in zstd]) + " MB",
            "(a cache; info)",
            None,
        ),
        sc.Figure(
            "S",
            f"ms/step at N={large} (zstd)",
            sc.median_of([r.ms_per_step for r in zstd]),
            f"<= {TARGET_MS}",
            statistics.median(r.ms_per_step for r in zstd) <= TARGET_MS,
        ),
        sc.Figure(
            "S",
            f"fsyncs at N={large} (writer; os.fsync {fsyncs_os:.0f})",
            f"{fsyncs:.0f} = {marginal:.3f}/step + {fixed:.0f} fixed",
            "(info)",
            None,
        ),
        sc.Figure(
            "S",
            f"fsyncs per step (marginal, N={small}->{large})",
            f"{marginal:.3f}",
            f"<= {TARGET_FSYNCS_PER_STEP}",
            marginal <= TARGET_FSYNCS_PER_STEP,
        ),
    ]
    print(sc.figures_table(summary))
    return summary


def main(argv: list[str] | None = None) -> list[sc.Figure]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--runs", type=int, default=sc.RUNS)
    parser.add_argument(
        "--with-token-estimate",
        action="store_true",
        help="keep ScriptedModel's O(history) input-token estimate (stubbed by default)",
    )
    args = parser.parse_args(argv)
    sizes = sorted(int(x) for x in args.sizes.split(","))
    results, zstd = measure(sizes, args.runs, estimate_tokens=args.with_token_estimate)
    return report(results, zstd)


if __name__ == "__main__":
    main()
