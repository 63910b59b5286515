"""`--mcp NAMES`: start the config file's MCP servers around a command's turns.

`run`, `chat` and `resume` take `--mcp files,search` (comma-separated, as `--ask-before`):
the named `[mcp.servers.NAME]` tables of `$DURALOOP_HOME/config.toml` are checked before
anything is written (an unknown name lists the configured ones; the `mcp` extra must be
installed), the servers are started before the session is opened, their tools (named
`mcp__NAME__TOOL`) are added to the command's tool registry, and the servers are stopped
when the command's event loop ends: after the turn, on an error, or on Ctrl-C
(docs/cli.md#mcp-servers).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Annotated, TypeVar

import anyio
import typer

from ._mcp_config import chosen_servers, mcp_client, parse_mcp_names

if TYPE_CHECKING:
    from ..tools import Tool, ToolRegistry
    from ..tools.mcp import McpServerConfig

_T = TypeVar("_T")


def _names(value: str | None) -> str | None:
    if value is not None and not parse_mcp_names(value):
        raise typer.BadParameter(
            f"{value!r} names no MCP server; pass the comma-separated names of "
            "[mcp.servers.NAME] tables in $DURALOOP_HOME/config.toml"
        )
    return value


McpOption = Annotated[
    str | None,
    typer.Option(
        "--mcp",
        metavar="NAMES",
        callback=_names,
        help="MCP servers to start for this command, comma-separated names of "
        "[mcp.servers.NAME] tables in $DURALOOP_HOME/config.toml; their tools are "
        "mcp__NAME__TOOL (needs the mcp extra).",
    ),
]


def mcp_configs(text: str | None) -> list[McpServerConfig]:
    """Return the configs of the servers `--mcp` names, checked (none when not given).

    Args:
        text: the `--mcp` value, or None.

    Returns:
        One `McpServerConfig` per name, in the order given.

    Raises:
        UsageError: for a name the config file does not define (the configured names are
            listed), or if the `mcp` extra is not installed (`mcp_client`).
        ConfigError: if the config file is invalid.
    """
    if text is None:
        return []
    from ._config import load_config
    from ._config_file import config_path

    path = config_path(os.environ)
    names = parse_mcp_names(text)
    entries = chosen_servers(load_config(path).mcp_servers, names, path=path)
    mcp_client(f"--mcp {','.join(names)}")  # before anything is written
    return [entry.config() for entry in entries]


async def with_mcp_servers(
    servers: Sequence[McpServerConfig],
    tools: ToolRegistry | Sequence[Tool],
    body: Callable[[], Awaitable[_T]],
) -> _T:
    """Await `body` with `servers` running and their tools registered in `tools`.

    Args:
        servers: the servers to start (none: `body` alone runs).
        tools: the command's tool registry (the setup's `tools`); the servers' tools are
            added before `body` and removed after it.
        body: opens the session and runs its turns.

    Returns:
        What `body` returns.

    Raises:
        McpServerError: naming the server, if one fails to start (nothing is opened).
        UsageError: if the `mcp` extra is not installed.
        TypeError: if `tools` is not a `ToolRegistry` (`TurnOptions.session_setup` makes one).
        Exception: what `body` raises; the servers are stopped first.
    """
    if not servers:
        return await body()
    from ..tools import ToolRegistry

    if not isinstance(tools, ToolRegistry):
        raise TypeError("with_mcp_servers needs the setup's ToolRegistry to add tools to")
    running = mcp_client("--mcp")(servers)
    async with running:
        for tool in running.tools:
            tools.register(tool)
        try:
            return await body()
        finally:
            for tool in running.tools:
                tools.unregister(tool.name)


def run_with_mcp(
    servers: Sequence[McpServerConfig],
    tools: ToolRegistry | Sequence[Tool],
    body: Callable[[], Awaitable[_T]],
) -> _T:
    """Run `with_mcp_servers(servers, tools, body)` in a new event loop (`anyio.run`).

    Returns:
        What `body` returns.

    Raises:
        McpServerError: naming the server, if one fails to start.
        Exception: what `body` raises.
    """

    async def main() -> _T:
        return await with_mcp_servers(servers, tools, body)

    return anyio.run(main)
