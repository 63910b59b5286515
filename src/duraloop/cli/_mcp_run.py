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
import signal
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Annotated, TypeVar

import anyio
import typer

from ._mcp_config import chosen_servers, mcp_client, parse_mcp_names
from ._runner import EXIT_AT_ONCE

if TYPE_CHECKING:
    from ..tools import Tool, ToolRegistry
    from ..tools.mcp import McpServerConfig, McpServers

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
    try:
        return await _guarded(running, tools, body)
    except BaseExceptionGroup as group:  # the guard's: only the command's own error is in it
        if len(group.exceptions) != 1:
            raise
        raise group.exceptions[0] from None


async def _guarded(
    running: McpServers, tools: ToolRegistry, body: Callable[[], Awaitable[_T]]
) -> _T:
    """`with_mcp_servers` once the servers are chosen: start, register, run `body`, stop."""
    async with anyio.create_task_group() as guard:
        watching = anyio.CancelScope()
        if threading.current_thread() is threading.main_thread():
            guard.start_soon(_stop_on_sigterm, watching, guard.cancel_scope)
        try:
            await running.__aenter__()  # a SIGTERM meanwhile cancels it: it stops what started
        finally:
            watching.cancel()  # from now on the turn handles signals itself
        try:
            for tool in running.tools:
                tools.register(tool)
            try:
                result = await body()
            finally:
                for tool in running.tools:
                    tools.unregister(tool.name)
        except BaseException as exc:
            await running.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        await running.__aexit__(None, None, None)
        return result
    # Only a SIGTERM during the start gets here (the guard absorbed its own cancellation).
    raise typer.Exit(EXIT_AT_ONCE)


async def _stop_on_sigterm(watching: anyio.CancelScope, startup: anyio.CancelScope) -> None:
    """Cancel `startup` on SIGTERM, until `watching` is cancelled.

    Starting the servers comes before the turn's own signal handling: without this, a
    SIGTERM then would end the process at once and leave a started stdio server running
    (the SDK starts it in its own session, so the signal does not reach it). With it,
    `McpServers` is cancelled, stops what it started, and the command exits 130, as on
    Ctrl-C.
    """
    with watching, anyio.open_signal_receiver(signal.SIGTERM) as signals:
        async for _ in signals:
            startup.cancel()
            return


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
