"""Tool definitions (docs/scheduler.md#tool-definitions): schemas from typed functions and parallel
classification.

Schemas are what the model sees, so they are compared whole; classification must never
raise and must fall back to exclusive on anything but an exact `True`.
"""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from duraloop.errors import ToolDefinitionError
from duraloop.tools._context import ToolContext
from duraloop.tools._definition import Tool, tool


def test_tool_from_typed_function_builds_clean_object_schema() -> None:
    @tool
    def search(query: str, ctx: ToolContext, max_results: int = 10) -> str:
        """Search the index for a query.

        More detail that is not part of the description.

        Args:
            query: the text to look for,
                across several lines.
            max_results: how many hits to return at most.
        """
        return query

    assert search.name == "search"
    assert search.description == "Search the index for a query."
    assert search.parameters == {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "query": {
                "type": "string",
                "description": "the text to look for, across several lines.",
            },
            "max_results": {
                "type": "integer",
                "default": 10,
                "description": "how many hits to return at most.",
            },
        },
        "required": ["query"],
    }
    assert search.parallel is False


def test_tool_from_pydantic_model_uses_its_fields_and_keeps_property_named_title() -> None:
    class Note(BaseModel):
        title: str
        tags: list[str] = Field(default_factory=list, description="labels")

    @tool(name="add_note", description="Add a note.", parallel=True)
    async def add(note: Note) -> str:
        return note.title

    assert add.name == "add_note"
    assert add.parameters == {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "labels"},
        },
        "required": ["title"],
    }
    assert isinstance(add.validator({"title": "x"}), Note)


def test_tool_with_no_arguments_has_empty_properties() -> None:
    @tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    assert ping.parameters["properties"] == {}
    assert ping.schema() == {
        "name": "ping",
        "description": "Answer pong.",
        "parameters": ping.parameters,
    }


def test_tool_parameter_shadowing_basemodel_attribute_keeps_its_name() -> None:
    @tool
    def dump(json: str, copy: bool = False) -> str:
        """Echo."""
        return json

    assert set(dump.parameters["properties"]) == {"json", "copy"}
    args = dump.validator({"json": "x"})
    assert args is not None


@pytest.mark.anyio
async def test_tool_sync_and_async_bodies_receive_arguments_and_context(tmp_path: Any) -> None:
    from duraloop.tools._signal import CancelSignal

    seen: dict[str, object] = {}

    @tool
    def sync_body(a: int, ctx: ToolContext, /, b: str = "y") -> str:
        """Sync."""
        seen["sync"] = (a, b, ctx.call_id)
        return "s"

    @tool
    async def async_body(ctx: ToolContext, a: int) -> str:
        """Async."""
        seen["async"] = (a, ctx.tool_name)
        return "a"

    ctx = ToolContext(
        cwd=tmp_path, signal=CancelSignal(), call_id="c9", tool_name="t", session_id="s"
    )
    assert await sync_body.body(sync_body.validator({"a": 1}), ctx) == "s"
    assert await async_body.body(async_body.validator({"a": 2}), ctx) == "a"
    assert seen == {"sync": (1, "y", "c9"), "async": (2, "t")}


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("def f(*args: int) -> None:\n    '''Doc.'''", "*args"),
        ("def f(**kw: int) -> None:\n    '''Doc.'''", "*kw"),
        ("def f(a) -> None:\n    '''Doc.'''", "'a' has no type annotation"),
        ("def f(a: int) -> None:\n    pass", "no description"),
        (
            "def f(a: ToolContext, b: ToolContext) -> None:\n    '''Doc.'''",
            "ToolContext twice",
        ),
        ("def f(a: 'Missing') -> None:\n    '''Doc.'''", "cannot be resolved"),
        (
            "class Opaque:\n    pass\ndef f(a: Opaque) -> None:\n    '''Doc.'''",
            "pydantic cannot validate",
        ),
    ],
)
def test_tool_invalid_definition_raises_with_function_name_and_fix(
    source: str, fragment: str
) -> None:
    namespace: dict[str, Any] = {"ToolContext": ToolContext}
    exec(source, namespace)  # builds each bad signature under the name `f`
    with pytest.raises(ToolDefinitionError) as caught:
        tool(namespace["f"])
    assert fragment in str(caught.value)
    assert "f" in str(caught.value)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"name": "has space"}, "tool name"),
        ({"timeout_seconds": 0}, "timeout_seconds must be > 0"),
        ({"parallel": "yes"}, "parallel must be a bool or a callable"),
    ],
)
def test_tool_invalid_options_raise_tool_definition_error(
    kwargs: dict[str, Any], fragment: str
) -> None:
    def f(a: int) -> None:
        """Doc."""

    with pytest.raises(ToolDefinitionError, match=fragment):
        tool(**kwargs)(f)


class _PathArgs(BaseModel):
    path: str


def _classified(parallel: Any) -> Tool:
    def body(args: _PathArgs) -> str:
        """Doc."""
        return args.path

    return tool(parallel=parallel)(body)


def _raises(args: Any) -> bool:
    raise RuntimeError("classifier bug")


@pytest.mark.parametrize(
    ("parallel", "arguments", "expected"),
    [
        (True, {"path": "x"}, True),
        (True, "not json", True),
        (False, {"path": "x"}, False),
        (lambda args: args.path.startswith("r"), {"path": "read"}, True),
        (lambda args: args.path.startswith("r"), {"path": "write"}, False),
        (lambda args: 1, {"path": "x"}, False),
        (lambda args: "yes", {"path": "x"}, False),
        (_raises, {"path": "x"}, False),
        (lambda args: True, {"wrong": 1}, False),
        (lambda args: True, "{not json", False),
    ],
)
def test_tool_is_parallel_only_for_exact_true(
    parallel: Any, arguments: Any, expected: bool
) -> None:
    assert _classified(parallel).is_parallel(arguments) is expected


def test_tool_classifier_receives_validated_model() -> None:
    received: list[object] = []

    def classify(args: _PathArgs) -> bool:
        received.append(args)
        return True

    assert _classified(classify).is_parallel({"path": "p"}) is True
    assert received == [_PathArgs(path="p")]


def test_tool_annotated_constraints_reach_schema_and_validation() -> None:
    @tool
    def pick(count: Annotated[int, Field(ge=1, le=5)]) -> int:
        """Pick."""
        return count

    assert pick.parameters["properties"]["count"] == {"type": "integer", "minimum": 1, "maximum": 5}
    with pytest.raises(ValueError, match="count"):
        pick.validator({"count": 9})
    with pytest.raises(ValueError, match="JSON object"):
        pick.validator("[1]")
