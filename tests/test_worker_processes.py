"""Workers on DBOS: real worker processes killed with SIGKILL and paused with SIGSTOP.

See docs/workers.md; Laws 4, 5, 8 and 11 of docs/architecture.md#laws. Each worker is
`tests/_worker_child.py` (a scripted model: every turn is one call of a slow tool that
writes `start`/`end` lines to a side-effect ledger, then a text), on a fresh schema of the
local PostgreSQL, with a 3 s takeover period. After every scenario: every submission ran
exactly once to an end, every session passes `duraloop check`, no tool body ran twice
(one `start` per call id in the ledger), a call a worker died in is answered
`TOOL_OUTCOME_UNKNOWN` and followed by a continuation turn, and no event was written by a
fenced-out writer (each event's writer token is the lease token of the turn it belongs to).
The full chaos run (more workers, sessions and faults) is `benchmarks/chaos_workers.py`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from store._postgres import POSTGRES_URL, drop_schema, fresh_schema, require_postgres

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

    def start(self, count: int, *, tool_seconds: float = 0.5) -> None:
        env = dict(
            os.environ,
            DURALOOP_TOOL_SECONDS=str(tool_seconds),
            DURALOOP_TAKEOVER_SECONDS=str(TAKEOVER_SECONDS),
        )
        for index in range(count):
            log = (self.logs / f"worker-{len(self.workers)}-{index}.log").open("wb")
            self._files.append(log)
            self.workers.append(
                subprocess.Popen(
                    [sys.executable, str(CHILD), POSTGRES_URL, self.schema, str(self.ledger)],
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

    def wait_done(self, count: int, timeout: float = 90) -> float:
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

    def first_start_pid(self, timeout: float = 30) -> int:
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


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    require_postgres()
    schema = fresh_schema()
    running = Cluster(tmp_path, schema)
    try:
        yield running
    finally:
        running.stop()
        drop_schema(schema)
        drop_schema(f"{schema}_dbos")


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
            counts["interrupted"] += ends.count("interrupted")
            counts["unknown"] += len(unknown)
            counts["turns"] += len(ends)
            # an interrupted turn and its continuation are one submission
            assert ends.count("completed") == turns
            assert len(ends) == turns + ends.count("interrupted")
    return dict(counts)


def test_three_sessions_run_their_turns_once_each_on_two_workers(cluster: Cluster) -> None:
    cluster.start(2, tool_seconds=0.1)
    sessions = [f"s{i}" for i in range(3)]
    for turn in range(2):
        for session_id in sessions:
            cluster.submit(session_id, f"turn {turn} of {session_id}")
    cluster.wait_done(6)
    counts = check_cluster(cluster, sessions, 2)
    assert counts == {"interrupted": 0, "unknown": 0, "turns": 6}
    ends = [line for line in cluster.ledger_lines() if line[0] == "end"]
    assert len(ends) == 6


def test_a_worker_killed_mid_tool_is_taken_over_without_running_the_tool_again(
    cluster: Cluster,
) -> None:
    cluster.start(1, tool_seconds=1.0)
    sessions = [f"k{i}" for i in range(3)]
    for turn in range(2):
        for session_id in sessions:
            cluster.submit(session_id, f"turn {turn} of {session_id}")
    victim = cluster.first_start_pid()
    cluster.start(1, tool_seconds=0.1)  # the survivor
    os.kill(victim, signal.SIGKILL)
    killed = [
        line[2] for line in cluster.ledger_lines() if line[0] == "start" and line[3] == str(victim)
    ]
    cluster.wait_done(6)
    counts = check_cluster(cluster, sessions, 2)
    assert counts["unknown"] >= 1 and counts["interrupted"] == counts["unknown"]
    ended = {line[2] for line in cluster.ledger_lines() if line[0] == "end"}
    assert not set(killed) & ended  # the killed bodies never finished, and never ran again
    outcomes = Counter(row[0] for row in cluster.rows("SELECT outcome FROM {s}.submissions"))
    assert outcomes["continued"] == counts["interrupted"]


def test_a_paused_worker_that_wakes_after_the_takeover_writes_nothing(cluster: Cluster) -> None:
    cluster.start(1, tool_seconds=1.5)
    cluster.submit("p0", "one slow turn")
    victim = cluster.first_start_pid()
    cluster.start(1, tool_seconds=0.1)
    os.kill(victim, signal.SIGSTOP)
    cluster.wait_done(1, timeout=60)  # taken over while the first worker sleeps
    stored = cluster.rows(
        "SELECT seq, writer_token FROM {s}.events WHERE session_id = 'p0' ORDER BY seq"
    )
    os.kill(victim, signal.SIGCONT)
    time.sleep(2.5)  # its tool body ends now; its result must not land
    after = cluster.rows(
        "SELECT seq, writer_token FROM {s}.events WHERE session_id = 'p0' ORDER BY seq"
    )
    assert after == stored
    counts = check_cluster(cluster, ["p0"], 1)
    assert counts["unknown"] == 1
