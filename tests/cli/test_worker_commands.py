"""`duraloop submit` and `duraloop worker` as a user runs them (docs/workers.md).

A real worker process on a fresh schema of the local PostgreSQL, with a scripted model,
runs two submitted turns of a new session, prints its progress, and drains on SIGTERM
(exit 0). Both commands refuse a store that is not PostgreSQL in one line.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from telemetry._collector import Collector, collector

from ._support import COMMAND, Cli, clean_env, ok

__all__ = ["collector"]  # the OTLP endpoint fixture, used by name

# Each test starts worker processes on a fresh DBOS schema (its migrations alone take ~20 s).
pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


@pytest.fixture
def spec(postgres_spec: str) -> str:
    return postgres_spec


def test_a_worker_runs_submitted_turns_and_drains_on_sigterm(cli: Cli, spec: str) -> None:
    model = cli.script([{"text": "first answer"}, {"text": "second answer"}])
    worker = subprocess.Popen(
        [*COMMAND, "worker", "--store", spec, "--model", model, "--cwd", str(cli.cwd)],
        env=clean_env(cli.tmp),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = ok(cli("submit", "w1", "Say one thing.", "--store", spec, store=False, cwd=False))
        ok(cli("submit", "w1", "Say another.", "--store", spec, store=False, cwd=False))
        assert len(first.stdout.strip()) == 36  # a submission id (UUID)
        deadline = time.monotonic() + 60
        shown = ""
        while time.monotonic() < deadline:
            shown = cli("show", "w1", "--store", spec, store=False, cwd=False).stdout
            if "second answer" in shown:  # (`show` exits 1 until the worker creates w1)
                break
            time.sleep(0.5)
        assert "first answer" in shown and "second answer" in shown
    finally:
        worker.send_signal(signal.SIGTERM)
        stdout, stderr = worker.communicate(timeout=60)
    assert worker.returncode == 0, stderr
    assert "worker stopped" in stderr and "finished 2" in stderr
    listed = json.loads(ok(cli("ls", "--json", "--store", spec, store=False, cwd=False)).stdout)
    assert [row["id"] for row in listed] == ["w1"]


def test_an_approval_decided_on_any_machine_is_continued_by_a_worker(cli: Cli, spec: str) -> None:
    call = {"id": "b1", "name": "bash", "arguments": {"command": "echo ran >> ran.txt"}}
    model = cli.script([{"tool_calls": [call]}, {"text": "after the approval"}])
    worker = subprocess.Popen(
        [*COMMAND, "worker", "--store", spec, "--model", model, "--cwd", str(cli.cwd)]
        + ["--ask-before", "bash"],
        env=clean_env(cli.tmp),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ok(cli("submit", "a1", "Run it.", "--store", spec, store=False, cwd=False))
        deadline = time.monotonic() + 60
        pending: list[dict[str, object]] = []
        while time.monotonic() < deadline and not pending:
            listed = cli("pending", "--json", "--store", spec, store=False, cwd=False).stdout
            pending = json.loads(listed) if listed.strip() else []
            time.sleep(0.3)
        assert [row["session"] for row in pending] == ["a1"]
        assert not (cli.cwd / "ran.txt").exists()
        approved = ok(cli("approve", "a1", "--store", spec, store=False, cwd=False)).stdout
        assert "queued the turn's continuation for the workers" in approved
        while time.monotonic() < deadline and not (cli.cwd / "ran.txt").exists():
            time.sleep(0.3)
        shown = ""
        while time.monotonic() < deadline and "after the approval" not in shown:
            shown = cli("show", "a1", "--store", spec, store=False, cwd=False).stdout
            time.sleep(0.3)
        assert "after the approval" in shown
        assert (cli.cwd / "ran.txt").read_text() == "ran\n"  # the body ran once
    finally:
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=60)
    assert worker.returncode == 0, stderr


def test_a_worker_refuses_a_missing_workspace_at_start(cli: Cli, spec: str) -> None:
    model = cli.script([{"text": "x"}])
    missing = cli.tmp / "nowhere"
    result = cli(
        "worker", "--store", spec, "--model", model, "--cwd", str(missing), store=False, cwd=False
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip().splitlines()[-1] == (
        f"UsageError: workspace {missing} is not a directory; create it or pass another --cwd"
    )


@pytest.mark.parametrize("command", [["submit", "s", "hi"], ["worker"]])
def test_submit_and_worker_need_a_postgresql_store(cli: Cli, command: list[str]) -> None:
    result = cli(*command, "--store", str(cli.store), store=False, cwd=False)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(f"UsageError: {command[0]} needs a PostgreSQL store")


def test_a_worker_with_otel_traces_every_turn_it_runs(
    cli: Cli, spec: str, collector: Collector
) -> None:
    model = cli.script([{"text": "traced answer"}])
    env = clean_env(cli.tmp, OTEL_EXPORTER_OTLP_ENDPOINT=collector.url)
    for name in list(env):
        if name.startswith("OTEL_") and name != "OTEL_EXPORTER_OTLP_ENDPOINT":
            del env[name]
    worker = subprocess.Popen(
        [*COMMAND, "worker", "--store", spec, "--model", model, "--cwd", str(cli.cwd), "--otel"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ok(cli("submit", "traced", "Say one thing.", "--store", spec, store=False, cwd=False))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            shown = cli("show", "traced", "--store", spec, store=False, cwd=False).stdout
            if "traced answer" in shown:
                break
            time.sleep(0.5)
    finally:
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=60)
    assert worker.returncode == 0, stderr
    spans = collector.spans()  # the batch is flushed when the worker stops
    turns = [attrs for name, attrs in spans if name == "invoke_agent"]
    assert [t["gen_ai.conversation.id"] for t in turns] == ["traced"]
    assert any(name.startswith("chat ") for name, _ in spans)
    assert not any("Say one thing." in str(attrs) for _, attrs in spans)  # no content by default
