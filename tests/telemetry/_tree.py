"""Read finished spans back as a tree: names, parents, attributes and events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan


def attrs(span: ReadableSpan) -> dict[str, Any]:
    """A span's attributes as a plain dict."""
    return dict(span.attributes or {})


def only(spans: Sequence[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    """The spans whose name starts with `prefix`, in the order they started."""
    return sorted((s for s in spans if s.name.startswith(prefix)), key=lambda s: s.start_time or 0)


def turn_span(spans: Sequence[ReadableSpan]) -> ReadableSpan:
    """The single `invoke_agent` span."""
    (turn,) = only(spans, "invoke_agent")
    return turn


def children(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[str]:
    """The names of `parent`'s children, in the order they started."""
    assert parent.context is not None
    return [
        s.name
        for s in sorted(spans, key=lambda s: s.start_time or 0)
        if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]


def tool_spans(spans: Sequence[ReadableSpan]) -> dict[str, dict[str, Any]]:
    """Each `execute_tool` span's attributes by call id."""
    return {str(attrs(s)["gen_ai.tool.call.id"]): attrs(s) for s in only(spans, "execute_tool")}


def every_string(spans: Sequence[ReadableSpan]) -> list[str]:
    """Every string value in every span's name, attributes, events and status."""
    found: list[str] = []
    for span in spans:
        found.append(span.name)
        found.append(span.status.description or "")
        values: list[Any] = list(attrs(span).values())
        for event in span.events:
            found.append(event.name)
            values.extend((event.attributes or {}).values())
        for value in values:
            if isinstance(value, tuple):
                found.extend(str(item) for item in value)
            else:
                found.append(str(value))
    return found
