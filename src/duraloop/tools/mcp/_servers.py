"""`McpServers`: connect MCP servers and offer their tools as ordinary duraloop tools.

See docs/mcp.md. Each MCP tool is a `duraloop.tools.Tool` named `mcp__<server>__<tool>`
(docs/mcp.md#naming), so its calls go through the same pipeline, hooks, approvals, scheduler
and recovery as any other tool.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Final

import anyio
import anyio.abc
import mcp_types as types

from ...errors import ConfigError, McpServerError
from .._context import ToolContext
from .._definition import Tool, ToolBody
from .._outcome import ToolOutcome
from ._config import McpServerConfig, mcp_tool_name
from ._convert import (
    description_of,
    is_parallel_safe,
    label,
    outcome_of_result,
    parameters_of,
    validate_arguments,
)
from ._link import ServerLink, StartError

logger = logging.getLogger("duraloop.tools.mcp")

SHUTDOWN_SECONDS: Final = 15.0
"""How long stopping waits for the servers to exit before it cancels what is left, in seconds.
A stdio server gets its stdin closed, then SIGTERM, then SIGKILL within about 6 s (the SDK)."""


class McpServers:
    """Connect MCP servers; their tools are `tools` (docs/mcp.md#connecting).

    An async context manager: entering it starts (or connects to) every server concurrently,
    makes the MCP handshake and lists each server's tools; leaving it stops every server
    (a stdio server's process is ended) and waits for them. Enter and leave it in one task.

    Args:
        servers: the servers, with distinct names.

    Raises:
        ConfigError: if two servers have the same name.
    """

    def __init__(self, servers: Sequence[McpServerConfig]) -> None:
        names = [server.name for server in servers]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ConfigError(
                f"MCP server names must be distinct; {', '.join(repeated)} is given more than once"
            )
        self._configs = tuple(servers)
        self._links: list[ServerLink] = []
        self._tools: tuple[Tool, ...] = ()
        self._task_group: anyio.abc.TaskGroup | None = None

    @property
    def tools(self) -> tuple[Tool, ...]:
        """Every server's tools, in configuration order, then in each server's listing order.

        Empty before entering.
        """
        return self._tools

    async def __aenter__(self) -> McpServers:
        """Start every server and list its tools.

        Returns:
            self, with `tools` filled.

        Raises:
            McpServerError: if a server fails to start, to initialize or to list its tools in
                its `startup_timeout_seconds`, or lists tools that cannot be offered; the
                one-line message names the server (the first such server, in configuration
                order). Every server already started is stopped first.
        """
        if self._task_group is not None:
            raise RuntimeError("McpServers is already entered; enter it once")
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        self._task_group = task_group
        self._links = [ServerLink(config, task_group) for config in self._configs]
        failures: dict[str, str] = {}
        listings: dict[str, list[types.Tool]] = {}
        try:
            async with anyio.create_task_group() as starting:
                for link in self._links:
                    starting.start_soon(_start, link, listings, failures)
            if not failures:
                self._tools = tuple(
                    tool
                    for link in self._links
                    for tool in _tools_of(link, listings[link.config.name])
                )
        except BaseException:
            await self._stop()
            raise
        if failures:
            await self._stop()
            name = next(config.name for config in self._configs if config.name in failures)
            raise _start_error(
                next(config for config in self._configs if config.name == name), failures[name]
            )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Stop every server and wait for it (bounded by `SHUTDOWN_SECONDS`)."""
        await self._stop()

    async def _stop(self) -> None:
        task_group = self._task_group
        if task_group is None:
            return
        self._task_group = None
        for link in self._links:
            link.close()
        with anyio.move_on_after(SHUTDOWN_SECONDS, shield=True):
            for link in self._links:
                await link.wait_closed()
        task_group.cancel_scope.cancel()
        await task_group.__aexit__(None, None, None)


async def _start(
    link: ServerLink, listings: dict[str, list[types.Tool]], failures: dict[str, str]
) -> None:
    try:
        listings[link.config.name] = await link.start()
    except StartError as exc:
        failures[link.config.name] = str(exc)


def _start_error(config: McpServerConfig, why: str) -> McpServerError:
    if config.command is not None:
        where = f"command {label(shlex.join(config.command))}"
        advice = "check the command runs and speaks MCP over stdio"
    else:
        where = f"url {label(config.url)}"
        advice = "check the server is running at that url and speaks streamable HTTP"
    return McpServerError(
        f"MCP server {config.name} ({where}) failed to start: {why}; {advice}, or remove it "
        "from the configuration",
        server=config.name,
    )


def _tools_of(link: ServerLink, listed: list[types.Tool]) -> list[Tool]:
    """Build the duraloop tools of one server's listing (docs/mcp.md#naming)."""
    config = link.config
    known = {tool.name for tool in listed}
    unknown = sorted(set(config.parallel) - known)
    if unknown:
        raise McpServerError(
            f"MCP server {config.name} lists no tool {label(unknown[0])}, which its parallel "
            f"setting names; use one of the server's tool names ({len(known)} listed)",
            server=config.name,
        )
    tools: list[Tool] = []
    names: dict[str, str] = {}
    for listed_tool in listed:
        public = mcp_tool_name(config.name, listed_tool.name)
        if public in names:
            raise McpServerError(
                f"MCP server {config.name} lists the tool {label(listed_tool.name)} twice, or "
                f"two tools both named {public}; fix the server's tool names",
                server=config.name,
            )
        parameters = parameters_of(listed_tool)
        if parameters is None:
            logger.warning(
                "MCP server %s: skipped the tool %s, whose input schema is not a JSON object "
                "schema of at most 64 KB (docs/mcp.md#naming)",
                config.name,
                label(listed_tool.name),
            )
            continue
        names[public] = listed_tool.name
        override = config.parallel.get(listed_tool.name)
        tools.append(
            Tool(
                name=public,
                description=description_of(listed_tool, config.name),
                parameters=parameters,
                validator=validate_arguments,
                body=_body(link, listed_tool.name),
                parallel=is_parallel_safe(listed_tool, override=override),
                timeout_seconds=config.timeout_seconds,
            )
        )
    return tools


def _body(link: ServerLink, tool: str) -> ToolBody:
    """The body of one MCP tool: call it on its server by its own name."""
    server = link.config.name

    async def call_mcp_tool(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        result = await link.call(tool, arguments)
        return outcome_of_result(result, server=server, tool=tool)

    return call_mcp_tool
