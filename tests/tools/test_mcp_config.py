"""MCP naming and configuration rules (docs/mcp.md#naming, docs/mcp.md#connecting); no servers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from duraloop.errors import ConfigError, McpServerError, UsageError
from duraloop.tools.mcp import McpServerConfig, McpServers, mcp_tool_name

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def test_a_valid_name_is_mcp_server_tool_unchanged() -> None:
    assert mcp_tool_name("github", "create_issue") == "mcp__github__create_issue"
    assert mcp_tool_name("w", "get-forecast") == "mcp__w__get-forecast"


@pytest.mark.parametrize(
    "tool", ["files.read", "a b", "ünïcode", "x" * 80, "a/b", "tab\there", "a.b.c" * 30]
)
def test_an_invalid_name_is_normalized_and_hashed_into_a_valid_one(tool: str) -> None:
    name = mcp_tool_name("srv", tool)
    assert VALID.match(name), name
    assert name.startswith("mcp__srv__")
    assert re.search(r"_[0-9a-f]{12}$", name)
    assert mcp_tool_name("srv", tool) == name, "deterministic"


def test_names_that_normalize_alike_stay_distinct() -> None:
    assert mcp_tool_name("s", "a.b") != mcp_tool_name("s", "a_b")
    assert mcp_tool_name("s", "a.b") != mcp_tool_name("s", "a-b.")
    long_a, long_b = "x" * 70 + "a", "x" * 70 + "b"
    assert mcp_tool_name("s", long_a) != mcp_tool_name("s", long_b)


def test_the_same_tool_of_two_servers_gets_two_names() -> None:
    assert mcp_tool_name("a", "search") != mcp_tool_name("b", "search")


@pytest.mark.parametrize("name", ["", "has space", "dot.ted", "x" * 33, "ünï"])
def test_a_server_name_outside_the_rule_is_a_config_error(name: str) -> None:
    with pytest.raises(ConfigError, match="MCP server name"):
        McpServerConfig(name=name, command=("x",))
    with pytest.raises(ConfigError):
        mcp_tool_name(name, "t")


def test_exactly_one_of_command_and_url() -> None:
    with pytest.raises(ConfigError, match="exactly one of command"):
        McpServerConfig(name="s")
    with pytest.raises(ConfigError, match="exactly one of command"):
        McpServerConfig(name="s", command=("x",), url="http://h/mcp")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"command": ()}, "non-empty sequence"),
        ({"command": ("",)}, "non-empty sequence"),
        ({"url": "ftp://h"}, "http:// or https://"),
        ({"command": ("x",), "headers": {"A": "b"}}, "headers are for a url server"),
        ({"url": "http://h/mcp", "env": {"A": "b"}}, "env and cwd are for a command"),
        ({"url": "http://h/mcp", "cwd": Path("/")}, "env and cwd are for a command"),
        ({"command": ("x",), "env": {"A": 1}}, "env must map strings"),
        ({"command": ("x",), "parallel": {"t": 1}}, "parallel must map tool names"),
        ({"command": ("x",), "timeout_seconds": 0}, "timeout_seconds must be > 0"),
        ({"command": ("x",), "timeout_seconds": float("inf")}, "timeout_seconds must be > 0"),
        ({"command": ("x",), "startup_timeout_seconds": -1}, "startup_timeout_seconds"),
    ],
)
def test_a_bad_option_is_a_config_error_naming_the_server(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        McpServerConfig(name="srv", **options)  # type: ignore[arg-type]
    assert "'srv'" in str(raised.value)


def test_a_command_list_is_kept_as_a_tuple_and_no_timeout_is_allowed() -> None:
    config = McpServerConfig(name="s", command=["prog", "arg"], timeout_seconds=None)  # type: ignore[arg-type]
    assert config.command == ("prog", "arg")
    assert config.transport == "stdio"
    assert McpServerConfig(name="s", url="https://h/mcp").transport == "http"


def test_two_servers_with_one_name_are_refused() -> None:
    with pytest.raises(ConfigError, match="distinct; a is given more than once"):
        McpServers(
            [McpServerConfig(name="a", command=("x",)), McpServerConfig(name="a", url="http://h")]
        )


def test_mcp_server_error_is_a_usage_error_naming_its_server() -> None:
    error = McpServerError("MCP server s failed", server="s")
    assert isinstance(error, UsageError)
    assert error.server == "s"


def test_importing_duraloop_tools_does_not_import_the_mcp_sdk() -> None:
    code = (
        "import sys, duraloop.tools, duraloop.tools.mcp\n"
        "from duraloop.tools.mcp import McpServerConfig, mcp_tool_name\n"
        "assert 'mcp' not in sys.modules, 'config and naming need no SDK'\n"
        "from duraloop.tools.mcp import McpServers\n"
        "assert 'mcp' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
