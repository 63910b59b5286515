"""Worker processes for the worker tests and the chaos benchmark (docs/workers.md).

`Cluster` starts `tests/_worker_child.py` processes on one schema, submits turns, and reads
the store, the submissions and the side-effect ledger; `check_cluster` asserts the laws every
run must keep: every submission done once, every session valid, no tool body run twice,
every interrupted turn answered `TOOL_OUTCOME_UNKNOWN` and continued, and no event written
by a fenced-out writer (each session's writer tokens never decrease along its log).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from store._postgres import POSTGRES_URL

CHILD = Path(__file__).with_name("_worker_child.py")
TAKEOVER_SECONDS = 3.0


class Cluster:
    """Worker processes on one fresh schema, and what the checks read."""

    def __init__(self, tmp: Path, schema: str) -> None:
        self.schema = schema
        self.ledger = tmp / "ledger.txt"
        self.workers: list[subprocess.Popen[bytes]] = []
        self.logs = tmp
        self._files: list[Any] = []
        self.concurrency = 4
        self.takeover_seconds = TAKEOVER_SECONDS

    def start(self, count: int, *, tool_seconds: float = 0.5) -> None:
        env = dict(
            os.environ,
            DURALOOP_TOOL_SECONDS=str(tool_seconds),
            DURALOOP_TAKEOVER_SECONDS=str(self.takeover_seconds),
        )
        for index in range(count):
            log = (self.logs / f"worker-{len(self.workers)}-{index}.log").open("wb")
            self._files.append(log)
            self.workers.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        str(CHILD),
                        POSTGRES_URL,
                        self.schema,
                        str(self.ledger),
                        str(self.concurrency),
                    ],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )

    def submit(self, session_id: str, prompt: str) -> str:
        from duraloop.worker import submit

        return submit(POSTGRES_URL, session_id, prompt, schema=self.schema)

    def rows(self, text: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(POSTGRES_URL) as connection:
            query = sql.SQL(text).format(s=sql.Identifier(self.schema))
            return connection.execute(query, params).fetchall()

    def done(self) -> int:
        """How many submissions are done."""
        return int(self.rows("SELECT count(*) FROM {s}.submissions WHERE state = 'done'")[0][0])

    def wait_done(self, count: int, timeout: float = 180) -> float:
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            done = self.rows("SELECT count(*) FROM {s}.submissions WHERE state = 'done'")[0][0]
            if done == count:
                return time.monotonic() - started
            time.sleep(0.2)
        states = self.rows("SELECT state, count(*) FROM {s}.submissions GROUP BY 1")
        raise AssertionError(f"submissions not done after {timeout} s: {states}")

    def ledger_lines(self) -> list[list[str]]:
        if not self.ledger.exists():
            return []
        return [line.split() for line in self.ledger.read_text().splitlines()]

    def first_start_pid(self, timeout: float = 120) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            starts = [line for line in self.ledger_lines() if line[0] == "start"]
            if starts:
                return int(starts[0][3])
            time.sleep(0.02)
        raise AssertionError("no tool body started")

    def stop(self) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGCONT)
                worker.terminate()
        for worker in self.workers:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
        for log in self._files:
            log.close()


def check_cluster(cluster: Cluster, sessions: list[str], turns: int) -> dict[str, int]:
    """The checks every scenario ends with; return counts for the assertions that follow."""
    from duraloop.store import PostgresStore
    from duraloop.testing import assert_log_valid

    done = cluster.rows("SELECT session_id, outcome FROM {s}.submissions ORDER BY ordinal")
    assert len(done) == len(sessions) * turns
    assert {outcome for _, outcome in done} <= {"completed", "continued"}
    starts = Counter(line[2] for line in cluster.ledger_lines() if line[0] == "start")
    assert [call for call, count in starts.items() if count > 1] == []  # no body ran twice
    counts = Counter[str]()
    with PostgresStore(POSTGRES_URL, schema=cluster.schema) as store:
        for session_id in sessions:
            check = store.check(session_id)
            assert check.valid, (session_id, check)
            events = store.backend.read(session_id).events
            from duraloop.log import Session

            assert_log_valid(Session(session_id, seed=events))
            ends = [e.data["reason"]["kind"] for e in events if e.type == "turn/end"]
            unknown = [
                e
                for e in events
                if e.type == "tool/result"
                and (e.data.get("error") or {}).get("code") == "TOOL_OUTCOME_UNKNOWN"
            ]
            tokens = [
                int(row[0])
                for row in cluster.rows(
                    "SELECT writer_token FROM {s}.events WHERE session_id = %s ORDER BY seq",
                    session_id,
                )
            ]
            assert tokens == sorted(tokens), (session_id, tokens)  # no fenced writer wrote
            counts["interrupted"] += ends.count("interrupted")
            counts["unknown"] += len(unknown)
            counts["turns"] += len(ends)
            # an interrupted turn and its continuation are one submission
            assert ends.count("completed") == turns
            assert len(ends) == turns + ends.count("interrupted")
    return dict(counts)


def run_chaos(
    cluster: Cluster,
    sessions: list[str],
    *,
    turns: int,
    workers: int,
    seconds: float,
    seed: int,
    tool_seconds: float = 1.0,
    interval: float = 1.5,
    concurrency: int = 2,
) -> dict[str, int]:
    """Submit `turns` turns per session, then fault random workers until all are done.

    Every `interval` (jittered), while submissions remain and for at most `seconds`, one
    live worker is SIGKILLed (and a new one started) or SIGSTOPped for 1-5 s (then
    SIGCONT). Returns the fault counts and the seconds until every submission was done.
    """
    rng = random.Random(seed)
    cluster.concurrency = concurrency
    cluster.start(workers, tool_seconds=tool_seconds)
    started = time.monotonic()
    for turn in range(turns):
        for session_id in sessions:
            cluster.submit(session_id, f"turn {turn} of {session_id}")
    kills = pauses = 0
    paused: list[tuple[float, subprocess.Popen[bytes]]] = []
    deadline = time.monotonic() + seconds
    total = len(sessions) * turns
    while time.monotonic() < deadline and cluster.done() < total:
        time.sleep(interval * rng.uniform(0.5, 1.5))
        for until, worker in list(paused):
            if time.monotonic() >= until:
                worker.send_signal(signal.SIGCONT)
                paused.remove((until, worker))
        live = [
            w for w in cluster.workers if w.poll() is None and all(w is not p for _, p in paused)
        ]
        if not live:
            continue
        victim = rng.choice(live)
        if rng.random() < 0.5:
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            kills += 1
            cluster.start(1, tool_seconds=tool_seconds)
        else:
            victim.send_signal(signal.SIGSTOP)
            paused.append((time.monotonic() + rng.uniform(1, 5), victim))
            pauses += 1
    for _, worker in paused:
        worker.send_signal(signal.SIGCONT)
    cluster.wait_done(total, timeout=300)
    return {"kills": kills, "pauses": pauses, "seconds": int(time.monotonic() - started)}
