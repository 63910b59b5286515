"""The set of tools a session can call, in registration order."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..errors import ToolDefinitionError, UsageError
from ..log import JsonObject
from ._definition import Tool


class ToolRegistry:
    """A mutable, ordered set of tools keyed by name.

    Changes are visible to every later lookup: the scheduler re-reads a call's tool and
    classification each time it considers starting it (docs/scheduler.md#ordering, B8/B9), so a tool
    registered or removed by a running body affects every not-yet-started call.

    Args:
        tools: tools to register at once, in order.

    Raises:
        ToolDefinitionError: if two of `tools` share a name.
    """

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            self.register(item)

    def register(self, tool: Tool) -> None:
        """Add `tool`; it becomes visible to the next lookup.

        Args:
            tool: the tool to add.

        Raises:
            ToolDefinitionError: if a tool with the same name is registered; unregister it
                first to replace it.
        """
        if tool.name in self._tools:
            raise ToolDefinitionError(
                f'a tool named "{tool.name}" is already registered; unregister it first to '
                "replace it"
            )
        self._tools[tool.name] = tool

    def unregister(self, name: str) -> Tool:
        """Remove the tool called `name`.

        Args:
            name: the tool name.

        Returns:
            The removed tool.

        Raises:
            UsageError: if no tool of that name is registered.
        """
        if name not in self._tools:
            raise UsageError(
                f'no tool named "{name}" is registered; registered: {sorted(self._tools)}'
            )
        return self._tools.pop(name)

    def get(self, name: str) -> Tool | None:
        """Return the tool called `name`, or None when there is none."""
        return self._tools.get(name)

    def schemas(self) -> list[JsonObject]:
        """Return the model-facing schemas.

        Returns:
            `[{"name", "description", "parameters"}, ...]` in registration order.
        """
        return [item.schema() for item in self._tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)


def unknown_tool_text(name: str) -> str:
    """Return the error text of a call of a tool the registry does not have.

    Args:
        name: the name the model called.

    Returns:
        `unknown tool "NAME"`; for an `mcp__SERVER__TOOL` name it adds that the MCP server is
        not connected and the `--mcp SERVER` that connects it (docs/mcp.md#naming).
    """
    server = name.split("__")[1] if name.startswith("mcp__") and name.count("__") > 1 else ""
    hint = f': its MCP server "{server}" is not connected (CLI: --mcp {server})' if server else ""
    return f'unknown tool "{name}"{hint}'
