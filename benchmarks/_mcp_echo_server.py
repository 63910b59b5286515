"""The MCP server of bench_mcp.py, built with the SDK's `MCPServer`: one read-only `echo` tool.

python benchmarks/_mcp_echo_server.py stdio
python benchmarks/_mcp_echo_server.py http PORT
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("duraloop-bench", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
async def echo(i: int) -> str:
    """Return the step number as text."""
    return f"step {i}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
