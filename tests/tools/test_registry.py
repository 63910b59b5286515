"""The tool registry: ordered schemas, duplicate refusal, and changes seen by later lookups.

The scheduler reclassifies lazily (docs/scheduler.md#ordering, B8/B9), so registry changes must show
up in the very next `get`/`is_parallel` call, which the pipeline test below pins.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from duraloop.errors import ToolDefinitionError, UsageError
from duraloop.tools._definition import Tool, tool
from duraloop.tools._pipeline import ToolPipeline
from duraloop.tools._registry import ToolRegistry
from duraloop.tools._request import ToolCallRequest


def _make(name: str, *, parallel: bool = False) -> Tool:
    def body() -> str:
        """A test tool."""
        return name

    return tool(name=name, parallel=parallel)(body)


def test_registry_schemas_in_registration_order() -> None:
    registry = ToolRegistry([_make("b"), _make("a")])
    registry.register(_make("c"))
    assert [s["name"] for s in registry.schemas()] == ["b", "a", "c"]
    assert [t.name for t in registry] == ["b", "a", "c"]
    assert "a" in registry and "z" not in registry
    assert len(registry) == 3


def test_registry_duplicate_name_raises_and_keeps_first() -> None:
    first = _make("a")
    registry = ToolRegistry([first])
    with pytest.raises(ToolDefinitionError, match='"a" is already registered'):
        registry.register(_make("a"))
    assert registry.get("a") is first


def test_registry_unregister_removes_and_unknown_raises() -> None:
    registry = ToolRegistry([_make("a")])
    removed = registry.unregister("a")
    assert removed.name == "a"
    assert registry.get("a") is None
    with pytest.raises(UsageError, match='no tool named "a"'):
        registry.unregister("a")


def test_registry_change_is_seen_by_next_classification(tmp_path: Path) -> None:
    registry = ToolRegistry([_make("t", parallel=True)])
    pipeline = ToolPipeline(registry, cwd=tmp_path, session_id="s")
    call = ToolCallRequest(call_id="c", name="t", raw_arguments="{}", arguments={}, turn=1, step=1)
    assert pipeline.is_parallel(call) is True
    registry.unregister("t")
    assert pipeline.is_parallel(call) is False
    registry.register(_make("t", parallel=False))
    assert pipeline.is_parallel(call) is False
    registry.unregister("t")
    registry.register(_make("t", parallel=True))
    assert pipeline.is_parallel(call) is True
