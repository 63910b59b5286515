"""Laws 4 and 5 with an MCP tool, end to end: `duraloop run --mcp` SIGKILLed while a call to
a stdio MCP server's tool runs, then resumed: the call is answered TOOL_OUTCOME_UNKNOWN and
never retried, the log is valid and its history pairs; and SIGINT during such a call: the
turn ends aborted, the call ABORTED, and the server is stopped (docs/cli.md#mcp-servers).

The server (`tests/_mcp_cli_server.py`) runs in its own session, so the SIGKILL of duraloop
does not reach it: it must exit on its own when its stdin closes. Every wait is a polling
loop with a deadline; no fixed sleep decides an outcome.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from cli._mcp_support import alive, configure, results_of
from cli._support import Cli, ok, tool_call_on_disk, wait_for, wait_for_log
from duraloop.log import Session, check_log, check_pairing
from duraloop.log.vocabulary import ABORTED, TOOL_OUTCOME_UNKNOWN
from duraloop.store import JsonlStore

pytest.importorskip("mcp")
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

SESSION = "mcp-crash"
EXIT_TIMEOUT = 20.0


def _blocking_turn(marker: Path) -> list[dict[str, Any]]:
    return [
        {
            "text": "Calling the slow tool.",
            "tool_calls": [
                {"id": "echo-1", "name": "mcp__t__echo", "arguments": {"text": "first"}},
                {"id": "block-1", "name": "mcp__t__block", "arguments": {"marker": str(marker)}},
            ],
        },
        {"text": "never requested"},
    ]


def test_sigkill_during_an_mcp_call_then_resume_answers_it_outcome_unknown(
    tmp_path: Path,
) -> None:
    cli = Cli(tmp_path)
    configure(cli)
    marker = tmp_path / "block.pid"
    proc = cli.popen(
        "run",
        "go",
        "--session",
        SESSION,
        "--mcp",
        "t",
        "--model",
        cli.script(_blocking_turn(marker)),
    )
    server_pid = None
    try:
        log = wait_for_log(cli, SESSION)
        wait_for(
            lambda: (marker.is_file() and marker.read_text() != "") or proc.poll() is not None,
            what="the MCP tool's body to start",
        )
        assert proc.poll() is None, (tmp_path / "popen.err").read_text()
        server_pid = int(marker.read_text())
        assert tool_call_on_disk(log, "mcp__t__block")  # durable before the body ran
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=EXIT_TIMEOUT) == -signal.SIGKILL
        # Its stdin closed with duraloop: the server exits, though its tool still sleeps.
        wait_for(lambda: not alive(server_pid), what="the orphaned MCP server to exit")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if server_pid is not None and alive(server_pid):
            os.kill(server_pid, signal.SIGKILL)

    resumed = ok(
        cli("resume", SESSION, "continue", "--mcp", "t", "--model", cli.script([{"text": "On."}]))
    )
    assert "TOOL_OUTCOME_UNKNOWN for block-1" in resumed.stderr
    results = results_of(cli, SESSION)
    assert results["block-1"]["error"]["code"] == TOOL_OUTCOME_UNKNOWN
    assert results["echo-1"].get("error") is None  # the read-only call had committed
    events = cli.events(SESSION)
    calls = [e for e in events if e["type"] == "tool/call" and e["data"]["name"] == "mcp__t__block"]
    assert len(calls) == 1  # never retried

    store = JsonlStore(cli.store)
    stored = store.read(SESSION)[1]
    assert check_log(SESSION, stored).valid
    loaded = store.prepare(SESSION)[0]
    session = Session(SESSION, seed=list(loaded.events), header=loaded.header)
    check_pairing(session.derive_messages())
    assert ": valid (" in ok(cli("check", SESSION)).stdout


def test_sigint_during_an_mcp_call_cancels_the_turn_durably_and_stops_the_server(
    tmp_path: Path,
) -> None:
    cli = Cli(tmp_path)
    pidfile = configure(cli)
    marker = tmp_path / "block.pid"
    proc = cli.popen(
        "run",
        "go",
        "--session",
        SESSION,
        "--mcp",
        "t",
        "--model",
        cli.script(_blocking_turn(marker)),
    )
    try:
        wait_for(
            lambda: (marker.is_file() and marker.read_text() != "") or proc.poll() is not None,
            what="the MCP tool's body to start",
        )
        assert proc.poll() is None, (tmp_path / "popen.err").read_text()
        server_pid = int(pidfile.read_text())
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=EXIT_TIMEOUT) == 1  # an aborted turn
        wait_for(lambda: not alive(server_pid), what="the MCP server to be stopped")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    block = results_of(cli, SESSION)["block-1"]
    assert block["error"]["code"] == ABORTED  # the call was cancelled at its await
    turn_end = [e for e in cli.events(SESSION) if e["type"] == "turn/end"]
    assert turn_end[-1]["data"]["reason"]["kind"] == "aborted"
    assert ": valid (" in ok(cli("check", SESSION)).stdout
