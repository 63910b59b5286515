"""Idempotency keys across a real SIGKILL: the re-run uses the key the killed body had.

See docs/recovery.md#idempotency-keys, docs/recovery.md#re-running-outcome-unknown-calls.
The first child dies inside the body of an idempotent call (its `tool/call` durable, no
result); a second child resumes with `retry_unknown_calls()`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from duraloop.log import idempotency_key
from duraloop.log.vocabulary import RETRY_OF
from duraloop.store import JsonlStore

CHILD = Path(__file__).with_name("_idem_child.py")
TIMEOUT = 60.0


def _env() -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[1] / "src")
    return {**os.environ, "PYTHONPATH": src, "PYTHONUNBUFFERED": "1"}


def test_key_is_equal_across_sigkill_and_a_rerun_records_the_link(tmp_path: Path) -> None:
    store, workspace = tmp_path / "store", tmp_path / "ws"
    workspace.mkdir()
    args = [str(store), str(workspace)]
    child = subprocess.Popen(
        [sys.executable, str(CHILD), "run", *args],
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()  # blocks until the body runs (or the child dies)
        assert line.startswith("BODY "), line
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(TIMEOUT)
        if child.stdout is not None:
            child.stdout.close()
    assert child.returncode == -signal.SIGKILL

    retry = subprocess.run(
        [sys.executable, str(CHILD), "retry", *args],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=TIMEOUT,
    )
    assert retry.returncode == 0, retry.stderr
    rerun_line = retry.stdout.strip().splitlines()[-1]
    _, call_seq, result_seq = rerun_line.split()

    key = idempotency_key("idem", "c1")
    assert (workspace / "keys").read_text().splitlines() == [key, key]
    events = JsonlStore(store).read("idem")[1]
    first = next(e for e in events if e.type == "tool/call")
    again = events[int(call_seq)]
    assert again.type == "tool/call" and again.data[RETRY_OF] == first.seq
    assert (again.data["callId"], again.data["arguments"]) == (
        "c1-rerun-1",
        first.data["arguments"],
    )
    replacement = events[int(result_seq)]
    assert replacement.source_event_seqs is not None and again.seq in replacement.source_event_seqs
    assert "charged 5" in str(replacement.data["message"]["content"])
