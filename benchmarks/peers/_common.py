"""Shared by the peer drivers: the scenario's shape, a request clock, disk and JSON helpers.

Imports nothing outside the standard library, so a peer's child process loads only its own
framework (and never duraloop, whose figures come from `_duraloop.py`).
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CALLS_PER_STEP = 3
TOOL_NAMES = ("noop_read", "noop_list", "noop_stat")
PROMPT = "Run the benchmark task."
RESUME_PROMPT = "Continue with the next task."
FINAL_TEXT = "Done."
SYSTEM = "You are a benchmark agent. Call the tools you are given."
P_CALLS = 30
P_CAP = 10
P_NOOP_STEPS = 10


def step_calls(step: int) -> list[tuple[str, dict[str, int]]]:
    """Return the (tool name, arguments) of the 3 calls of tool step `step` (1-based)."""
    return [(TOOL_NAMES[k % len(TOOL_NAMES)], {"i": step}) for k in range(CALLS_PER_STEP)]


def call_id(step: int, k: int) -> str:
    """Return a stable, unique tool-call id (the shape providers use)."""
    return f"call_{step:05d}_{k}"


@dataclass
class Clock:
    """perf_counter marks the scripted model takes: when each request arrives and is answered.

    Attributes:
        requests: perf_counter() when each request reached the model (after it was encoded).
        responses: perf_counter() when each scripted response was handed back.
        request_bytes: size of the last encoded request body.
    """

    requests: list[float] = field(default_factory=list)
    responses: list[float] = field(default_factory=list)
    request_bytes: int = 0

    def spans_ms(self) -> list[float]:
        """Return, per response that got a next request, response -> next request in ms."""
        return [
            (self.requests[i + 1] - self.responses[i]) * 1000
            for i in range(min(len(self.responses), len(self.requests) - 1))
        ]


def dumps(value: Any) -> bytes:
    """JSON-encode a request body as a provider SDK would send it (compact, UTF-8)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_default).encode()


def _default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        return dump(mode="json", exclude_none=True)
    raise TypeError(f"cannot encode {type(value).__name__}")


def disk_bytes(root: Path) -> int:
    """Return the bytes of every file under `root` (SQLite db, -wal, -journal, ...)."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def steps_result(
    steps: int, seconds: float, cpu: float, clock: Clock, root: Path
) -> dict[str, Any]:
    """Return scenario S's figures of one run as the JSON the parent reads."""
    return {
        "ms_per_step": seconds * 1000 / steps,
        "cpu_ms_per_step": cpu * 1000 / steps,
        "requests": len(clock.requests),
        "last_request_bytes": clock.request_bytes,
        "disk_bytes": disk_bytes(root),
    }


def parallel_result(span_ms: float, noop_spans_ms: list[float]) -> dict[str, Any]:
    """Return scenario P's figures: the 30 x 100 ms span and the 0 ms per-call cost in µs."""
    return {
        "span_ms": span_ms,
        "per_call_us": statistics.median(noop_spans_ms) * 1000 / P_CALLS,
    }


def timed() -> tuple[float, float]:
    """Return (perf_counter, process_time) now."""
    return time.perf_counter(), time.process_time()
