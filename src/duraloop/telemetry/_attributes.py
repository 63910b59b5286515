"""The span vocabulary: OpenTelemetry GenAI attribute names, duraloop's own, and their values.

The `gen_ai.*` and `error.type` names are the OpenTelemetry GenAI semantic conventions'
(docs/telemetry.md#spans); the `duraloop.*` names are duraloop's extension. Values that come
from a model, a tool or a log are untrusted: `bounded` cuts them to a fixed size.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from ..log import rerun_succeeded
from ..log.vocabulary import (
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    BLOCK_REASONING,
    BLOCK_TEXT,
    BLOCK_TOOL_CALL,
    BLOCK_TOOL_RESULT,
    FINISH_ERROR,
    FINISH_MAX_TOKENS,
    FINISH_STOP,
    FINISH_TOOL_CALLS,
    RERUN_CALL_ID_INFIX,
    TOOL_NOT_STARTED,
    TOOL_OUTCOME_UNKNOWN,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span

OPERATION: Final = "gen_ai.operation.name"
PROVIDER: Final = "gen_ai.provider.name"
REQUEST_MODEL: Final = "gen_ai.request.model"
RESPONSE_MODEL: Final = "gen_ai.response.model"
RESPONSE_ID: Final = "gen_ai.response.id"
INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
CACHE_WRITE_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
CONVERSATION: Final = "gen_ai.conversation.id"
AGENT_NAME: Final = "gen_ai.agent.name"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_TYPE: Final = "gen_ai.tool.type"
TOOL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_RESULT: Final = "gen_ai.tool.call.result"
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
ERROR_TYPE: Final = "error.type"

TURN: Final = "duraloop.turn"
STEP: Final = "duraloop.step"
TURN_REASON: Final = "duraloop.turn.reason"
ABORT_REASON: Final = "duraloop.turn.abort_reason"
TURN_CONTINUED: Final = "duraloop.turn.continued"
"""True on a turn span opened by an event of a turn whose `turn/start` this tracer did not
see (a paused turn continued by another process)."""
LEFT_OPEN: Final = "duraloop.left_open"
"""True on a span that was still open when the tracer was detached (a paused turn)."""
TOOL_OUTCOME: Final = "duraloop.tool.outcome"
TOOL_ERROR_CODE: Final = "duraloop.tool.error_code"
RECOVERY: Final = "duraloop.recovery"
INTERRUPTED: Final = "duraloop.interrupted"
RERUN: Final = "duraloop.rerun"
"""True on the `execute_tool` span of a re-run of an outcome-unknown call (`retryOf`)."""
RERUN_OF: Final = "duraloop.rerun_of"
"""The call id of the call a re-run repeats (the id the model issued)."""

RETRY_EVENT: Final = "duraloop.llm.retry"
RETRY_STARTED_EVENT: Final = "duraloop.llm.retry_started"
RETRY_ATTEMPT: Final = "duraloop.retry.attempt"
RETRY_MAX: Final = "duraloop.retry.max_retries"
RETRY_DELAY_MS: Final = "duraloop.retry.delay_ms"
RETRY_MODE: Final = "duraloop.retry.mode"

OP_INVOKE_AGENT: Final = "invoke_agent"
OP_CHAT: Final = "chat"
OP_EXECUTE_TOOL: Final = "execute_tool"
TOOL_TYPE_FUNCTION: Final = "function"

OUTCOME_OK: Final = "ok"
OUTCOME_ERROR: Final = "error"
OUTCOME_ABORTED: Final = "aborted"
OUTCOME_UNKNOWN: Final = "unknown"
OUTCOME_NOT_STARTED: Final = "not_started"
_OUTCOME_OF_CODE: Final = {
    TOOL_OUTCOME_UNKNOWN: OUTCOME_UNKNOWN,
    TOOL_NOT_STARTED: OUTCOME_NOT_STARTED,
    ABORTED: OUTCOME_ABORTED,
    ABORTED_BEFORE_DISPATCH: OUTCOME_ABORTED,
}
RECOVERY_CODES: Final = frozenset({TOOL_OUTCOME_UNKNOWN, TOOL_NOT_STARTED})

_FINISH_REASON: Final = {
    FINISH_STOP: "stop",
    FINISH_TOOL_CALLS: "tool_call",
    FINISH_MAX_TOKENS: "length",
    FINISH_ERROR: "error",
}
"""duraloop's finish kinds -> the semantic conventions' finish reasons; others pass as-is."""

MAX_NAME_CHARS: Final = 256
"""The most characters of a name, id, model or code put in an attribute."""
MAX_CONTENT_CHARS: Final = 16_384
"""The most characters of captured content (one attribute's JSON) when capture is on."""


def bounded(value: object, limit: int = MAX_NAME_CHARS) -> str:
    """Return `value` as a string of at most `limit` characters (`...` marks a cut)."""
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def finish_reason(kind: str) -> str:
    """Return the semantic conventions' finish reason for a duraloop finish kind."""
    return _FINISH_REASON.get(kind, bounded(kind))


def tool_outcome(code: str | None, *, is_error: bool) -> str:
    """Return the `duraloop.tool.outcome` of a `tool/result` (docs/telemetry.md#tool-outcomes).

    Args:
        is_error: the result's `isError`.
        code: its `error.code`, or None.
    """
    if not is_error:
        return OUTCOME_OK
    return _OUTCOME_OF_CODE.get(code or "", OUTCOME_ERROR)


def rerun_of(call_id: str) -> str:
    """Return the id of the call a re-run's `tool/call` id (`<callId>-rerun-<n>`) repeats."""
    original, infix, _attempt = call_id.rpartition(RERUN_CALL_ID_INFIX)
    return original if infix else call_id


def rerun_outcome(block: Mapping[str, Any]) -> str | None:
    """Return the outcome of a re-run from its replacement's `tool-result` block, or None.

    The replacement keeps the unknown result's `isError` and error code (content-only); the
    re-run's own outcome is read by `duraloop.log.rerun_succeeded` (docs/telemetry.md#re-runs).

    Args:
        block: the replacement's `tool-result` block.

    Returns:
        `ok`, `error`, or None when the text says neither.
    """
    content = block.get("content")
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    succeeded = rerun_succeeded(blocks)
    return None if succeeded is None else OUTCOME_OK if succeeded else OUTCOME_ERROR


def usage_attributes(usage: Mapping[str, Any]) -> dict[str, int]:
    """Return the token attributes of an `assistant/message`'s `usage`.

    `gen_ai.usage.input_tokens` counts every input token, cached ones included (the
    conventions' rule), so it is duraloop's `inputTokens` plus both cache counts.
    """
    counts = {key: usage.get(key) for key in ("inputTokens", "cacheReadTokens", "cacheWriteTokens")}
    numbers = {k: v for k, v in counts.items() if isinstance(v, int) and not isinstance(v, bool)}
    found: dict[str, int] = {}
    if numbers:
        found[INPUT_TOKENS] = sum(numbers.values())
    if "cacheReadTokens" in numbers:
        found[CACHE_READ_TOKENS] = numbers["cacheReadTokens"]
    if "cacheWriteTokens" in numbers:
        found[CACHE_WRITE_TOKENS] = numbers["cacheWriteTokens"]
    output = usage.get("outputTokens")
    if isinstance(output, int) and not isinstance(output, bool):
        found[OUTPUT_TOKENS] = output
    return found


def _part(block: Mapping[str, Any]) -> dict[str, Any]:
    """One content block as a conventions' message part (text, tool call or tool result)."""
    kind = block.get("type")
    if kind in (BLOCK_TEXT, BLOCK_REASONING):
        return {"type": kind, "content": block.get("text", "")}
    if kind == BLOCK_TOOL_CALL:
        return {
            "type": "tool_call",
            "id": block.get("id"),
            "name": block.get("name"),
            "arguments": block.get("arguments"),
        }
    if kind == BLOCK_TOOL_RESULT:
        inner = block.get("content")
        texts = [
            item.get("text", "")
            for item in (inner if isinstance(inner, list) else [])
            if isinstance(item, dict) and item.get("type") == BLOCK_TEXT
        ]
        return {"type": "tool_call_response", "id": block.get("toolCallId"), "response": texts}
    return {"type": bounded(kind)}


def messages_json(messages: Sequence[Mapping[str, Any]]) -> str:
    """Return messages as the conventions' `gen_ai.*.messages` JSON, cut to the content bound.

    Args:
        messages: duraloop messages (`{role, content: [blocks]}`).

    Returns:
        `[{"role", "parts": [...]}]` as JSON, at most `MAX_CONTENT_CHARS` characters.
    """
    shaped = []
    for message in messages:
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        parts = [_part(block) for block in blocks if isinstance(block, dict)]
        shaped.append({"role": message.get("role"), "parts": parts})
    return bounded(json.dumps(shaped, ensure_ascii=False), MAX_CONTENT_CHARS)


def failure_code(failure: object) -> str | None:
    """Return the bounded `code` of an `LlmFailure` or tool error info, or None."""
    if isinstance(failure, dict):
        code = failure.get("code")
        if isinstance(code, str):
            return bounded(code)
    return None


def failed(span: Span, error_type: str) -> None:
    """Mark `span` failed: `error.type` and status ERROR (docs/telemetry.md#status)."""
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute(ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, error_type))


def retry_attributes(data: Mapping[str, Any]) -> dict[str, Any]:
    """Return the attributes of the `duraloop.llm.retry` span event of an `llm/retry`."""
    attributes: dict[str, Any] = {}
    for key, name in (
        ("retry", RETRY_ATTEMPT),
        ("maxRetries", RETRY_MAX),
        ("delayMs", RETRY_DELAY_MS),
    ):
        value = data.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            attributes[name] = value
    if isinstance(data.get("mode"), str):
        attributes[RETRY_MODE] = bounded(data["mode"])
    code = failure_code(data.get("failure"))
    if code:
        attributes[ERROR_TYPE] = code
    return attributes
