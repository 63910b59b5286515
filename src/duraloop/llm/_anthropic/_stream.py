"""Translate Anthropic Messages stream events into stream chunks.

See docs/providers.md#stream-contract, #anthropic-wire, #sdks-and-transport.

Input is the `data` JSON of each SSE event, as plain dicts (`message_start`,
`content_block_start`, `content_block_delta`, `content_block_stop`, `message_delta`,
`message_stop`, `ping`, `error`). Output follows the chunk contract: block indices in
first-seen order, deltas as they arrive, `block-end` with the authoritative block when the
provider closes it, then at `message_stop` one `usage` chunk and the `finish` chunk with the
replay envelope `{response, blocks}` (one entry per emitted block).

Block mapping: `text` -> text; `thinking` and `redacted_thinking` -> reasoning (a redacted
block has no readable text, so its reasoning text is `""`; its `data` lives in the replay
entry); `tool_use` -> tool-call, whose arguments are the concatenated `input_json_delta`
fragments, or `"{}"` when none came (docs/providers.md#anthropic-wire). Other block types (server
tools, which duraloop never requests) are skipped with a warning.

Stop reasons (docs/providers.md#anthropic-wire): `end_turn`, `stop_sequence` and `pause_turn` ->
stop; `max_tokens` -> max-tokens; `tool_use` -> tool-calls; `model_context_window_exceeded` -> error
`CONTEXT_WINDOW_EXCEEDED`; `refusal` -> error `REFUSAL` (not retryable); any other reason -> error
with the reason uppercased. `pause_turn` only happens when a server tool (web search and the like)
paused a long turn; duraloop sends no server tools, so if it ever arrives the message is committed
as it is and, having no tool calls, ends the turn `completed`; the user continues it with a new
message. A stop without any content (no tool call, no reasoning, no visible text) is the retryable
`EMPTY_RESPONSE` (docs/providers.md#anthropic-wire).

An `error` event is classified by `_errors.error_event`, the module that maps every
Anthropic failure.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, Final

from ...errors import LlmError
from ...log import JsonObject
from ...log.vocabulary import (
    BLOCK_REASONING,
    BLOCK_TEXT,
    BLOCK_TOOL_CALL,
    CONTEXT_WINDOW_EXCEEDED,
    EMPTY_RESPONSE,
    FINISH_ERROR,
    FINISH_MAX_TOKENS,
    FINISH_STOP,
    FINISH_TOOL_CALLS,
    MALFORMED_RESPONSE,
    REFUSAL,
    STREAM_CLOSED,
)
from .._chunks import (
    BlockType,
    FinishKind,
    StreamChunk,
    block_end,
    block_start,
    finish_chunk,
    reasoning_delta,
    text_delta,
    tool_call_delta,
    usage_chunk,
)
from ._errors import error_event

logger = logging.getLogger(__name__)

"""The model declined to answer (`stop_reason: refusal`); retrying the same request won't help."""

_FINISH_KINDS: Final[dict[str | None, FinishKind]] = {
    None: FINISH_STOP,
    "end_turn": FINISH_STOP,
    "stop_sequence": FINISH_STOP,
    "pause_turn": FINISH_STOP,
    "max_tokens": FINISH_MAX_TOKENS,
    "tool_use": FINISH_TOOL_CALLS,
}


class _Block:
    __slots__ = (
        "arguments",
        "call_id",
        "data",
        "index",
        "initial_input",
        "kind",
        "name",
        "signature",
        "text",
    )

    def __init__(self, index: int, kind: str) -> None:
        self.index = index
        self.kind = kind  # the wire type: text, thinking, redacted_thinking, tool_use
        self.text: list[str] = []
        self.signature: list[str] = []
        self.data = ""
        self.call_id = ""
        self.name = ""
        self.arguments: list[str] = []
        self.initial_input: object = None

    def block(self) -> JsonObject:
        if self.kind == "text":
            return {"type": BLOCK_TEXT, "text": "".join(self.text)}
        if self.kind == "tool_use":
            arguments = "".join(self.arguments)
            if not arguments and isinstance(self.initial_input, dict) and self.initial_input:
                arguments = json.dumps(self.initial_input, ensure_ascii=False)
            return {
                "type": BLOCK_TOOL_CALL,
                "id": self.call_id,
                "name": self.name,
                "arguments": arguments or "{}",
            }
        return {"type": BLOCK_REASONING, "text": "".join(self.text)}

    def replay_entry(self) -> JsonObject:
        if self.kind == "thinking":
            signature = "".join(self.signature)
            return (
                {"type": "thinking", "signature": signature} if signature else {"type": "thinking"}
            )
        if self.kind == "redacted_thinking":
            return {"type": "redacted_thinking", "data": self.data}
        return {"type": self.kind}

    def has_content(self) -> bool:
        if self.kind == "text":
            return bool("".join(self.text).strip())
        # a tool call, or reasoning (a reasoning-only answer is valid,
        # docs/providers.md#anthropic-wire)
        return True


_BLOCK_TYPES: Final[dict[str, BlockType]] = {
    "text": "text",
    "thinking": "reasoning",
    "redacted_thinking": "reasoning",
    "tool_use": BLOCK_TOOL_CALL,
}
_DELTA_KINDS: Final = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "thinking",
    "input_json_delta": "tool_use",
}


class EventTranslator:
    """Turn one response's stream events into stream chunks.

    Args:
        provider: the route name, for error messages.
    """

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.blocks: list[_Block] = []  # in first-seen order; position = chunk index
        self._by_wire: dict[int, _Block | None] = {}  # wire index -> block (None: skipped)
        self._open: dict[int, _Block] = {}
        self.response: JsonObject = {}
        self.usage: dict[str, int] = {}
        self.stop_reason: str | None = None
        self.done = False

    def feed(self, event: Mapping[str, Any]) -> list[StreamChunk]:
        """Translate one event; returns the chunks it produces (possibly none).

        Args:
            event: the event's data JSON.

        Returns:
            block-start/delta/block-end chunks; at `message_stop`, the closing chunks.

        Raises:
            LlmError: `MALFORMED_RESPONSE` for a delta that addresses no open block of its
                type; the classified error for an `error` event.
        """
        kind = event.get("type")
        if self.done or kind == "ping":
            return []
        if kind == "content_block_delta":
            return self._delta(event)
        if kind == "content_block_start":
            return self._start(event)
        if kind == "content_block_stop":
            return self._stop(event.get("index"))
        if kind == "message_start":
            message = event.get("message")
            message = message if isinstance(message, Mapping) else {}
            self.response = {key: message[key] for key in ("id", "model") if key in message}
            self._take_usage(message.get("usage"))
            return []
        if kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, Mapping) and delta.get("stop_reason") is not None:
                self.stop_reason = str(delta["stop_reason"])
            self._take_usage(event.get("usage"))
            return []
        if kind == "message_stop":
            return self._finish()
        if kind == "error":
            raise error_event(event)
        logger.debug("ignoring unknown %s stream event %r", self.provider, kind)
        return []

    def close(self) -> list[StreamChunk]:
        """Return nothing after a complete stream; raise if `message_stop` never came.

        Raises:
            LlmError: `STREAM_CLOSED` (not retryable) if the stream ended before
                `message_stop`: the SDK ends silently on a truncated stream
                (docs/providers.md#sdks-and-transport).
        """
        if not self.done:
            raise LlmError(f"{self.provider} stream ended before message_stop", code=STREAM_CLOSED)
        return []

    def _start(self, event: Mapping[str, Any]) -> list[StreamChunk]:
        wire_index = event.get("index")
        content = event.get("content_block")
        content = content if isinstance(content, Mapping) else {}
        kind = str(content.get("type"))
        block_type = _BLOCK_TYPES.get(kind)
        if not isinstance(wire_index, int) or wire_index in self._by_wire:
            raise self._malformed(f"content_block_start repeats or lacks index {wire_index!r}")
        if block_type is None:
            logger.warning("skipping %s content block of unsupported type %r", self.provider, kind)
            self._by_wire[wire_index] = None
            return []
        block = _Block(len(self.blocks), kind)
        self.blocks.append(block)
        self._by_wire[wire_index] = self._open[wire_index] = block
        out: list[StreamChunk] = [block_start(block.index, block_type)]
        if kind == "tool_use":
            block.call_id = str(content.get("id") or "")
            block.name = str(content.get("name") or "")
            block.initial_input = content.get("input")
            out.append(
                tool_call_delta(
                    block.index, call_id=block.call_id, name=block.name, arguments_delta=""
                )
            )
        elif kind == "redacted_thinking":
            block.data = str(content.get("data") or "")
        else:
            field = "text" if kind == "text" else "thinking"
            text = content.get(field)
            if isinstance(text, str) and text:
                out.extend(self._text(block, text))
            signature = content.get("signature")
            if isinstance(signature, str) and signature:
                block.signature.append(signature)
        return out

    def _delta(self, event: Mapping[str, Any]) -> list[StreamChunk]:
        wire_index = event.get("index")
        delta = event.get("delta")
        delta = delta if isinstance(delta, Mapping) else {}
        delta_type = str(delta.get("type"))
        if not isinstance(wire_index, int):
            raise self._malformed(f"{delta_type} without an integer index")
        if wire_index in self._by_wire and self._by_wire[wire_index] is None:
            return []  # a skipped block
        if delta_type == "citations_delta":
            return []  # citations are not part of the neutral vocabulary
        block = self._open.get(wire_index)
        expected = _DELTA_KINDS.get(delta_type)
        if block is None or expected is None or block.kind != expected:
            raise self._malformed(
                f"{delta_type} for block {wire_index!r}, which is not an open block of that type"
            )
        if delta_type == "input_json_delta":
            fragment = str(delta.get("partial_json") or "")
            block.arguments.append(fragment)
            return [
                tool_call_delta(
                    block.index, call_id=block.call_id, name=block.name, arguments_delta=fragment
                )
            ]
        if delta_type == "signature_delta":
            block.signature.append(str(delta.get("signature") or ""))
            return []
        text = delta.get("text" if delta_type == "text_delta" else "thinking")
        return self._text(block, text) if isinstance(text, str) and text else []

    def _text(self, block: _Block, text: str) -> list[StreamChunk]:
        block.text.append(text)
        if block.kind == "text":
            return [text_delta(block.index, text)]
        return [reasoning_delta(block.index, text)]

    def _stop(self, wire_index: object) -> list[StreamChunk]:
        if not isinstance(wire_index, int):
            raise self._malformed("content_block_stop without an integer index")
        if wire_index in self._by_wire and self._by_wire[wire_index] is None:
            return []
        block = self._open.pop(wire_index, None)
        if block is None:
            raise self._malformed(f"content_block_stop for block {wire_index!r}, which is not open")
        return [block_end(block.index, block.block())]

    def _take_usage(self, usage: object) -> None:
        if not isinstance(usage, Mapping):
            return
        for key in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        ):
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                self.usage[key] = value  # message_delta counts are cumulative: last wins

    def _finish(self) -> list[StreamChunk]:
        self.done = True
        out: list[StreamChunk] = [block_end(b.index, b.block()) for b in self._open.values()]
        self._open.clear()
        if self.usage:
            usage = self.usage
            out.append(
                usage_chunk(
                    input_tokens=usage.get("input_tokens", 0),
                    output_tokens=usage.get("output_tokens", 0),
                    cache_read_tokens=usage.get("cache_read_input_tokens"),
                    cache_write_tokens=usage.get("cache_creation_input_tokens"),
                )
            )
        reason = self.stop_reason
        kind = _FINISH_KINDS.get(reason)
        if kind is None:
            out.append(finish_chunk(FINISH_ERROR, failure=self._stop_failure(str(reason))))
        elif kind == FINISH_STOP and not any(block.has_content() for block in self.blocks):
            failure = {
                "message": "model returned a completed response with no content",
                "code": EMPTY_RESPONSE,
            }
            out.append(finish_chunk(FINISH_ERROR, failure=failure))
        else:
            replay = {
                "response": {**self.response, "stopReason": reason},
                "blocks": [block.replay_entry() for block in self.blocks],
            }
            out.append(finish_chunk(kind, replay_state=replay))
        return out

    def _stop_failure(self, reason: str) -> JsonObject:
        if reason == "refusal":
            said = "".join("".join(b.text) for b in self.blocks if b.kind == "text").strip()
            detail = f": {said[:200]}" if said else ""
            return {
                "message": f"the model declined to answer (stop_reason refusal){detail}",
                "code": REFUSAL,
            }
        if reason == "model_context_window_exceeded":
            return {
                "message": "the response filled the model's context window",
                "code": CONTEXT_WINDOW_EXCEEDED,
            }
        return {"message": f"model stopped: {reason}", "code": reason.upper()}

    def _malformed(self, detail: str) -> LlmError:
        return LlmError(f"{self.provider} stream is malformed: {detail}", code=MALFORMED_RESPONSE)
