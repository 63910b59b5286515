"""Workers on DBOS: real worker processes killed with SIGKILL and paused with SIGSTOP.

See docs/workers.md; Laws 4, 5, 8 and 11 of docs/architecture.md#laws. Each worker is
`tests/_worker_child.py` (a scripted model: every turn is one call of a slow tool that
writes `start`/`end` lines to a side-effect ledger, then a text), on a fresh schema of the
local PostgreSQL, with a 3 s takeover period. After every scenario: every submission ran
exactly once to an end, every session passes `duraloop check`, no tool body ran twice
(one `start` per call id in the ledger), a call a worker died in is answered
`TOOL_OUTCOME_UNKNOWN` and followed by a continuation turn, and no event was written by a
fenced-out writer (each session's writer tokens never decrease along its log). The reduced
chaos run is here; the full one (3 workers, 200 sessions x 3 turns) is
`benchmarks/chaos_workers.py`.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from _workers_cluster import Cluster, check_cluster, run_chaos
from store._postgres import POSTGRES_URL, drop_schema, fresh_schema, require_postgres

# Each test starts worker processes on a fresh DBOS schema (its migrations alone take ~20 s).
pytestmark = pytest.mark.timeout(600)


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
    cluster.wait_done(1, timeout=120)  # taken over while the first worker sleeps
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


def test_chaos_reduced_random_kills_and_pauses_break_no_law(cluster: Cluster) -> None:
    sessions = [f"c{i}" for i in range(8)]
    faults = run_chaos(cluster, sessions, turns=3, workers=3, seconds=60, seed=7)
    counts = check_cluster(cluster, sessions, 3)
    assert faults["kills"] + faults["pauses"] >= 3
    assert counts["turns"] == 24 + counts["interrupted"]


def test_sigterm_drains_a_running_turn_to_its_end_and_the_worker_is_not_taken_over(
    cluster: Cluster,
) -> None:
    cluster.start(1, tool_seconds=1.5)
    cluster.submit("d0", "one slow turn")
    pid = cluster.first_start_pid()
    (worker,) = cluster.workers
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=90) == 0
    ends = [line for line in cluster.ledger_lines() if line[0] == "end"]
    assert [line[3] for line in ends] == [str(pid)]  # the body finished in the draining worker
    assert cluster.rows("SELECT state, outcome, executor FROM {s}.submissions")[0][:2] == (
        "done",
        "completed",
    )
    assert cluster.rows("SELECT stopped FROM {s}.workers") == [(True,)]
    counts = check_cluster(cluster, ["d0"], 1)
    assert counts == {"interrupted": 0, "unknown": 0, "turns": 1}


def test_a_turn_longer_than_the_drain_is_cancelled_durably_and_ends_aborted(
    cluster: Cluster,
) -> None:
    cluster.start(1, tool_seconds=60.0)  # a body that ignores cancellation, past any drain
    cluster.submit("l0", "one turn too long for the drain")
    cluster.submit("l0", "a turn the drain leaves queued")
    cluster.first_start_pid()
    (worker,) = cluster.workers
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=90) == 0
    rows = cluster.rows("SELECT state, outcome FROM {s}.submissions ORDER BY ordinal")
    assert rows == [("done", "aborted"), ("queued", None)]
    from duraloop.store import PostgresStore

    with PostgresStore(POSTGRES_URL, schema=cluster.schema) as store:
        events = store.backend.read("l0").events
        assert store.check("l0").valid
    (end,) = [e for e in events if e.type == "turn/end"]
    assert end.data["reason"]["kind"] == "aborted"
    unknown = [
        e
        for e in events
        if e.type == "tool/result"
        and (e.data.get("error") or {}).get("code") == "TOOL_OUTCOME_UNKNOWN"
    ]
    assert len(unknown) == 1  # the body that outlived the grace: never run again


def test_a_second_sigterm_during_the_drain_exits_at_once_with_130(cluster: Cluster) -> None:
    cluster.start(1, tool_seconds=30.0)
    cluster.submit("x0", "a turn longer than the test waits")
    cluster.first_start_pid()
    (worker,) = cluster.workers
    worker.send_signal(signal.SIGTERM)
    time.sleep(1.0)
    assert worker.poll() is None  # draining
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=10) == 130
