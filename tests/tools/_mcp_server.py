"""A real MCP server for the MCP client tests, built with the SDK's `MCPServer`.

Run it as `python tests/tools/_mcp_server.py stdio` or `... http PORT`; the tests also build it
in-process with `build_server`. `MCP_TEST_STATE` names a directory the tools write markers into,
so a test can see what the server observed (a cancellation, a start) whatever the transport.
Each start appends the process id to `starts`; a start while a file `broken` exists exits 2 at
once (a server that fails to restart).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import anyio
from mcp import MCPError
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

READ_ONLY = ToolAnnotations(read_only_hint=True)
DESTRUCTIVE = ToolAnnotations(read_only_hint=True, destructive_hint=True)
RENDEZVOUS_WAIT_SECONDS = 10.0
HUGE_SCHEMA_CHARS = 70_000


def build_server(state_dir: Path) -> MCPServer:
    """Return the test server; its markers go to `state_dir`."""
    server: MCPServer = MCPServer("duraloop-test", log_level="WARNING")
    in_flight = {"now": 0, "max": 0}
    peers = anyio.Event()

    def mark(name: str, text: str = "") -> None:
        (state_dir / name).write_text(text, encoding="utf-8")

    @server.tool(annotations=READ_ONLY)
    def echo(text: str) -> str:
        """Return the text."""
        return text

    @server.tool(annotations=READ_ONLY)
    def lookup(key: str) -> dict[str, Any]:
        """Return a structured record for the key."""
        return {"key": key, "length": len(key)}

    @server.tool()
    def fail(message: str) -> str:
        """Fail with the message."""
        raise ToolError(message)

    @server.tool()
    def refuse() -> str:
        """Answer with a JSON-RPC error instead of a result."""
        raise MCPError(code=-32602, message="refused by the test server")

    @server.tool(annotations=DESTRUCTIVE)
    def wipe() -> str:
        """A read-only hint that is also destructive."""
        return "wiped"

    @server.tool(name="files.read", annotations=READ_ONLY)
    def files_read() -> str:
        """A tool whose name has a dot."""
        return "read"

    @server.tool()
    def huge(text: Annotated[str, Field(description="x" * HUGE_SCHEMA_CHARS)]) -> str:
        """A tool whose input schema is too large to offer."""
        return text

    @server.tool()
    def pid() -> int:
        """Return the server's process id."""
        return os.getpid()

    @server.tool()
    def crash() -> str:
        """Exit the server process at once."""
        mark("crashing")
        os._exit(3)

    @server.tool()
    async def slow(marker: str) -> str:
        """Wait a long time, writing markers on start and on cancellation."""
        mark(f"{marker}.started")
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            mark(f"{marker}.cancelled")
            raise
        return "slept"

    @server.tool(annotations=READ_ONLY)
    async def rendezvous(
        name: str, wait_seconds: float = RENDEZVOUS_WAIT_SECONDS
    ) -> dict[str, Any]:
        """Wait until another call is in flight too; report how many ran at once."""
        in_flight["now"] += 1
        in_flight["max"] = max(in_flight["max"], in_flight["now"])
        if in_flight["now"] >= 2:
            peers.set()
        with anyio.move_on_after(wait_seconds):
            await peers.wait()
        seen = in_flight["max"]
        in_flight["now"] -= 1
        return {"name": name, "max_in_flight": seen}

    return server


def main(argv: list[str]) -> None:
    """Run the server over stdio or streamable HTTP."""
    state = Path(os.environ.get("MCP_TEST_STATE", "."))
    with (state / "starts").open("a", encoding="utf-8") as starts:
        starts.write(f"{os.getpid()}\n")
    if (state / "broken").exists():
        sys.exit(2)
    server = build_server(state)
    if argv[0] == "stdio":
        server.run("stdio")
    elif argv[0] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))


if __name__ == "__main__":
    main(sys.argv[1:])
