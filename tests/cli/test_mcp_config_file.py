"""The `[mcp.servers.NAME]` tables of config.toml (docs/cli.md#mcp-servers).

Pins the strict parse: each mistake is a `ConfigError` naming the file, the line and the
dotted key; a valid table keeps every value; the tables are read without the MCP SDK.
The line numbers asserted below were counted by hand in the TOML texts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from duraloop.cli._config import load_config
from duraloop.cli._mcp_config import chosen_servers, parse_mcp_names
from duraloop.errors import ConfigError, UsageError


def _load(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_stdio_and_an_http_server_keep_every_value(tmp_path: Path) -> None:
    path = _load(
        tmp_path,
        """\
[mcp.servers.files]
command = ["python", "server.py"]
env = { TOKEN = "t" }
cwd = "servers"
timeout = 5
startup_timeout = 2.5
parallel = { search = true, reset = false }

[mcp.servers.remote]
url = "https://example.com/mcp"
headers = { Authorization = "Bearer x" }
""",
    )
    servers = load_config(path).mcp_servers
    assert list(servers) == ["files", "remote"]
    files, remote = servers["files"], servers["remote"]
    assert files.command == ("python", "server.py")
    assert files.url is None
    assert files.env == {"TOKEN": "t"}
    assert files.cwd == tmp_path / "servers"  # relative to the config file's folder
    assert (files.timeout, files.startup_timeout) == (5.0, 2.5)
    assert files.parallel == {"search": True, "reset": False}
    assert remote.url == "https://example.com/mcp"
    assert remote.command is None
    assert remote.headers == {"Authorization": "Bearer x"}
    assert (remote.timeout, remote.startup_timeout) == (60.0, 30.0)
    built = files.config()  # the library's config, every value carried over
    assert (built.name, built.command, built.url) == ("files", ("python", "server.py"), None)
    assert (built.env, built.cwd) == ({"TOKEN": "t"}, tmp_path / "servers")
    assert (built.timeout_seconds, built.startup_timeout_seconds) == (5.0, 2.5)
    assert built.parallel == {"search": True, "reset": False}
    assert remote.config().headers == {"Authorization": "Bearer x"}


def test_timeout_false_means_no_per_call_timeout(tmp_path: Path) -> None:
    path = _load(tmp_path, '[mcp.servers.a]\ncommand = ["x"]\ntimeout = false\n')
    entry = load_config(path).mcp_servers["a"]
    assert entry.timeout is None
    assert entry.config().timeout_seconds is None


def test_a_file_without_mcp_has_no_servers(tmp_path: Path) -> None:
    assert load_config(_load(tmp_path, 'default_model = "scripted:x"\n')).mcp_servers == {}


@pytest.mark.parametrize(
    ("text", "line", "key", "problem"),
    [
        (
            '[mcp.servers.a]\ncommand = ["x"]\nport = 1\n',
            3,
            "mcp.servers.a.port",
            "is not a known key",
        ),
        (
            '[mcp.servers.a]\ncommand = ["x"]\nurl = "http://h/mcp"\n',
            1,
            "mcp.servers.a",
            "has both of `command` and `url`",
        ),
        (
            "[mcp.servers.a]\ntimeout = 3\n",
            1,
            "mcp.servers.a",
            "has neither of `command` and `url`",
        ),
        ('[mcp.servers.a]\ncommand = "python x.py"\n', 2, "mcp.servers.a.command", "array"),
        ("[mcp.servers.a]\ncommand = []\n", 2, "mcp.servers.a.command", "non-empty"),
        ('[mcp.servers.a]\ncommand = ["x", 1]\n', 2, "mcp.servers.a.command", "strings"),
        ('[mcp.servers.a]\nurl = "ftp://h"\n', 2, "mcp.servers.a.url", "http:// or https://"),
        (
            '[mcp.servers.a]\ncommand = ["x"]\ntimeout = "5"\n',
            3,
            "mcp.servers.a.timeout",
            "seconds > 0",
        ),
        (
            '[mcp.servers.a]\ncommand = ["x"]\nstartup_timeout = 0\n',
            3,
            "mcp.servers.a.startup_timeout",
            "seconds > 0",
        ),
        (
            '[mcp.servers.a]\ncommand = ["x"]\ntimeout = true\n',
            3,
            "mcp.servers.a.timeout",
            "seconds > 0",
        ),
        (
            '[mcp.servers.a]\ncommand = ["x"]\nenv = { A = 1 }\n',
            3,
            "mcp.servers.a.env",
            "string values",
        ),
        (
            '[mcp.servers.a]\ncommand = ["x"]\nparallel = { t = "yes" }\n',
            3,
            "mcp.servers.a.parallel",
            "true|false",
        ),
        (
            '[mcp.servers.a]\ncommand = ["x"]\nheaders = { A = "b" }\n',
            3,
            "mcp.servers.a.headers",
            "does not apply to a `command` server",
        ),
        (
            '[mcp.servers.a]\nurl = "http://h/mcp"\ncwd = "."\n',
            3,
            "mcp.servers.a.cwd",
            "does not apply to a `url` server",
        ),
        ('[mcp.servers.a]\ncommand = ["x"]\ncwd = 3\n', 3, "mcp.servers.a.cwd", "path string"),
        ('[mcp.servers."a b"]\ncommand = ["x"]\n', 1, "mcp.servers.a b", "not a server name"),
        ("[mcp]\nservers = 3\n", 2, "mcp.servers", "must be a table"),
        ('mcp = "x"\n', 1, "mcp", "must be a table"),
        ("[mcp.clients.a]\n", 1, "mcp.clients", "is not a known key"),
        ("[mcp.servers]\na = 3\n", 2, "mcp.servers.a", "must be a table"),
    ],
)
def test_a_bad_mcp_table_names_the_file_the_line_and_the_key(
    tmp_path: Path, text: str, line: int, key: str, problem: str
) -> None:
    path = _load(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"config file {path}, line {line}: `{key}` "), message
    assert problem in message


def test_an_unknown_server_name_lists_the_configured_ones(tmp_path: Path) -> None:
    path = _load(
        tmp_path, '[mcp.servers.files]\ncommand = ["x"]\n[mcp.servers.web]\nurl = "http://h"\n'
    )
    servers = load_config(path).mcp_servers
    with pytest.raises(UsageError) as caught:
        chosen_servers(servers, ("files", "serch"), path=path)
    assert str(caught.value) == (
        f"--mcp 'serch' is not a configured MCP server; configured in {path}: files, web"
    )
    assert [entry.name for entry in chosen_servers(servers, ("web", "files"), path=path)] == [
        "web",
        "files",
    ]


def test_an_unknown_server_name_without_any_configured_says_how_to_add_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.toml"
    with pytest.raises(UsageError, match=r"none is configured: add an \[mcp\.servers\.NAME\]"):
        chosen_servers({}, ("files",), path=path)


def test_mcp_names_are_comma_separated_without_blanks_or_repeats() -> None:
    assert parse_mcp_names(" files, web,,files ") == ("files", "web")
    assert parse_mcp_names(" , ") == ()
