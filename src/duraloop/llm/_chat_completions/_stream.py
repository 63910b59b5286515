"""Translate Chat Completions stream payloads into stream chunks.

See docs/providers.md#chat-completions-wire.

Input is each SSE `data` payload already decoded from JSON (a `chat.completion.chunk`
object). Deltas are emitted as they arrive; `finish_reason` and `usage` are remembered
(OpenAI and DeepSeek send usage in a trailing `choices: []` chunk after the finish chunk,
and a stream is only complete at `[DONE]`) and emitted by `close()`, after `block-end` for
every opened block: usage, then finish.

Per choice delta, in this order (docs/providers.md#chat-completions-wire): reasoning
(`reasoning_content`, or `reasoning` as some compatible servers name it) opens one
reasoning block on its first non-empty fragment (DeepSeek's first thinking chunk is `""`
and opens nothing); `content` opens one text block; each `tool_calls[]` item opens one
tool-call block per wire `index` on first sight (a new non-empty `id` at a known index
opens a new block too, for servers that reuse index 0, docs/providers.md#chat-completions-wire).
Block indices are allocated in first-seen order.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from ...errors import LlmError
from ...log.vocabulary import (
    AUTH,
    BLOCK_REASONING,
    BLOCK_TOOL_CALL,
    CONTEXT_WINDOW_EXCEEDED,
    EMPTY_RESPONSE,
    FINISH_ERROR,
    FINISH_MAX_TOKENS,
    FINISH_STOP,
    FINISH_TOOL_CALLS,
    INVALID_REQUEST,
    MALFORMED_RESPONSE,
    QUOTA,
    RATE_LIMIT,
    SERVER,
)
from .._chunks import (
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
from .._errors import code_for_status, is_context_window_exceeded, is_quota_exceeded

_FINISH_KINDS: Final[dict[str, FinishKind]] = {
    "stop": FINISH_STOP,
    "tool_calls": FINISH_TOOL_CALLS,
    "length": FINISH_MAX_TOKENS,
}
_REASONING_KEYS: Final = ("reasoning_content", "reasoning")
_AUTH_TYPES: Final = ("authentication_error", "permission_error", "invalid_api_key")


class _Call:
    __slots__ = ("arguments", "call_id", "index", "name", "wire_id")

    def __init__(self, index: int) -> None:
        self.index = index
        self.wire_id = ""
        self.call_id = ""
        self.name = ""
        self.arguments: list[str] = []


class ChunkTranslator:
    """Turn decoded `chat.completion.chunk` payloads into stream chunks; one per response.

    Args:
        provider: the route, for error messages.
        original_id: maps a wire tool-call id back to the history's id
            (`ToolIdMap.from_wire`); ids the request never mapped come back unchanged.
        request_id: the response's request id, attached to the errors raised here.
    """

    def __init__(
        self,
        *,
        provider: str,
        original_id: Callable[[str], str] = str,
        request_id: str | None = None,
    ) -> None:
        self.provider = provider
        self.original_id = original_id
        self.request_id = request_id
        self.opened: list[tuple[int, str]] = []  # (block index, block type) in opening order
        self.reasoning_index: int | None = None
        self.reasoning: list[str] = []
        self.text_index: int | None = None
        self.text: list[str] = []
        self.calls: dict[int, _Call] = {}  # wire index -> its current call
        self.by_block: dict[int, _Call] = {}  # block index -> call
        self.finish_reason: str | None = None
        self.usage: Mapping[str, Any] | None = None

    def _open(self, block_type: str) -> int:
        index = len(self.opened)
        self.opened.append((index, block_type))
        return index

    def feed(self, payload: Any) -> list[StreamChunk]:
        """Translate one decoded payload.

        Args:
            payload: the JSON value of one SSE `data` field (not `[DONE]`).

        Returns:
            The block-start and delta chunks it produces, in order.

        Raises:
            LlmError: the classified provider error when the payload is an error object
                (`{"error": {...}}`, sent mid-stream after a 200; see `stream_error`);
                `MALFORMED_RESPONSE` when the payload is not a chunk object.
        """
        if not isinstance(payload, dict):
            raise self._malformed(f"a stream payload is {type(payload).__name__}, not an object")
        error = payload.get("error")
        if error:
            raise stream_error(self.provider, error, request_id=self.request_id)
        usage = payload.get("usage")
        if usage is not None:
            if not isinstance(usage, dict):
                raise self._malformed(f"`usage` is {type(usage).__name__}, not an object")
            self.usage = usage
        choices = payload.get("choices")
        if choices is None:
            choices = []
        elif not isinstance(choices, list):
            raise self._malformed(f"`choices` is {type(choices).__name__}, not a list")
        out: list[StreamChunk] = []
        for choice in choices:
            if not isinstance(choice, dict):
                raise self._malformed("a `choices` entry is not an object")
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise self._malformed("`choices[].delta` is not an object")
            self._reasoning(delta, out)
            content = delta.get("content")
            if content:
                if not isinstance(content, str):
                    raise self._malformed("`delta.content` is not a string")
                if self.text_index is None:
                    self.text_index = self._open("text")
                    out.append(block_start(self.text_index, "text"))
                self.text.append(content)
                out.append(text_delta(self.text_index, content))
            tool_calls = delta.get("tool_calls")
            if tool_calls:
                if not isinstance(tool_calls, list):
                    raise self._malformed("`delta.tool_calls` is not a list")
                for position, wire in enumerate(tool_calls):
                    self._tool_call(position, wire, out)
            finish = choice.get("finish_reason")
            if finish:
                if not isinstance(finish, str):
                    raise self._malformed("`finish_reason` is not a string")
                self.finish_reason = finish
        return out

    def _reasoning(self, delta: Mapping[str, Any], out: list[StreamChunk]) -> None:
        for key in _REASONING_KEYS:
            text = delta.get(key)
            if text is None:
                continue
            if not isinstance(text, str):
                raise self._malformed(f"`delta.{key}` is not a string")
            if not text:
                return  # DeepSeek's first thinking chunk is "": it opens no block
            if self.reasoning_index is None:
                self.reasoning_index = self._open("reasoning")
                out.append(block_start(self.reasoning_index, "reasoning"))
            self.reasoning.append(text)
            out.append(reasoning_delta(self.reasoning_index, text))
            return

    def _tool_call(self, position: int, wire: Any, out: list[StreamChunk]) -> None:
        if not isinstance(wire, dict):
            raise self._malformed("a `delta.tool_calls` entry is not an object")
        key = wire.get("index", position)
        if type(key) is not int:
            raise self._malformed("`tool_calls[].index` is not an integer")
        wire_id = wire.get("id") or ""
        function = wire.get("function") or {}
        if not isinstance(wire_id, str) or not isinstance(function, dict):
            raise self._malformed("`tool_calls[].id` or `.function` has the wrong type")
        call = self.calls.get(key)
        if call is None or (wire_id and call.wire_id and call.wire_id != wire_id):
            call = self.calls[key] = _Call(self._open(BLOCK_TOOL_CALL))
            self.by_block[call.index] = call
            out.append(block_start(call.index, BLOCK_TOOL_CALL))
        if wire_id and wire_id != call.wire_id:
            call.wire_id = wire_id
            call.call_id = self.original_id(wire_id)
        name = function.get("name")
        fragment = function.get("arguments") or ""
        if not isinstance(fragment, str) or (name is not None and not isinstance(name, str)):
            raise self._malformed("`function.name` or `function.arguments` is not a string")
        if name:
            call.name = name
        call.arguments.append(fragment)
        out.append(
            tool_call_delta(
                call.index, call_id=call.call_id, name=call.name or None, arguments_delta=fragment
            )
        )

    def close(self) -> list[StreamChunk]:
        """Return the closing chunks at `[DONE]`: every `block-end`, then `usage`, `finish`.

        Finish reasons (docs/providers.md#chat-completions-wire): `stop` -> stop, `tool_calls` ->
        tool-calls, `length` -> max-tokens, none at all -> stop; any other reason -> an error finish
        with the reason upper-cased as its code (`content_filter` -> `CONTENT_FILTER`,
        `insufficient_system_resource` -> `INSUFFICIENT_SYSTEM_RESOURCE`). A `stop` with no block
        opened is an `EMPTY_RESPONSE` error (retryable); reasoning alone is content. A tool call
        that never got an id gets a fresh `call_<32 hex>` (docs/providers.md#tool-call-ids).

        Returns:
            The closing chunks.

        Raises:
            LlmError: `MALFORMED_RESPONSE` if the usage object holds a non-integer count.
        """
        out: list[StreamChunk] = []
        for index, block_type in self.opened:
            if block_type == BLOCK_TOOL_CALL:
                call = self.by_block[index]
                block = {
                    "type": BLOCK_TOOL_CALL,
                    "id": call.call_id or f"call_{uuid.uuid4().hex}",
                    "name": call.name,
                    "arguments": "".join(call.arguments),
                }
            else:
                parts = self.reasoning if block_type == BLOCK_REASONING else self.text
                block = {"type": block_type, "text": "".join(parts)}
            out.append(block_end(index, block))
        if self.usage is not None:
            out.append(self._usage(self.usage))
        reason = self.finish_reason or "stop"
        kind = _FINISH_KINDS.get(reason)
        if kind is None:
            failure = {"message": f"model stopped: {reason}", "code": reason.upper()}
            out.append(finish_chunk(FINISH_ERROR, failure=failure))
        elif kind == FINISH_STOP and not self.opened:
            failure = {
                "message": f"{self.provider} returned a completed response with no content",
                "code": EMPTY_RESPONSE,
            }
            out.append(finish_chunk(FINISH_ERROR, failure=failure))
        else:
            out.append(finish_chunk(kind))
        return out

    def _usage(self, usage: Mapping[str, Any]) -> StreamChunk:
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        if cached is None:
            cached = usage.get("prompt_cache_hit_tokens")
        completion_details = usage.get("completion_tokens_details")
        reasoning = (
            completion_details.get("reasoning_tokens")
            if isinstance(completion_details, dict)
            else None
        )
        prompt = usage.get("prompt_tokens") or 0
        completion = usage.get("completion_tokens") or 0
        for name, value in (("prompt", prompt), ("completion", completion), ("cached", cached)):
            if value is not None and type(value) is not int:
                raise self._malformed(f"the usage {name} token count is {value!r}, not an integer")
        if reasoning is not None and type(reasoning) is not int:
            raise self._malformed(f"the usage reasoning token count is {reasoning!r}")
        return usage_chunk(
            input_tokens=prompt - (cached or 0),
            output_tokens=completion,
            cache_read_tokens=cached,
            reasoning_tokens=reasoning,
        )

    def _malformed(self, what: str) -> LlmError:
        return LlmError(
            f"{self.provider} sent a malformed stream: {what}",
            code=MALFORMED_RESPONSE,
            request_id=self.request_id,
        )


def stream_error(provider: str, error: Any, *, request_id: str | None = None) -> LlmError:
    """Classify an error object a provider sent instead of a chunk (after an HTTP 200).

    The object is `{"message", "type", "code"}` (OpenAI's `{"error": {...}}` shape). The
    code follows the same priorities as an HTTP error (docs/providers.md#chat-completions-wire,
    #errors): quota wording -> `QUOTA`; a numeric `code` that is an HTTP status ->
    `code_for_status`; rate-limit type or code -> `RATE_LIMIT`; context wording ->
    `CONTEXT_WINDOW_EXCEEDED`; `invalid_request_error` -> `INVALID_REQUEST`; authentication or
    permission types -> `AUTH`; anything else -> `SERVER` (the provider failed mid-response:
    retryable).

    Args:
        provider: the route, for the message.
        error: the payload's `error` value (an object, or a bare string).
        request_id: the response's request id.

    Returns:
        The `LlmError` to raise.
    """
    fields = error if isinstance(error, dict) else {"message": str(error)}
    message = fields.get("message")
    text = message if isinstance(message, str) and message else "no message"
    kind = str(fields.get("type") or "")
    raw_code = fields.get("code")
    detail = f"{raw_code or ''} {kind} {text}".replace("_", " ")
    status = raw_code if type(raw_code) is int and 100 <= raw_code <= 599 else None
    if is_quota_exceeded(detail):
        code = QUOTA
    elif status is not None:
        code = code_for_status(status, detail)
    elif "rate limit" in detail.lower():
        code = RATE_LIMIT
    elif is_context_window_exceeded(detail):
        code = CONTEXT_WINDOW_EXCEEDED
    elif kind == "invalid_request_error":
        code = INVALID_REQUEST
    elif kind in _AUTH_TYPES or str(raw_code) in _AUTH_TYPES:
        code = AUTH
    else:
        code = SERVER
    return LlmError(
        f"{provider} stream failed mid-response: {text}", code=code, request_id=request_id
    )
