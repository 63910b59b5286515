"""The `[mcp.servers.NAME]` tables of the config file: the MCP servers `--mcp NAME` starts.

```toml
[mcp.servers.files]                 # a stdio server: duraloop starts it as a child process
command = ["python", "server.py"]   # argv; the first item is looked up on PATH
env = { API_TOKEN = "..." }         # the child gets these, not duraloop's environment
cwd = "servers"                     # relative to this file's folder
timeout = 60                        # seconds per call (default 60; false: none)
startup_timeout = 30                # seconds to connect and list the tools (default 30)
parallel = { search = true }        # per server-side tool: override readOnlyHint

[mcp.servers.remote]                # a streamable HTTP server
url = "https://example.com/mcp"
headers = { Authorization = "Bearer ..." }
```

Each table is checked here, strictly, without importing the MCP SDK: a config that names
servers works without the `mcp` extra until a command uses one (`--mcp NAME`); only then
is `duraloop.tools.mcp` imported (docs/cli.md#mcp-servers).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..errors import UsageError
from ._config_file import TomlFile, refuse_unknown

if TYPE_CHECKING:
    from ..tools.mcp import McpServerConfig, McpServers

SERVER_KEYS: Final = (
    "command",
    "url",
    "env",
    "cwd",
    "headers",
    "timeout",
    "startup_timeout",
    "parallel",
)
_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,32}")
_STDIO_ONLY: Final = ("env", "cwd")
_HTTP_ONLY: Final = ("headers",)
INSTALL_HINT: Final = "pip install 'duraloop[mcp]'"


@dataclass(frozen=True)
class McpServerEntry:
    """One `[mcp.servers.NAME]` table, checked; `config()` builds the library's config.

    Args:
        name: the table's NAME (1 to 32 of `A-Za-z0-9_-`).
        where: `config file PATH, line N` of the table, for messages.
        command: the stdio server's argv, or None for a `url` server.
        url: the streamable HTTP server's URL, or None for a `command` server.
        env: the child's variables, over the SDK's default environment (HOME, PATH, ...);
            it does not inherit duraloop's environment.
        cwd: the child's working directory (resolved against the config file's folder).
        headers: HTTP headers sent to a `url` server.
        timeout: seconds per call; None for no timeout (`timeout = false`).
        startup_timeout: seconds to connect and list the tools.
        parallel: per server-side tool name, whether its calls may run in parallel.
    """

    name: str
    where: str
    command: tuple[str, ...] | None = None
    url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = 60.0
    startup_timeout: float = 30.0
    parallel: Mapping[str, bool] = field(default_factory=dict)

    def config(self) -> McpServerConfig:
        """Return the `duraloop.tools.mcp.McpServerConfig` of this entry (no SDK import)."""
        from ..tools.mcp import McpServerConfig

        return McpServerConfig(
            name=self.name,
            command=self.command,
            url=self.url,
            env=dict(self.env),
            cwd=self.cwd,
            headers=dict(self.headers),
            timeout_seconds=self.timeout,
            startup_timeout_seconds=self.startup_timeout,
            parallel=dict(self.parallel),
        )


def mcp_servers_of(file: TomlFile) -> dict[str, McpServerEntry]:
    """Check the `[mcp]` table of a parsed config file.

    Args:
        file: the parsed config file.

    Returns:
        The servers by name, in file order (empty without an `[mcp]` table).

    Raises:
        ConfigError: naming the file, the line and the dotted key, if `mcp` or `mcp.servers`
            is not a table, a name is not `A-Za-z0-9_-`, a key is unknown, a server has both
            or neither of `command` and `url`, a stdio-only key (`env`, `cwd`) is given to a
            `url` server or `headers` to a `command` server, or a value has the wrong type or
            range (docs/cli.md#mcp-servers).
    """
    mcp = file.data.get("mcp")
    if mcp is None:
        return {}
    if not isinstance(mcp, dict):
        raise file.fail(("mcp",), f"must be a table holding [mcp.servers.NAME] tables, got {mcp!r}")
    refuse_unknown(mcp, ("servers",), ("mcp",), file.fail)
    servers = mcp.get("servers", {})
    if not isinstance(servers, dict):
        raise file.fail(
            ("mcp", "servers"), f"must be a table of [mcp.servers.NAME] tables, got {servers!r}"
        )
    return {name: _entry(file, name, table) for name, table in servers.items()}


def _entry(file: TomlFile, name: str, table: Any) -> McpServerEntry:
    key = ("mcp", "servers", name)
    if not _NAME.fullmatch(name):
        raise file.fail(key, "is not a server name: use 1 to 32 letters, digits, _ and -")
    if not isinstance(table, dict):
        raise file.fail(key, f"must be a table, got {table!r}")
    refuse_unknown(table, SERVER_KEYS, key, file.fail)
    has_command, has_url = "command" in table, "url" in table
    if has_command == has_url:
        both = "both" if has_command else "neither"
        raise file.fail(
            key,
            f'has {both} of `command` and `url`: give exactly one, `command = ["python", '
            '"server.py"]` for a stdio server or `url = "https://..."` for an HTTP one',
        )
    wrong = _HTTP_ONLY if has_command else _STDIO_ONLY
    for option in wrong:
        if option in table:
            kind = "a `url` server" if has_url else "a `command` server"
            raise file.fail((*key, option), f"does not apply to {kind}")
    cwd = table.get("cwd")
    if cwd is not None and (not isinstance(cwd, str) or not cwd):
        raise file.fail((*key, "cwd"), f"must be a directory path string, got {cwd!r}")
    return McpServerEntry(
        name=name,
        where=file.where(*key),
        command=_command(file, key, table.get("command")) if has_command else None,
        url=_url(file, key, table.get("url")) if has_url else None,
        env=_strings(file, (*key, "env"), table.get("env", {})),
        cwd=None if cwd is None else file.path.parent / Path(cwd).expanduser(),
        headers=_strings(file, (*key, "headers"), table.get("headers", {})),
        timeout=_timeout(file, (*key, "timeout"), table.get("timeout", 60.0)),
        startup_timeout=_seconds(
            file, (*key, "startup_timeout"), table.get("startup_timeout", 30.0)
        ),
        parallel=_flags(file, (*key, "parallel"), table.get("parallel", {})),
    )


def _command(file: TomlFile, key: tuple[str, ...], value: Any) -> tuple[str, ...]:
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(item, str) for item in value)
        or not value[0]
    ):
        raise file.fail(
            (*key, "command"),
            'must be a non-empty array of strings (argv), e.g. ["python", "server.py"], '
            f"got {value!r}",
        )
    return tuple(value)


def _url(file: TomlFile, key: tuple[str, ...], value: Any) -> str:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise file.fail((*key, "url"), f"must be an http:// or https:// URL string, got {value!r}")
    return value


def _strings(file: TomlFile, key: tuple[str, ...], value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(item, str) for item in value.values()):
        raise file.fail(
            key, f'must be a table of string values, e.g. {{ NAME = "value" }}, got {value!r}'
        )
    return dict(value)


def _flags(file: TomlFile, key: tuple[str, ...], value: Any) -> dict[str, bool]:
    if not isinstance(value, dict) or not all(isinstance(item, bool) for item in value.values()):
        raise file.fail(key, f"must be a table of tool name = true|false, got {value!r}")
    return dict(value)


def _timeout(file: TomlFile, key: tuple[str, ...], value: Any) -> float | None:
    """`timeout`: seconds > 0, or `false` for no per-call timeout."""
    return None if value is False else _seconds(file, key, value, none="; or false for none")


def _seconds(file: TomlFile, key: tuple[str, ...], value: Any, *, none: str = "") -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise file.fail(key, f"must be a number of seconds > 0{none}, got {value!r}")
    return float(value)


def chosen_servers(
    entries: Mapping[str, McpServerEntry], names: Sequence[str], *, path: Path
) -> list[McpServerEntry]:
    """Return the entries `--mcp` names, in the order given.

    Args:
        entries: the config file's servers.
        names: the names given to `--mcp`.
        path: the config file, for the message.

    Returns:
        The entries.

    Raises:
        UsageError: for a name the config file does not define; the message lists the
            configured names (or says how to configure one).
    """
    unknown = [name for name in names if name not in entries]
    if not unknown:
        return [entries[name] for name in names]
    configured = (
        f"configured in {path}: {', '.join(entries)}"
        if entries
        else f"none is configured: add an [mcp.servers.NAME] table to {path}"
    )
    listed = ", ".join(repr(name) for name in unknown)
    verb = (
        "is not a configured MCP server" if len(unknown) == 1 else "are not configured MCP servers"
    )
    raise UsageError(f"--mcp {listed} {verb}; {configured}")


def parse_mcp_names(text: str) -> tuple[str, ...]:
    """Parse `--mcp`: a comma-separated list of server names (blanks ignored, no repeats)."""
    return tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))


def mcp_client(what: str) -> type[McpServers]:
    """Return `duraloop.tools.mcp.McpServers`, importing the MCP SDK.

    Args:
        what: what needs it, for the message (`--mcp files`, `duraloop demo --mcp`).

    Raises:
        UsageError: if the `mcp` extra is not installed; the message says how to install it.
    """
    try:
        from ..tools.mcp import McpServers
    except ImportError as exc:
        raise UsageError(
            f"{what} needs the MCP client, which is not installed ({exc}); run: {INSTALL_HINT}"
        ) from exc
    return McpServers
