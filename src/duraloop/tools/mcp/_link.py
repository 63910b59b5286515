"""One MCP server's connection: start, call, lose, reconnect with backoff, stop.

See docs/mcp.md#failures. Each connection lives in a task of its own in the `McpServers` task
group: the SDK's client holds task groups and cancel scopes that must stay in one task, and a
transport that fails (an HTTP server gone mid-request) cancels that task, never a tool call's.
A call waits for its answer inside a cancel scope the connection cancels when it ends, so a
call on a connection that died is answered at once, never left waiting.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final

import anyio
import anyio.abc
import httpx2
import mcp_types as types
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from ...errors import ToolError
from ...log.vocabulary import MCP_PROTOCOL_ERROR, MCP_SERVER_UNAVAILABLE
from ._config import McpServerConfig
from ._convert import label

logger = logging.getLogger("duraloop.tools.mcp")

RECONNECT_BASE_SECONDS: Final = 1.0
"""The wait after the first failed reconnect, in seconds; it doubles after each failure."""

RECONNECT_MAX_SECONDS: Final = 30.0
"""The longest wait between reconnect attempts, in seconds."""

MAX_TOOL_PAGES: Final = 100
"""The most `tools/list` pages read from one server (a paginator that never ends cannot hang)."""

_Streams = tuple[Any, Any]
"""A transport's (read stream, write stream), the SDK's `TransportStreams`."""

_HTTP_TIMEOUT: Final = httpx2.Timeout(30.0, read=300.0)
"""The SDK's own HTTP timeouts: 30 s to connect, write or pool; 300 s to read (an SSE stream)."""


class _Connection:
    """One session with the server, from start to end; a reconnect makes a new one."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self.tools: list[types.Tool] = []
        self.error = ""
        self.ready = anyio.Event()  # set when it answers, or failed to
        self.stop = anyio.Event()  # set to end it
        self.finished = anyio.Event()  # set when its process and streams are released
        self.scope = anyio.CancelScope()
        self.calls: set[anyio.CancelScope] = set()

    @property
    def alive(self) -> bool:
        return self.client is not None and not self.stop.is_set()


class ServerLink:
    """Connect to one configured server and carry its calls (docs/mcp.md#failures).

    Args:
        config: the server.
        task_group: where connection tasks run; it outlives every call.
    """

    def __init__(self, config: McpServerConfig, task_group: anyio.abc.TaskGroup) -> None:
        self.config = config
        self._task_group = task_group
        self._connection: _Connection | None = None
        self._all: list[_Connection] = []
        self._lock = anyio.Lock()
        self._failures = 0
        self._retry_at = 0.0
        self._last_error = ""
        self._closed = False

    async def start(self) -> list[types.Tool]:
        """Make the first connection and return the server's tools.

        Returns:
            The tools the server lists.

        Raises:
            StartError: if the server did not start, answer the handshake or list its tools
                within `startup_timeout_seconds`; its message says why, in one line.
        """
        connection = await self._connect()
        if not connection.alive:
            await connection.finished.wait()
            raise StartError(connection.error)
        self._connection = connection
        return connection.tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call `tool` with `arguments` on the server, reconnecting first if it was lost.

        Args:
            tool: the server's own name for the tool.
            arguments: the call's arguments, a JSON object.

        Returns:
            The server's result (an `isError` result too).

        Raises:
            ToolError: `MCP_SERVER_UNAVAILABLE` if the server died during the call or cannot
                be reached now; `MCP_PROTOCOL_ERROR` if it answered a JSON-RPC error.
        """
        connection = await self._live_connection()
        client = connection.client
        if client is None:  # it ended since `_live_connection` returned it
            raise self._unavailable("closed the connection before the call was sent")
        result: types.CallToolResult | None = None
        with anyio.CancelScope() as scope:
            connection.calls.add(scope)
            try:
                result = await client.call_tool(tool, arguments)
            except MCPError as exc:
                if exc.code != types.CONNECTION_CLOSED:
                    raise ToolError(
                        f"MCP server {self.config.name} answered the call of {label(tool)} with "
                        f"error {exc.code}: {label(exc.message)}",
                        code=MCP_PROTOCOL_ERROR,
                    ) from exc
                self._lose(connection)
            finally:
                connection.calls.discard(scope)
        if result is None:  # the connection ended under the call
            self._lose(connection)
            raise ToolError(
                f"MCP server {self.config.name} closed the connection during the call of "
                f"{label(tool)} (it may have crashed), so whether the call had an effect is "
                "unknown; the next call restarts or reconnects to the server",
                code=MCP_SERVER_UNAVAILABLE,
            )
        return result

    def close(self) -> None:
        """Ask every connection to end; `wait_closed` waits for them."""
        self._closed = True
        for connection in self._all:
            connection.stop.set()

    async def wait_closed(self) -> None:
        """Wait until every connection released its process and streams."""
        for connection in self._all:
            await connection.finished.wait()

    async def _live_connection(self) -> _Connection:
        async with self._lock:
            connection = self._connection
            if connection is not None and connection.alive:
                return connection
            if self._closed:
                raise self._unavailable("is closed")
            wait = self._retry_at - anyio.current_time()
            if wait > 0:
                raise self._unavailable(
                    f"is unreachable ({self._last_error}); the next reconnect attempt is in "
                    f"{wait:.1f}s"
                )
            connection = await self._connect()
            if not connection.alive:
                self._failures += 1
                delay = RECONNECT_BASE_SECONDS * 2 ** (self._failures - 1)
                self._retry_at = anyio.current_time() + min(delay, RECONNECT_MAX_SECONDS)
                self._last_error = connection.error
                why = connection.error
                raise self._unavailable(f"could not be restarted or reconnected: {why}")
            self._failures = 0
            self._retry_at = 0.0
            self._connection = connection
            logger.info("MCP server %s reconnected", self.config.name)
            return connection

    def _unavailable(self, what: str) -> ToolError:
        # `what` follows "MCP server <name> "
        return ToolError(f"MCP server {self.config.name} {what}", code=MCP_SERVER_UNAVAILABLE)

    def _lose(self, connection: _Connection) -> None:
        if connection.alive:
            logger.warning("MCP server %s: the connection was lost", self.config.name)
        connection.stop.set()

    async def _connect(self) -> _Connection:
        """Start one connection and wait for it to answer, at most the startup timeout."""
        connection = _Connection()
        self._all = [c for c in self._all if not c.finished.is_set()]
        self._all.append(connection)
        self._task_group.start_soon(self._run, connection)
        seconds = self.config.startup_timeout_seconds
        try:
            with anyio.move_on_after(seconds):
                await connection.ready.wait()
        finally:
            if not connection.ready.is_set():
                connection.error = f"no answer to the handshake and tools/list within {seconds:g}s"
                connection.scope.cancel()
        return connection

    async def _run(self, connection: _Connection) -> None:
        # Every failure is kept as the connection's error: a raise here would cancel the
        # whole `McpServers` task group, and with it the code using the servers.
        try:
            with connection.scope:
                async with self._client(connection) as client:
                    connection.tools = await _list_tools(client)
                    connection.client = client
                    connection.ready.set()
                    await connection.stop.wait()
        except Exception as exc:  # kept as the connection's error (see above)
            connection.error = connection.error or _describe(exc)
            logger.debug("MCP server %s connection ended", self.config.name, exc_info=True)
        finally:
            connection.client = None
            connection.stop.set()
            connection.ready.set()
            for scope in list(connection.calls):
                scope.cancel()
            connection.finished.set()

    @asynccontextmanager
    async def _client(self, connection: _Connection) -> AsyncIterator[Client]:
        def ended() -> None:
            self._lose(connection)

        config = self.config
        if config.command is not None:
            program, *args = config.command
            parameters = StdioServerParameters(
                command=program,
                args=args,
                env=dict(config.env) or None,
                cwd=config.cwd,
            )
            transport = stdio_client(parameters, errlog=sys.stderr)
            async with Client(_watched(transport, ended)) as client:
                yield client
            return
        url = config.url or ""  # McpServerConfig checks exactly one of command and url is set
        async with (
            httpx2.AsyncClient(headers=dict(config.headers), timeout=_HTTP_TIMEOUT) as http,
            Client(_watched(streamable_http_client(url, http_client=http), ended)) as client,
        ):
            yield client


@asynccontextmanager
async def _watched(
    transport: AbstractAsyncContextManager[_Streams], ended: Callable[[], None]
) -> AsyncIterator[_Streams]:
    """The transport, its read stream watched: `ended()` runs when the server's side ends.

    So a server that exits while no call is running is noticed, and the next call starts or
    connects to it again instead of failing on the dead connection.
    """
    async with transport as (read_stream, write_stream):
        yield _WatchedReadStream(read_stream, ended), write_stream


class _WatchedReadStream:
    """A read stream that calls `ended()` once it ends (end of stream, or closed)."""

    def __init__(self, stream: Any, ended: Callable[[], None]) -> None:
        self._stream = stream
        self._ended = ended

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)  # e.g. `last_context`, read by the dispatcher

    async def receive(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended()
            raise
        return item

    async def aclose(self) -> None:
        await self._stream.aclose()

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedReadStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class StartError(Exception):
    """Raised when the first connection fails; `McpServers` turns it into a `McpServerError`."""


async def _list_tools(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _describe(exc: BaseException) -> str:
    """One line for a failure: the first leaf of an exception group, its type and message."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError) and exc.code == types.CONNECTION_CLOSED:
        return "the server closed the connection (did it exit? see its stderr)"
    text = " ".join(str(exc).split()) or type(exc).__name__
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(exc).__name__}: {text}"
