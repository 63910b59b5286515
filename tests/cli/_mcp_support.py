"""The `--mcp` tests' config file and readers (tests/_mcp_cli_server.py is the server)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ._support import Cli

SERVER_FILE = Path(__file__).parents[1] / "_mcp_cli_server.py"


def toml_value(value: object) -> str:
    """Return `value` as a TOML value."""
    return json.dumps(value)  # a JSON string or array of strings is valid TOML


def configure(cli: Cli, *, extra: str = "") -> Path:
    """Write a config naming the test server as `t`; return the file its pid goes to."""
    home = cli.tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    pidfile = cli.tmp / "server.pid"
    (cli.tmp / "server-cwd").mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        "[mcp.servers.t]\n"
        f"command = {toml_value([sys.executable, str(SERVER_FILE)])}\n"
        f'env = {{ MCP_CLI_TEST = "yes", MCP_CLI_PIDFILE = {toml_value(str(pidfile))} }}\n'
        f"cwd = {toml_value(str(cli.tmp / 'server-cwd'))}\n"
        "startup_timeout = 60\n" + extra,
        encoding="utf-8",
    )
    return pidfile


def results_of(cli: Cli, session_id: str) -> dict[str, dict[str, Any]]:
    return {
        event["data"]["message"]["source"]["callId"]: event["data"]
        for event in cli.events(session_id)
        if event["type"] == "tool/result"
    }


def text_of(result: dict[str, Any]) -> str:
    (block,) = result["message"]["content"]  # one tool-result block
    return "".join(part.get("text", "") for part in block["content"])


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
