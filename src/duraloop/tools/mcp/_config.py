"""What to connect to: `McpServerConfig`, and the model-facing name of an MCP tool.

See docs/mcp.md#connecting and docs/mcp.md#naming. Nothing here imports the MCP SDK.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from ...errors import ConfigError

SERVER_NAME_PATTERN: Final = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
"""A server's name: 1-32 characters of `A-Z a-z 0-9 _ -` (docs/mcp.md#naming)."""

TOOL_NAME_LIMIT: Final = 64
"""The longest tool name duraloop (and the providers) accept, in characters."""

_INVALID_CHARACTER: Final = re.compile(r"[^A-Za-z0-9_-]")
_HASH_CHARACTERS: Final = 12


def mcp_tool_name(server: str, tool: str) -> str:
    r"""Return the model-facing name of the MCP tool `tool` of server `server`.

    The name is `mcp__<server>__<tool>` (dsh's naming). When that is not a valid duraloop tool
    name, every character outside `A-Z a-z 0-9 _ -` becomes `_`, the name is cut to leave room,
    and `_` plus the first 12 hex digits of the SHA-256 of `<server>\0<tool>` is appended, so two
    different tools never share a name (docs/mcp.md#naming). Deterministic: the same server and
    tool always give the same name, across restarts and processes.

    Args:
        server: the server's configured name (1-32 characters of `A-Z a-z 0-9 _ -`).
        tool: the server's own name for the tool, as it lists it.

    Returns:
        A name of 1-64 characters of `A-Z a-z 0-9 _ -`.

    Raises:
        ConfigError: if `server` is not a valid server name.
    """
    _check_server_name(server)
    joined = f"mcp__{server}__{tool}"
    normalized = _INVALID_CHARACTER.sub("_", joined)
    if normalized == joined and len(joined) <= TOOL_NAME_LIMIT:
        return joined
    digest = hashlib.sha256(f"{server}\0{tool}".encode("utf-8", "surrogatepass")).hexdigest()
    keep = TOOL_NAME_LIMIT - _HASH_CHARACTERS - 1
    return f"{normalized[:keep]}_{digest[:_HASH_CHARACTERS]}"


@dataclass(frozen=True)
class McpServerConfig:
    """One MCP server to connect to, over stdio or streamable HTTP (docs/mcp.md#connecting).

    Args:
        name: the server's name in duraloop, 1-32 characters of `A-Z a-z 0-9 _ -`; its tools
            are named `mcp__<name>__<tool>` (docs/mcp.md#naming).
        command: for a stdio server, the argv that starts it (no shell). Exactly one of
            `command` and `url` is given.
        url: for a streamable HTTP server, its endpoint (`http://` or `https://`).
        env: extra environment variables of a stdio server. The server gets only these over
            the MCP SDK's safe defaults (`HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`),
            not this process's whole environment.
        cwd: the working directory of a stdio server; None inherits this process's.
        headers: HTTP headers sent with every request to a streamable HTTP server (e.g.
            `Authorization`).
        timeout_seconds: the limit on one call in seconds, or None for none; a call over it
            gets a `TOOL_TIMEOUT` error result and the server is sent a cancellation.
        startup_timeout_seconds: how long starting the server, the MCP handshake and listing
            its tools may take, in seconds, at start and at each reconnect.
        parallel: per tool (by the server's own tool name), True for parallel-safe or False
            for exclusive, over what the server's annotations say (docs/mcp.md#parallel-calls).

    Raises:
        ConfigError: if the name is invalid, not exactly one of `command` and `url` is given,
            an option belongs to the other transport, or a timeout is not > 0 and finite.
    """

    name: str
    command: tuple[str, ...] | None = None
    url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_seconds: float | None = 60.0
    startup_timeout_seconds: float = 30.0
    parallel: Mapping[str, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_server_name(self.name)
        label = f"MCP server {self.name!r}"
        if (self.command is None) == (self.url is None):
            raise ConfigError(
                f"{label}: give exactly one of command (a stdio server) and url (a streamable "
                "HTTP server)"
            )
        if self.command is not None:
            command = tuple(self.command)
            if not command or not all(isinstance(part, str) for part in command) or not command[0]:
                raise ConfigError(
                    f"{label}: command must be a non-empty sequence of strings, the program first"
                )
            object.__setattr__(self, "command", command)
            if self.headers:
                raise ConfigError(f"{label}: headers are for a url server; a stdio server has none")
        if self.url is not None:
            if not isinstance(self.url, str) or not self.url.startswith(("http://", "https://")):
                raise ConfigError(f"{label}: url must start with http:// or https://")
            if self.env or self.cwd is not None:
                raise ConfigError(
                    f"{label}: env and cwd are for a command server; a url server has neither"
                )
        for option in ("env", "headers"):
            mapping = getattr(self, option)
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()):
                raise ConfigError(f"{label}: {option} must map strings to strings")
            object.__setattr__(self, option, dict(mapping))
        if not all(isinstance(k, str) and type(v) is bool for k, v in self.parallel.items()):
            raise ConfigError(f"{label}: parallel must map tool names to True or False")
        object.__setattr__(self, "parallel", dict(self.parallel))
        if self.cwd is not None:
            object.__setattr__(self, "cwd", Path(self.cwd))
        _check_seconds(label, "timeout_seconds", self.timeout_seconds, optional=True)
        _check_seconds(label, "startup_timeout_seconds", self.startup_timeout_seconds)

    @property
    def transport(self) -> str:
        """`"stdio"` for a command server, `"http"` for a url server."""
        return "stdio" if self.command is not None else "http"


def _check_server_name(name: object) -> None:
    if not isinstance(name, str) or not SERVER_NAME_PATTERN.match(name):
        raise ConfigError(
            f"MCP server name {name!r} is invalid: use 1-32 characters of A-Z, a-z, 0-9, _ or -"
        )


def _check_seconds(label: str, option: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigError(f"{label}: {option} must be > 0 and finite, got {value!r}")
