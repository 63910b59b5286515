"""Translate a Chat Completions SSE stream into stream chunks (llm-spec 2.1, 6.1, 6.6).

Deltas are emitted as they arrive; `finish_reason` and `usage` are remembered (OpenAI sends
usage in a trailing `choices: []` chunk after the finish chunk) and emitted at the end, after
`block-end` for every opened block: usage, then finish.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Final

from ..errors import LlmError
from ._chunks import (
    FINISH_ERROR,
    FINISH_MAX_TOKENS,
    FINISH_STOP,
    FINISH_TOOL_CALLS,
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
from ._errors import EMPTY_RESPONSE, STREAM_CLOSED

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionChunk

_FINISH_KINDS: Final[dict[str, FinishKind]] = {
    "stop": FINISH_STOP,
    "tool_calls": FINISH_TOOL_CALLS,
    "length": FINISH_MAX_TOKENS,
}


class _Call:
    __slots__ = ("arguments", "call_id", "index", "name")

    def __init__(self, index: int) -> None:
        self.index = index
        self.call_id = ""
        self.name = ""
        self.arguments: list[str] = []


class ChunkTranslator:
    """Turn `ChatCompletionChunk`s into stream chunks; one translator per response."""

    def __init__(self) -> None:
        self.opened: list[tuple[int, str]] = []  # (block index, block type) in opening order
        self.reasoning_index: int | None = None
        self.reasoning: list[str] = []
        self.text_index: int | None = None
        self.text: list[str] = []
        self.calls: dict[int, _Call] = {}
        self.finish_reason: str | None = None
        self.usage: Any = None

    def _open(self, block_type: str) -> int:
        index = len(self.opened)
        self.opened.append((index, block_type))
        return index

    def feed(self, chunk: ChatCompletionChunk) -> list[StreamChunk]:
        """Translate one SDK chunk; returns the block-start and delta chunks it produces."""
        out: list[StreamChunk] = []
        if chunk.usage is not None:
            self.usage = chunk.usage
        for choice in chunk.choices:
            delta = choice.delta
            reasoning = getattr(delta, "reasoning_content", None)
            if isinstance(reasoning, str) and reasoning:
                if self.reasoning_index is None:
                    self.reasoning_index = self._open("reasoning")
                    out.append(block_start(self.reasoning_index, "reasoning"))
                self.reasoning.append(reasoning)
                out.append(reasoning_delta(self.reasoning_index, reasoning))
            if delta.content:
                if self.text_index is None:
                    self.text_index = self._open("text")
                    out.append(block_start(self.text_index, "text"))
                self.text.append(delta.content)
                out.append(text_delta(self.text_index, delta.content))
            for wire in delta.tool_calls or ():
                call = self.calls.get(wire.index)
                if call is None:
                    call = self.calls[wire.index] = _Call(self._open("tool-call"))
                    out.append(block_start(call.index, "tool-call"))
                if wire.id:
                    call.call_id = wire.id
                fragment = ""
                if wire.function is not None:
                    if wire.function.name:
                        call.name = wire.function.name
                    fragment = wire.function.arguments or ""
                call.arguments.append(fragment)
                out.append(
                    tool_call_delta(
                        call.index,
                        call_id=call.call_id,
                        name=call.name or None,
                        arguments_delta=fragment,
                    )
                )
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        return out

    def close(self, provider: str) -> list[StreamChunk]:
        """Return the closing chunks: every `block-end`, then `usage`, then `finish`.

        Raises:
            LlmError: `STREAM_CLOSED` if no finish reason arrived (the SDK ends silently on a
                truncated stream, llm-spec 5.3).
        """
        if self.finish_reason is None:
            raise LlmError(f"{provider} stream ended without a finish reason", code=STREAM_CLOSED)
        calls = {call.index: call for call in self.calls.values()}
        out: list[StreamChunk] = []
        for index, block_type in self.opened:
            if block_type == "tool-call":
                call = calls[index]
                block = {
                    "type": "tool-call",
                    "id": call.call_id or f"call_{uuid.uuid4().hex}",
                    "name": call.name,
                    "arguments": "".join(call.arguments),
                }
            else:
                parts = self.reasoning if block_type == "reasoning" else self.text
                block = {"type": block_type, "text": "".join(parts)}
            out.append(block_end(index, block))
        if self.usage is not None:
            out.append(_usage(self.usage))
        kind = _FINISH_KINDS.get(self.finish_reason)
        if kind is None:
            failure = {
                "message": f"model stopped: {self.finish_reason}",
                "code": self.finish_reason.upper(),
            }
            out.append(finish_chunk(FINISH_ERROR, failure=failure))
        elif kind == FINISH_STOP and not self.opened:
            failure = {
                "message": "model returned a completed response with no content",
                "code": EMPTY_RESPONSE,
            }
            out.append(finish_chunk(FINISH_ERROR, failure=failure))
        else:
            out.append(finish_chunk(kind))
        return out


def _usage(usage: Any) -> StreamChunk:
    prompt = int(usage.prompt_tokens or 0)
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None)
    if cached is None:
        cached = getattr(usage, "prompt_cache_hit_tokens", None)
    completion_details = getattr(usage, "completion_tokens_details", None)
    reasoning = getattr(completion_details, "reasoning_tokens", None)
    return usage_chunk(
        input_tokens=prompt - int(cached or 0),
        output_tokens=int(usage.completion_tokens or 0),
        cache_read_tokens=int(cached) if cached is not None else None,
        reasoning_tokens=int(reasoning) if reasoning is not None else None,
    )
