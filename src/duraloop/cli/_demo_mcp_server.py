"""The stdio MCP server of `duraloop demo --mcp`, written with the MCP SDK's `MCPServer`.

Run it as `python -m duraloop.cli._demo_mcp_server` or `python PATH/_demo_mcp_server.py`
(the demo starts it by path with `sys.executable`, so it needs only the `mcp` package).
It holds a few release notes in memory and offers four tools:

- `lookup_note`, `count_words` and `list_topics`: read-only (`readOnlyHint`), each taking
  `LATENCY_SECONDS`, so the demo can show them overlapping;
- `publish`: destructive (`destructiveHint`), so duraloop runs it alone.
"""

from __future__ import annotations

from typing import Final

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

LATENCY_SECONDS: Final = 0.4
NOTES: Final = {
    "log": "The log is append-only; every tool call gets exactly one result.",
    "recovery": "A recorded call without a result is TOOL_OUTCOME_UNKNOWN, never success.",
    "scheduler": "Read-only calls share a rolling pool; exclusive calls are barriers.",
}
READ_ONLY: Final = ToolAnnotations(read_only_hint=True, destructive_hint=False)
DESTRUCTIVE: Final = ToolAnnotations(read_only_hint=False, destructive_hint=True)

server = MCPServer("duraloop-demo-notes")
published: list[str] = []


@server.tool(annotations=READ_ONLY, structured_output=False)
async def lookup_note(topic: str) -> str:
    """Return the release note on a topic (log, recovery or scheduler)."""
    await anyio.sleep(LATENCY_SECONDS)  # simulates a slow backend
    return NOTES.get(topic, f"no note on {topic!r}; topics: {', '.join(NOTES)}")


@server.tool(annotations=READ_ONLY, structured_output=False)
async def count_words(topic: str) -> str:
    """Return how many words the note on a topic has."""
    await anyio.sleep(LATENCY_SECONDS)
    return f"{len(NOTES.get(topic, '').split())} words"


@server.tool(annotations=READ_ONLY, structured_output=False)
async def list_topics() -> str:
    """Return the topics that have a note."""
    await anyio.sleep(LATENCY_SECONDS)
    return ", ".join(NOTES)


@server.tool(annotations=DESTRUCTIVE, structured_output=False)
async def publish(summary: str) -> str:
    """Publish a summary (a side effect: duraloop runs this call alone)."""
    await anyio.sleep(LATENCY_SECONDS / 4)
    published.append(summary)
    return f"published {len(summary)} characters (publication #{len(published)})"


if __name__ == "__main__":
    server.run()
