"""The OpenAI Chat Completions adapter (OpenAI and every compatible server, DeepSeek included).

Built on the official `openai` SDK with its retries off (`max_retries=0`): one `stream()`
call is one provider attempt, and duraloop's retry policy owns retries (llm-spec 1.4 rule 7).
Wire rules follow llm-spec 2.1/2.3 and the pairing rule of 3.1: an assistant message carries
all its tool calls (raw argument strings), each tool result becomes one `tool` message
right after it, and error results say so in their text (section 4).

The converted payload of each message is cached by message id (messages are immutable), so
the unchanged prefix of a long history is encoded once and reused.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Final, cast

import openai

from ..errors import ConfigError, LlmError
from ..log._json import JsonObject
from ..log._messages import Message
from ._chunks import StreamChunk
from ._errors import (
    CONTEXT_WINDOW_EXCEEDED,
    MALFORMED_RESPONSE,
    QUOTA,
    RATE_LIMIT,
    SERVER,
    TIMEOUT,
    TRANSPORT,
    UNKNOWN,
    UNSUPPORTED_CONTENT,
    code_for_status,
    is_context_window_exceeded,
    is_quota_exceeded,
    parse_retry_after_ms,
)
from ._model import ModelRequest
from ._openai_stream import ChunkTranslator

_NO_OUTPUT: Final = "(no output)"
_ERROR_PREFIX: Final = "Error: "


class OpenAIChatModel:
    """A model behind an OpenAI-compatible Chat Completions endpoint.

    Args:
        model: the provider's model id, sent verbatim.
        api_key: the API key (surrounding whitespace is trimmed).
        base_url: the API root, e.g. `https://api.deepseek.com`; None for OpenAI's.
        provider: the route name recorded in message sources; `deepseek` also sends the
            assistant's reasoning back as `reasoning_content` (llm-spec 3.3).
        timeout_seconds: the SDK's per-request timeout, in seconds.

    Raises:
        ConfigError: if the key is empty or not printable ASCII without spaces.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        provider: str = "openai",
        timeout_seconds: float = 600,
    ) -> None:
        key = api_key.strip()
        if not key or not key.isascii() or not all("\x21" <= ch <= "\x7e" for ch in key):
            raise ConfigError(
                f"the {provider} API key is empty or contains spaces or non-printable "
                "characters; check the key you configured"
            )
        self.provider = provider
        self.model = model
        self._base_url = base_url or "https://api.openai.com/v1"
        self._send_reasoning = provider == "deepseek"
        self._client = openai.AsyncOpenAI(
            api_key=key, base_url=base_url, max_retries=0, timeout=timeout_seconds
        )
        self._cache: dict[str, tuple[Message, list[JsonObject]]] = {}

    async def aclose(self) -> None:
        """Close the underlying HTTP client and its connections."""
        await self._client.close()

    def payload(self, request: ModelRequest) -> JsonObject:
        """Build the Chat Completions request body for `request`.

        Message payloads are cached; treat the returned value as read-only.

        Args:
            request: the messages and options.

        Returns:
            `{model, messages, stream, stream_options, tools?, max_tokens?, temperature?}`.

        Raises:
            LlmError: `UNSUPPORTED_CONTENT` if a message holds an image or has an unknown role.
        """
        messages: list[JsonObject] = []
        if request.system is not None:
            messages.append({"role": "system", "content": request.system})
        cache = self._cache
        for message in request.messages:
            entry = cache.get(message["id"])
            if entry is None or (entry[0] is not message and entry[0] != message):
                entry = (message, self._convert(message))
                cache[message["id"]] = entry
            messages.extend(entry[1])
        body: JsonObject = {
            "model": self.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [{"type": "function", "function": t.to_json()} for t in request.tools]
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        return body

    def _convert(self, message: Message) -> list[JsonObject]:
        role = message["role"]
        blocks = message.get("content", [])
        if role == "assistant":
            return [self._convert_assistant(message)]
        if role == "user":
            return _convert_user(message)
        if role == "system":
            return [{"role": "system", "content": _joined_text(blocks, message, sep="")}]
        raise LlmError(
            f"message {message['id']} has role {role!r}, which Chat Completions cannot carry",
            code=UNSUPPORTED_CONTENT,
        )

    def _convert_assistant(self, message: Message) -> JsonObject:
        text: list[str] = []
        reasoning: list[str] = []
        calls: list[JsonObject] = []
        for block in message.get("content", []):
            kind = block.get("type")
            if kind == "text":
                text.append(block["text"])
            elif kind == "reasoning":
                reasoning.append(block["text"])
            elif kind == "tool-call":
                function = {"name": block["name"], "arguments": block["arguments"]}
                calls.append({"id": block["id"], "type": "function", "function": function})
            elif kind == "image":
                raise _unsupported_image(message)
        out: JsonObject = {"role": "assistant", "content": "".join(text)}
        if self._send_reasoning and reasoning:
            out["reasoning_content"] = "".join(reasoning)
        if calls:
            out["tool_calls"] = calls
        return out

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """Make one Chat Completions streaming request and translate it into chunks.

        Args:
            request: the messages and options to send.

        Yields:
            Deltas as they arrive; at the end `block-end` for every block in opening order,
            then `usage`, then `finish`.

        Raises:
            LlmError: on any HTTP, transport, timeout or protocol failure (raised `from` the
                SDK error); `STREAM_CLOSED` if the stream ended without a finish reason.
        """
        body = self.payload(request)
        translator = ChunkTranslator()
        try:
            response = await self._client.chat.completions.create(
                model=self.model,
                messages=cast(Any, body["messages"]),
                stream=True,
                stream_options={"include_usage": True},
                tools=cast(Any, body.get("tools", openai.omit)),
                max_tokens=body.get("max_tokens", openai.omit),
                temperature=body.get("temperature", openai.omit),
            )
            async with response:
                async for chunk in response:
                    for out in translator.feed(chunk):
                        yield out
        except openai.OpenAIError as exc:
            raise self._llm_error(exc) from exc
        except json.JSONDecodeError as exc:
            raise LlmError(
                f"{self.provider} sent an SSE payload that is not JSON: {exc}",
                code=MALFORMED_RESPONSE,
            ) from exc
        for out in translator.close(self.provider):
            yield out

    def _llm_error(self, exc: openai.OpenAIError) -> LlmError:
        where = f"{self.provider} API request to {self._base_url}"
        if isinstance(exc, openai.APITimeoutError):
            return LlmError(f"{where} timed out", code=TIMEOUT)
        if isinstance(exc, openai.APIConnectionError):
            return LlmError(f"{where} failed: {exc}", code=TRANSPORT)
        if isinstance(exc, openai.APIStatusError):
            body = exc.body if isinstance(exc.body, dict) else {}
            detail = " ".join(str(body.get(key) or "") for key in ("code", "type", "message"))
            message = body.get("message")
            return LlmError(
                message
                if isinstance(message, str) and message
                else f"{self.provider} API error (HTTP {exc.status_code})",
                code=code_for_status(exc.status_code, detail),
                status=exc.status_code,
                provider_retry_after_ms=parse_retry_after_ms(
                    exc.response.headers.get("retry-after")
                ),
                request_id=exc.request_id or None,
            )
        if isinstance(exc, openai.APIError):
            # An in-stream error event after a 200: the provider failed mid-response.
            detail = f"{exc.code or ''} {exc.type or ''} {exc.message}"
            if is_quota_exceeded(detail):
                code = QUOTA
            elif is_context_window_exceeded(detail):
                code = CONTEXT_WINDOW_EXCEEDED
            elif "rate" in detail.lower() and "limit" in detail.lower():
                code = RATE_LIMIT
            else:
                code = SERVER
            return LlmError(f"{self.provider} stream failed: {exc.message}", code=code)
        return LlmError(f"{where} failed: {exc}", code=UNKNOWN)


def _convert_user(message: Message) -> list[JsonObject]:
    # Tool messages first, then any text: keeps the pairing rule of llm-spec 3.1 even if a
    # user message mixes text and tool results (llm-spec 6.14).
    out: list[JsonObject] = []
    text: list[str] = []
    has_results = False
    for block in message.get("content", []):
        kind = block.get("type")
        if kind == "tool-result":
            has_results = True
            content = _joined_text(block.get("content", []), message, sep="\n") or _NO_OUTPUT
            if block.get("isError") and not content.startswith("Error"):
                content = _ERROR_PREFIX + content
            out.append({"role": "tool", "tool_call_id": block["toolCallId"], "content": content})
        elif kind == "text":
            text.append(block["text"])
        elif kind == "image":
            raise _unsupported_image(message)
    if text or not has_results:
        out.append({"role": "user", "content": "".join(text)})
    return out


def _joined_text(blocks: list[Any], message: Message, *, sep: str) -> str:
    parts: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            parts.append(block["text"])
        elif kind == "image":
            raise _unsupported_image(message)
    return sep.join(parts)


def _unsupported_image(message: Message) -> LlmError:
    return LlmError(
        f"message {message['id']} holds an image; the Chat Completions adapter sends text only",
        code=UNSUPPORTED_CONTENT,
    )
