"""The OpenAI Chat Completions adapter (OpenAI and every compatible server, DeepSeek included).

Built on the official `openai` SDK with its retries off (`max_retries=0`): one `stream()`
call is one provider attempt, and duraloop's retry policy owns retries (llm-spec 1.4 rule 7).
Wire conversion lives in `_openai_request` (llm-spec 2.1/2.3, 3.1, 4).

Two costs are kept off the hot paths:

- The request body is built by `RequestEncoder` as bytes, reusing the encoded fragments of
  the unchanged history prefix, and posted with the SDK's own HTTP client as raw `content`
  (`AsyncOpenAI.post`), so the SDK's per-request `async_maybe_transform` walk over every
  message (about 1.4 s at 4,000 messages) never runs. Auth headers, the base URL,
  timeouts, the SSE decoding into `ChatCompletionChunk` and the exception classes are the
  SDK's, as with `chat.completions.create`.
- `openai` is imported when an `OpenAIChatModel` is constructed, not when this module is
  imported: `import duraloop` must not pay the SDK's import time (about 1 s).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Final

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
    code_for_status,
    is_context_window_exceeded,
    is_quota_exceeded,
    parse_retry_after_ms,
)
from ._model import ModelRequest
from ._openai_request import RequestEncoder, body_options, convert_message
from ._openai_stream import ChunkTranslator

if TYPE_CHECKING:
    import openai
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

_PATH: Final = "/chat/completions"


class OpenAIChatModel:
    """A model behind an OpenAI-compatible Chat Completions endpoint.

    Constructing one imports the `openai` SDK (importing duraloop does not).

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
        # Deferred to here: the SDK costs about 1 s to import.
        import openai
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        self.provider = provider
        self.model = model
        self._base_url = base_url or "https://api.openai.com/v1"
        self._send_reasoning = provider == "deepseek"
        self._client = openai.AsyncOpenAI(
            api_key=key, base_url=base_url, max_retries=0, timeout=timeout_seconds
        )
        self._cast_to: type[ChatCompletion] = ChatCompletion
        self._stream_cls: type[openai.AsyncStream[ChatCompletionChunk]] = openai.AsyncStream[
            ChatCompletionChunk
        ]
        self._encoder = RequestEncoder(model, self._convert)

    async def aclose(self) -> None:
        """Close the underlying HTTP client and its connections."""
        await self._client.close()

    def encode_request(self, request: ModelRequest) -> bytes:
        """Build the Chat Completions request body for `request` as JSON bytes.

        The history prefix shared with the previous request (the same message objects, in
        order) is not converted or encoded again: its cached byte fragments are joined, so
        the cost is one join plus converting the new messages.

        Args:
            request: the messages and options.

        Returns:
            Compact UTF-8 JSON: `{model, messages, stream, stream_options, tools?,
            max_tokens?, temperature?}`, the body `stream()` sends.

        Raises:
            LlmError: `UNSUPPORTED_CONTENT` if a message holds an image or has an unknown role.
        """
        return self._encoder.encode(request)

    def payload(self, request: ModelRequest) -> JsonObject:
        """Build the Chat Completions request body for `request` as a dict, for inspection.

        Converts the whole history on every call (no cache); `stream()` sends
        `encode_request(request)`, which encodes the same value.

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
        for message in request.messages:
            messages.extend(self._convert(message))
        return {"model": self.model, "messages": messages, **body_options(request)}

    def _convert(self, message: Message) -> list[JsonObject]:
        return convert_message(message, send_reasoning=self._send_reasoning)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """Make one Chat Completions streaming request and translate it into chunks.

        Args:
            request: the messages and options to send.

        Yields:
            Deltas as they arrive; at the end `block-end` for every block in opening order,
            then `usage`, then `finish`.

        Raises:
            LlmError: on any HTTP, transport, timeout or protocol failure (raised `from` the
                SDK error); `STREAM_CLOSED` if the stream ended without a finish reason;
                `UNSUPPORTED_CONTENT` (before any request) if a message cannot be sent.
        """
        import openai  # loaded by __init__ already: a sys.modules lookup

        body = self.encode_request(request)
        translator = ChunkTranslator()
        try:
            response = await self._client.post(
                _PATH,
                cast_to=self._cast_to,
                content=body,
                options={"security": {"bearer_auth": True}},
                stream=True,
                stream_cls=self._stream_cls,
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
        import openai  # loaded by __init__ already: a sys.modules lookup

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
