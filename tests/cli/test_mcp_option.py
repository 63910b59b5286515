"""`--mcp NAMES` on run, chat and resume against a real stdio MCP server (docs/cli.md#mcp-servers).

The server is `tests/_mcp_cli_server.py` (the MCP SDK's `MCPServer`), configured in the
scrubbed `$DURALOOP_HOME/config.toml` of each test's `Cli`; the model is scripted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ._mcp_support import alive, configure, results_of, text_of, toml_value
from ._support import TIMEOUT, Cli, clean_env, ok, session_id_of, wait_for

pytest.importorskip("mcp")

ECHO_TURN: list[dict[str, Any]] = [
    {
        "text": "Asking the server.",
        "tool_calls": [
            {"id": "echo-1", "name": "mcp__t__echo", "arguments": {"text": "hi"}},
            {"id": "where-1", "name": "mcp__t__where", "arguments": {}},
        ],
    },
    {"text": "The server answered."},
]


def test_run_with_mcp_calls_the_servers_tools_and_stops_the_server(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    pidfile = configure(cli)
    result = ok(cli("run", "ask it", "--mcp", "t", "--model", cli.script(ECHO_TURN)))
    assert "The server answered." in result.stdout
    results = results_of(cli, session_id_of(result))
    assert text_of(results["echo-1"]) == "echo: hi"
    assert text_of(results["where-1"]) == f"cwd={tmp_path / 'server-cwd'} env=yes"
    pid = int(pidfile.read_text())
    wait_for(lambda: not alive(pid), what="the MCP server to exit after the command")


def test_an_unknown_mcp_name_is_one_line_listing_the_configured_ones(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    configure(cli)
    result = cli("run", "ask it", "--mcp", "t,nope", "--model", cli.script(ECHO_TURN))
    assert result.returncode == 1
    config = tmp_path / "home" / "config.toml"
    assert result.stderr.strip() == (
        f"UsageError: --mcp 'nope' is not a configured MCP server; configured in {config}: t"
    )
    assert cli.session_ids() == set()  # refused before anything is written


def test_a_server_that_fails_to_start_is_one_line_naming_it(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    configure(
        cli,
        extra="[mcp.servers.broken]\n"
        f"command = {toml_value([sys.executable, '-c', 'import sys; sys.exit(3)'])}\n"
        "startup_timeout = 30\n",
    )
    result = cli("run", "ask it", "--mcp", "t,broken", "--model", cli.script(ECHO_TURN))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("McpServerError: MCP server broken ")
    assert "failed to start" in lines[0]
    assert cli.session_ids() == set()  # the session opens only once the servers run


def test_chat_with_mcp_calls_the_servers_tool(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    configure(cli)
    script = cli.script(ECHO_TURN)
    argv = cli.argv("chat", "--mcp", "t", "--model", script)
    done = subprocess.run(
        argv,
        input="ask it\n",
        capture_output=True,
        text=True,
        env=clean_env(tmp_path),
        timeout=TIMEOUT,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    (session_id,) = cli.session_ids()
    assert text_of(results_of(cli, session_id)["echo-1"]) == "echo: hi"


def test_resume_without_mcp_answers_an_mcp_call_unknown_tool_naming_the_flag(
    tmp_path: Path,
) -> None:
    cli = Cli(tmp_path)
    configure(cli)
    session_id = session_id_of(
        ok(cli("run", "ask it", "--mcp", "t", "--model", cli.script(ECHO_TURN)))
    )
    again: list[dict[str, Any]] = [
        {"tool_calls": [{"id": "echo-2", "name": "mcp__t__echo", "arguments": {"text": "x"}}]},
        {"text": "No server here."},
    ]
    ok(cli("resume", session_id, "once more", "--model", cli.script(again)))
    unknown = results_of(cli, session_id)["echo-2"]
    assert unknown["error"]["code"] == "UNKNOWN_TOOL"
    assert "--mcp t" in text_of(unknown)

    with_server: list[dict[str, Any]] = [
        {"tool_calls": [{"id": "echo-3", "name": "mcp__t__echo", "arguments": {"text": "y"}}]},
        {"text": "Back."},
    ]
    ok(cli("resume", session_id, "with it", "--mcp", "t", "--model", cli.script(with_server)))
    assert text_of(results_of(cli, session_id)["echo-3"]) == "echo: y"


def test_resume_without_a_prompt_refuses_mcp(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    configure(cli)
    session_id = session_id_of(ok(cli("run", "hi", "--model", cli.script([{"text": "ok"}]))))
    result = cli("resume", session_id, "--mcp", "t")
    assert result.returncode == 1
    assert "--mcp is used only when resume runs a turn" in result.stderr


def test_an_empty_mcp_value_is_a_usage_error(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    result = cli("run", "hi", "--mcp", " , ", "--model", cli.script([{"text": "ok"}]))
    assert result.returncode == 2
    assert "names no MCP server" in result.stderr


def test_mcp_tables_do_not_matter_to_a_command_without_mcp(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    configure(cli, extra='[mcp.servers.never]\ncommand = ["/nonexistent/server"]\n')
    result = ok(cli("run", "hi", "--model", cli.script([{"text": "ok"}])))  # nothing started
    assert "ok" in result.stdout


def test_a_paused_turns_printed_commands_carry_mcp_and_approve_continue_takes_it(
    tmp_path: Path,
) -> None:
    cli = Cli(tmp_path)
    configure(cli)
    turn: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {"id": "w-1", "name": "write_file", "arguments": {"path": "a", "content": "x"}}
            ]
        },
    ]
    rest: list[dict[str, Any]] = [
        {"tool_calls": [{"id": "echo-9", "name": "mcp__t__echo", "arguments": {"text": "z"}}]},
        {"text": "Written and echoed."},
    ]
    script = cli.script(turn)
    paused = cli("run", "write", "--mcp", "t", "--ask-before", "write_file", "--model", script)
    assert paused.returncode == 3, paused.stderr
    assert "--mcp t" in paused.stdout
    session_id = session_id_of(paused)
    where = ("--store", str(cli.store), "--cwd", str(cli.cwd))
    done = ok(
        cli("approve", session_id, "--continue", "--mcp", "t", "--model", cli.script(rest), *where)
    )
    assert "Written and echoed." in done.stdout
    assert text_of(results_of(cli, session_id)["echo-9"]) == "echo: z"


def test_without_the_mcp_extra_mcp_is_one_line_saying_how_to_install_it(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    configure(cli)
    shadow = tmp_path / "no-mcp"  # packages that fail to import, ahead of the real SDK
    for package in ("mcp", "mcp_types"):
        (shadow / package).mkdir(parents=True)
        (shadow / package / "__init__.py").write_text(
            f"raise ModuleNotFoundError({f'No module named {package!r}'!r})\n", encoding="utf-8"
        )
    env = clean_env(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([str(shadow), *filter(None, [env.get("PYTHONPATH")])])
    script = cli.script([{"text": "ok"}])
    ok(cli("run", "hi", "--model", script, env=env))  # servers configured, none used: fine
    result = cli("run", "hi", "--mcp", "t", "--model", script, env=env)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith("UsageError: --mcp t needs the MCP client, which is not installed")
    assert line.endswith("run: pip install 'duraloop[mcp]'")
    assert len(cli.session_ids()) == 1  # the refused run wrote nothing


def test_chat_fork_prints_a_chat_command_with_the_same_mcp(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    configure(cli)
    done = subprocess.run(
        cli.argv("chat", "--mcp", "t", "--model", cli.script([{"text": "Hello."}])),
        input="hi\n/fork\n",
        capture_output=True,
        text=True,
        env=clean_env(tmp_path),
        timeout=TIMEOUT,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("continue it with:")]
    assert line.endswith(" --mcp t")


def test_sigterm_while_the_servers_start_stops_them_and_exits_130(tmp_path: Path) -> None:
    # Regression (new-user trial): a SIGTERM before the turn's own signal handling killed
    # the command at once and left the started stdio server running in its own session.
    cli = Cli(tmp_path)
    marker = tmp_path / "hung.pid"
    hung = f"import os, time; open({str(marker)!r}, 'w').write(str(os.getpid())); time.sleep(300)"
    configure(
        cli,
        extra="[mcp.servers.hung]\n"
        f"command = {toml_value([sys.executable, '-c', hung])}\n"
        "startup_timeout = 120\n",
    )
    process = cli.popen("run", "ask it", "--mcp", "hung", "--model", cli.script(ECHO_TURN))
    try:
        wait_for(marker.exists, what="the MCP server to start")
        server = int(marker.read_text())
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=TIMEOUT) == 130
    finally:
        if process.poll() is None:
            process.kill()
    wait_for(lambda: not alive(server), what="the started MCP server to be stopped")
    assert cli.session_ids() == set()  # nothing was opened
