"""The open turn's spans, and a tool call's `execute_tool` span: its start and its end.

A call's span ends at its `tool/result`, or a re-run's at the replacement of the unknown
result (docs/telemetry.md#tool-outcomes, docs/telemetry.md#re-runs). This module imports the
OpenTelemetry API, so only `_spans` imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Tracer

from ..log import Event
from ..log.vocabulary import BLOCK_TOOL_RESULT
from . import _attributes as a


@dataclass
class TurnSpans:
    """The spans of the open turn."""

    number: int
    span: Span
    context: Context
    step: int = 0
    step_ns: int | None = None
    """When the open step's `step/start` was observed, until its `chat` span starts."""
    chat: Span | None = None
    finish: str | None = None
    failure_code: str | None = None
    tools: dict[str, Span] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    reruns: dict[int, str] = field(default_factory=dict)
    """The open re-runs: the seq of each re-run's `tool/call` -> its call id."""
    inputs: list[Mapping[str, Any]] = field(default_factory=list)


def start_tool_span(
    tracer: Tracer, turn: TurnSpans, call_id: str, name: str, common: Mapping[str, str]
) -> Span:
    """Start a call's `execute_tool {name}` span, a child of the turn's span.

    Args:
        tracer: the tracer.
        turn: the open turn.
        call_id: the call id (bounded).
        name: the tool name (bounded).
        common: the attributes every span has (conversation id, agent name).
    """
    attributes: dict[str, Any] = {
        a.OPERATION: a.OP_EXECUTE_TOOL,
        a.TOOL_NAME: name,
        a.TOOL_CALL_ID: call_id,
        a.TOOL_TYPE: a.TOOL_TYPE_FUNCTION,
        a.TURN: turn.number,
        a.STEP: turn.step,
    }
    attributes.update(common)
    return tracer.start_span(
        f"{a.OP_EXECUTE_TOOL} {name}",
        context=turn.context,
        kind=SpanKind.INTERNAL,
        attributes=attributes,
    )


def result_block(event: Event) -> tuple[Mapping[str, Any], Mapping[str, Any] | None]:
    """A `tool/result`'s message and its `tool-result` block (None when it has none)."""
    message = event.data.get("message")
    message = message if isinstance(message, dict) else {}
    content = message.get("content")
    block = content[0] if isinstance(content, list) and content else None
    if not isinstance(block, dict) or block.get("type") != BLOCK_TOOL_RESULT:
        return message, None
    return message, block


def end_with_result(
    span: Span, event: Event, message: Mapping[str, Any], block: Mapping[str, Any], *, capture: bool
) -> None:
    """End a call's span with its (appended) `tool/result`: outcome, recovery, error code.

    Args:
        span: the call's `execute_tool` span.
        event: the `tool/result`.
        message: its message.
        block: the message's `tool-result` block.
        capture: put the result's content in the span.
    """
    is_error = block.get("isError") is True
    code = a.failure_code(event.data.get("error"))
    span.set_attribute(a.TOOL_OUTCOME, a.tool_outcome(code, is_error=is_error))
    span.set_attribute(a.RECOVERY, code in a.RECOVERY_CODES)
    if code:
        span.set_attribute(a.TOOL_ERROR_CODE, code)
    if is_error:
        a.failed(span, code or a.OUTCOME_ERROR)
    if capture:
        span.set_attribute(a.TOOL_RESULT, a.messages_json([message]))
    span.end()


def end_with_rerun_result(
    span: Span, event: Event, message: Mapping[str, Any], block: Mapping[str, Any], *, capture: bool
) -> None:
    """End a re-run's span with the content-only replacement of the unknown result.

    The replacement keeps the original's `isError` and `TOOL_OUTCOME_UNKNOWN` code, so the
    re-run's outcome is read from its text (`rerun_outcome`): `ok`, or `error` (`error.type`
    `error`: the re-run's own code is not logged). A text that says neither keeps the
    replacement's own outcome (`unknown`). `duraloop.recovery` is false: the re-run ran.

    Args:
        span: the re-run's `execute_tool` span.
        event: the replacing `tool/result`.
        message: its message.
        block: the message's `tool-result` block (its `toolCallId` is the original call's).
        capture: put the replacement's content in the span.
    """
    span.set_attribute(a.RERUN_OF, a.bounded(block.get("toolCallId", "")))
    outcome = a.rerun_outcome(block)
    if outcome is None:
        end_with_result(span, event, message, block, capture=capture)
        return
    span.set_attribute(a.TOOL_OUTCOME, outcome)
    span.set_attribute(a.RECOVERY, False)
    if outcome != a.OUTCOME_OK:
        a.failed(span, a.OUTCOME_ERROR)
    if capture:
        span.set_attribute(a.TOOL_RESULT, a.messages_json([message]))
    span.end()
