"""`ToolContext.idempotency_key`, `Tool.idempotent` and bash's `DURALOOP_IDEMPOTENCY_KEY`.

See docs/recovery.md#idempotency-keys.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from duraloop.errors import ToolDefinitionError
from duraloop.log import idempotency_key
from duraloop.log.vocabulary import IDEMPOTENCY_KEY_ENV
from duraloop.tools import Tool, ToolContext, builtin_tools, tool
from duraloop.tools._bash_tool import bash
from duraloop.tools._pipeline import ToolPipeline
from duraloop.tools._registry import ToolRegistry
from duraloop.tools._request import ToolCallRequest
from duraloop.tools._signal import CancelSignal


def test_tool_context_derives_its_key_when_none_is_given(tmp_path: Path) -> None:
    ctx = ToolContext(
        cwd=tmp_path, signal=CancelSignal(), call_id="c", tool_name="t", session_id="s"
    )
    assert ctx.idempotency_key == idempotency_key("s", "c")


@pytest.mark.anyio
async def test_pipeline_uses_the_origin_session_of_a_rerun_call(tmp_path: Path) -> None:
    seen: list[str] = []

    async def body(_args: object, ctx: ToolContext) -> str:
        seen.append(ctx.idempotency_key)
        return "ok"

    probe = Tool("probe", "probe", {"type": "object"}, lambda a: a, body)
    pipeline = ToolPipeline(ToolRegistry([probe]), cwd=tmp_path, session_id="child")
    own = ToolCallRequest("c", "probe", "{}", {}, 1, 1)
    inherited = ToolCallRequest("c", "probe", "{}", {}, 1, 1, origin_session_id="parent")
    for call in (own, inherited):
        await pipeline.dispatch(call, CancelSignal())
    assert seen == [idempotency_key("child", "c"), idempotency_key("parent", "c")]


@pytest.mark.anyio
async def test_bash_exports_the_call_key_in_its_environment(tmp_path: Path) -> None:
    pipeline = ToolPipeline(ToolRegistry([bash]), cwd=tmp_path, session_id="s")
    arguments = {"command": f'printf "%s" "${IDEMPOTENCY_KEY_ENV}"'}
    call = ToolCallRequest("c7", "bash", json.dumps(arguments), arguments, 1, 1)
    outcome = await pipeline.dispatch(call, CancelSignal())
    assert not outcome.is_error
    assert outcome.text.startswith(idempotency_key("s", "c7"))


def test_tool_idempotent_flag_defaults_false_and_is_checked() -> None:
    @tool(idempotent=True)
    def look(path: str) -> str:
        """Look at a path."""
        return path

    @tool
    def act(path: str) -> str:
        """Act on a path."""
        return path

    assert (look.idempotent, act.idempotent) == (True, False)
    flags = {t.name: t.idempotent for t in builtin_tools()}
    assert flags == {
        "read_file": True,
        "list_dir": True,
        "grep": True,
        "write_file": False,
        "edit_file": False,
        "bash": False,
    }
    with pytest.raises(ToolDefinitionError, match="idempotent must be True or False"):
        Tool("x", "x", {"type": "object"}, lambda a: a, look.body, idempotent=1)  # type: ignore[arg-type]
