"""MCP servers as duraloop tools over stdio, streamable HTTP and in-process HTTP (docs/mcp.md).

Every server is the SDK's own `MCPServer` (`_mcp_server.py`); nothing is mocked.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from _mcp_support import (
    by_name,
    dispatch,
    free_port,
    http_in_process,
    http_subprocess,
    iter_texts,
    pid_alive,
    stdio_config,
    wait_for_file,
)

from duraloop.errors import McpServerError
from duraloop.log.vocabulary import INVALID_ARGS, MCP_PROTOCOL_ERROR, MCP_TOOL_ERROR
from duraloop.tools import ToolOutcome
from duraloop.tools.mcp import McpServerConfig, McpServers

pytestmark = pytest.mark.anyio

TRANSPORTS = ["stdio", "http", "in-process"]


@asynccontextmanager
async def connected(transport: str, state: Path, **options: Any) -> AsyncIterator[McpServers]:
    """`McpServers` with one server `t` over `transport`."""
    if transport == "stdio":
        async with McpServers([stdio_config(state, **options)]) as servers:
            yield servers
        return
    serve = http_subprocess if transport == "http" else http_in_process
    async with serve(state) as url:
        config = McpServerConfig(name="t", url=url, **options)
        async with McpServers([config]) as servers:
            yield servers


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_servers_tools_join_as_mcp_server_tool_with_their_schemas(
    transport: str, tmp_path: Path
) -> None:
    async with connected(transport, tmp_path) as servers:
        tools = by_name(servers.tools)
        assert {"mcp__t__echo", "mcp__t__lookup", "mcp__t__slow"} <= set(tools)
        echo = tools["mcp__t__echo"]
        assert echo.description == "Return the text."
        assert echo.parameters["properties"] == {"text": {"title": "Text", "type": "string"}}
        assert echo.parameters["required"] == ["text"]
        outcome = await dispatch(servers.tools, "mcp__t__echo", text="hi there")
        assert not outcome.is_error
        assert list(iter_texts(outcome))[0] == "hi there"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_is_error_is_an_error_result_with_the_servers_text(
    transport: str, tmp_path: Path
) -> None:
    async with connected(transport, tmp_path) as servers:
        outcome = await dispatch(servers.tools, "mcp__t__fail", message="disk on fire")
    assert outcome.is_error
    assert outcome.error == {"name": "ToolError", "code": MCP_TOOL_ERROR}
    assert "disk on fire" in outcome.text


async def test_structured_content_is_kept_as_json_text(tmp_path: Path) -> None:
    async with connected("stdio", tmp_path) as servers:
        lookup = await dispatch(servers.tools, "mcp__t__lookup", key="abc")
        pid = await dispatch(servers.tools, "mcp__t__pid")
    assert not lookup.is_error
    # The SDK's server sends the structured content as text too: it is not repeated.
    assert [json.loads(text) for text in iter_texts(lookup)] == [{"key": "abc", "length": 3}]
    # A plain value comes back as text and as `{"result": value}`: the text is enough.
    assert len(list(iter_texts(pid))) == 1
    assert int(pid.text) > 0


async def test_annotations_decide_parallel_and_config_overrides(tmp_path: Path) -> None:
    async with connected("stdio", tmp_path) as servers:
        tools = by_name(servers.tools)
        assert tools["mcp__t__echo"].parallel is True, "readOnlyHint: true"
        assert tools["mcp__t__wipe"].parallel is False, "readOnlyHint and destructiveHint"
        assert tools["mcp__t__fail"].parallel is False, "no annotations"
    override = {"echo": False, "pid": True}
    async with connected("stdio", tmp_path, parallel=override) as servers:
        tools = by_name(servers.tools)
        assert tools["mcp__t__echo"].parallel is False
        assert tools["mcp__t__pid"].parallel is True
        assert tools["mcp__t__lookup"].parallel is True, "not overridden"


async def test_an_override_naming_no_tool_is_an_mcp_server_error(tmp_path: Path) -> None:
    with pytest.raises(McpServerError, match="lists no tool 'nope'"):
        async with connected("stdio", tmp_path, parallel={"nope": True}):
            pass


async def test_a_tool_name_outside_the_rule_is_mapped_and_called_by_its_own_name(
    tmp_path: Path,
) -> None:
    async with connected("stdio", tmp_path) as servers:
        [name] = [tool.name for tool in servers.tools if tool.name.startswith("mcp__t__files_read")]
        assert name != "mcp__t__files.read"
        outcome = await dispatch(servers.tools, name)
    assert outcome.text == "read"


async def test_a_tool_with_an_oversized_schema_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with connected("stdio", tmp_path) as servers:
        names = {tool.name for tool in servers.tools}
    assert "mcp__t__huge" not in names
    assert "mcp__t__echo" in names
    assert "skipped the tool 'huge'" in caplog.text


async def test_the_timeout_and_arguments_are_the_pipelines(tmp_path: Path) -> None:
    async with connected("stdio", tmp_path, timeout_seconds=12.5) as servers:
        assert {tool.timeout_seconds for tool in servers.tools} == {12.5}
        not_object = await dispatch(servers.tools, "mcp__t__echo")
        assert not_object.is_error
        pipeline_outcome = await _dispatch_raw(servers, "mcp__t__echo", [1, 2])
        assert pipeline_outcome.error is not None
        assert pipeline_outcome.error["code"] == INVALID_ARGS


async def _dispatch_raw(servers: McpServers, name: str, arguments: object) -> ToolOutcome:
    from duraloop.tools import CancelSignal, ToolCallRequest, ToolPipeline, ToolRegistry

    pipeline = ToolPipeline(ToolRegistry(servers.tools), cwd=Path.cwd(), session_id="s")
    call = ToolCallRequest(
        call_id="c", name=name, raw_arguments="[1,2]", arguments=arguments, turn=1, step=1
    )
    return await pipeline.dispatch(call, CancelSignal())


async def test_a_json_rpc_error_is_an_mcp_protocol_error_result(tmp_path: Path) -> None:
    async with connected("stdio", tmp_path) as servers:
        refused = await dispatch(servers.tools, "mcp__t__refuse")
        missing = await dispatch(servers.tools, "mcp__t__echo")
    assert refused.is_error
    assert refused.error == {"name": "ToolError", "code": MCP_PROTOCOL_ERROR}
    assert "-32602" in refused.text
    assert "refused by the test server" in refused.text
    # A missing argument is the server's own isError answer.
    assert missing.error == {"name": "ToolError", "code": MCP_TOOL_ERROR}


async def test_leaving_stops_every_stdio_server_process(tmp_path: Path) -> None:
    async with connected("stdio", tmp_path) as servers:
        outcome = await dispatch(servers.tools, "mcp__t__pid")
        pid = int(list(iter_texts(outcome))[0])
        assert pid_alive(pid)
    assert not pid_alive(pid)


async def test_servers_start_concurrently_and_each_gets_its_names(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    configs = [stdio_config(first, name="a"), stdio_config(second, name="b")]
    async with McpServers(configs) as servers:
        names = {tool.name for tool in servers.tools}
        assert {"mcp__a__echo", "mcp__b__echo"} <= names
        outcome = await dispatch(servers.tools, "mcp__b__echo", text="from b")
    assert outcome.text.startswith("from b")


@pytest.mark.parametrize(
    "config",
    [
        McpServerConfig(name="exits", command=(sys.executable, "-c", "import sys; sys.exit(2)")),
        McpServerConfig(name="missing", command=("/nonexistent/duraloop-mcp-server",)),
        McpServerConfig(
            name="mute",
            command=(sys.executable, "-c", "import time; time.sleep(60)"),
            startup_timeout_seconds=0.5,
        ),
        McpServerConfig(name="nobody", url=f"http://127.0.0.1:{free_port()}/mcp"),
    ],
    ids=lambda config: config.name,
)
async def test_a_server_that_fails_to_start_is_a_one_line_error_naming_it(
    config: McpServerConfig, tmp_path: Path
) -> None:
    good = stdio_config(tmp_path, name="good")
    with pytest.raises(McpServerError) as raised:
        async with McpServers([good, config]):
            pytest.fail("entered")
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"MCP server {config.name} (")
    assert "failed to start" in message
    assert raised.value.server == config.name
    assert await wait_for_file(tmp_path / "starts")
    pid = int((tmp_path / "starts").read_text().split()[0])
    assert not pid_alive(pid), "the server that started is stopped"
