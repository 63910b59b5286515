"""A tiny stdio MCP server (MCP SDK `MCPServer`) for the CLI's `--mcp` tests.

Run as `python tests/_mcp_cli_server.py`; it imports only the `mcp` package, since a stdio
server does not inherit duraloop's environment (no PYTHONPATH).

- `echo(text)`: read-only; returns `echo: TEXT`.
- `where()`: read-only; returns the server's working directory and `$MCP_CLI_TEST`.
- `block(marker)`: destructive; writes the server's pid to the file `marker`, then sleeps
  (a call a test interrupts).

With `$MCP_CLI_PIDFILE` set, the server writes its pid there when it starts.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("duraloop-cli-test")


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
async def echo(text: str) -> str:
    """Return the text back."""
    return f"echo: {text}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
async def where() -> str:
    """Return the working directory and $MCP_CLI_TEST."""
    return f"cwd={os.getcwd()} env={os.environ.get('MCP_CLI_TEST', '')}"


@server.tool(annotations=ToolAnnotations(destructive_hint=True), structured_output=False)
async def block(marker: str) -> str:
    """Write this server's pid to `marker`, then sleep for a minute."""
    await anyio.Path(marker).write_text(str(os.getpid()), encoding="utf-8")
    await anyio.sleep(60)
    return "woke up"


if __name__ == "__main__":
    if os.environ.get("MCP_CLI_PIDFILE"):  # lets a test see the server process end
        Path(os.environ["MCP_CLI_PIDFILE"]).write_text(str(os.getpid()), encoding="utf-8")
    server.run()
