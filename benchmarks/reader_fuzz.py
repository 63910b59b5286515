"""The full reader fuzz (issue 9, D13): damaged logs in every encoding through every reader path.

Runs the hypothesis fuzzers of `tests/store/test_reader_fuzz.py` with many more examples
than CI does (`DURALOOP_FUZZ_EXAMPLES`, default here 1000 per test and encoding) and prints
what they did: inputs tried per encoding, reader outcomes (`ok` or the typed error class,
per reader path), and the untyped exceptions, which must be 0 (the script exits 1 otherwise,
after printing the smallest failing input hypothesis found).

    python benchmarks/reader_fuzz.py [--examples N]

The fuzz itself (mutations, reader paths, the allowed errors) is documented in the test
module; this script only drives it and counts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--examples", type=int, default=1000, help="hypothesis examples per test and encoding"
    )
    args = parser.parse_args()
    os.environ["DURALOOP_FUZZ_EXAMPLES"] = str(args.examples)
    sys.path.insert(0, str(ROOT / "tests"))
    import logging

    logging.disable(logging.WARNING)  # every repaired tail logs a warning
    from store import test_reader_fuzz as fuzz

    runs = [
        (
            f"prefix-{compression}",
            fuzz.test_damaged_log_loads_a_valid_prefix_or_raises_corruption,
            {"compression": compression},
        )
        for compression in ("none", "zstd")
    ] + [
        (
            f"readers-{encoding}",
            fuzz.test_every_reader_path_raises_only_typed_errors_on_damaged_input,
            {"encoding": encoding},
        )
        for encoding in ("none", "zstd", "sqlite")
    ]
    untyped = 0
    started = time.perf_counter()
    for name, test, kwargs in runs:
        begun = time.perf_counter()
        try:
            test(**kwargs)
        except Exception:  # noqa: BLE001 - the failure is the finding: print it, count it
            untyped += 1
            print(f"{name}: FAILED")
            traceback.print_exc()
        print(
            f"{name}: {fuzz.INPUTS[name]} inputs in {time.perf_counter() - begun:.1f} s", flush=True
        )
    print(f"\ninputs tried: {sum(fuzz.INPUTS.values())} in {time.perf_counter() - started:.1f} s")
    for encoding, count in sorted(fuzz.INPUTS.items()):
        print(f"  {encoding}: {count}")
    print("reader outcomes (path: ok or typed error class):")
    for outcome, count in sorted(fuzz.OUTCOMES.items()):
        print(f"  {outcome}: {count}")
    print(f"untyped exceptions: {untyped} (must be 0)")
    return 1 if untyped else 0


if __name__ == "__main__":
    raise SystemExit(main())
