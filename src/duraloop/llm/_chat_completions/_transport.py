"""The Chat Completions transport shared by the OpenAI and DeepSeek adapters.

One `stream()` call is one provider attempt (docs/providers.md#stream-contract): the official
`openai` SDK sends the POST with its retries off (`max_retries=0`), and duraloop's retry policy owns
retries.

Transport choice (docs/providers.md#sdks-and-transport). The POST goes through the SDK's own client,
`AsyncOpenAI.post(..., cast_to=httpx2.Response, stream=True)`, which hands back the raw
streamed `httpx2.Response`. From the SDK this keeps the auth header, base-URL joining,
timeouts, the connection pool, and above all its typed status errors (the error body
parsed, `APIStatusError` per status) and connection/timeout errors, mapped once for both
providers (`map_openai_errors`, `_errors`). The body is then read as raw bytes by duraloop's
spec-strict SSE parser
(`_sse`), not by the SDK's `AsyncStream`, because the SDK iterator ends silently on a
truncated stream and hides `[DONE]`, comments and the payload that failed to parse
(docs/providers.md#sdks-and-transport); it also skips the SDK's pydantic model per chunk. The
request body is built by `RequestEncoder` as bytes and posted as raw `content`, so the SDK's
per-request `async_maybe_transform` walk over every message (about 1.4 s at 4,000 messages) never
runs.

Stream outcomes: `[DONE]` closes the stream (block ends, usage, finish); the end of the
body before `[DONE]` is `STREAM_CLOSED` (not retried, docs/providers.md#error-codes), even when a
finish reason was seen, or `EMPTY_RESPONSE` (retried) when a 2xx response had no body at all; a
payload that is not JSON is `MALFORMED_RESPONSE`; an error payload mid-stream is classified
(`stream_error`); a read failure is `TRANSPORT` (`TIMEOUT` for the SDK's read timeout). Comment
lines (`: keep-alive`) are activity, not silence: they yield no chunk (the chunk union has no such
kind), but they re-arm the HTTP read timeout (`timeout_seconds`, which counts from the last byte
received) and update `last_activity_seconds`, the clock reading an idle watchdog outside the adapter
can consult, and call `note_stream_activity()`, which re-arms the loop's stream idle timer
(docs/providers.md#adapter-guarantees: "transport activity (DeepSeek SSE comments) re-arms it").

`openai` (and `httpx2`, which it uses) is imported when an adapter is constructed, not when
this module is imported: `import duraloop` must not pay the SDK's import time (about 1 s).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import anyio
import msgspec

from ...errors import LlmError
from ...log import EncodedPrefix, JsonObject, Message
from ...log.vocabulary import EMPTY_RESPONSE, MALFORMED_RESPONSE, STREAM_CLOSED, UNKNOWN
from .._activity import note_stream_activity
from .._chunks import StreamChunk
from .._model import ModelRequest
from .._options import AdapterOptions
from .._redact import SecretRedactor, redacted_stream
from .._sse import SseComment, SseEvent, SseParser
from ._errors import map_openai_errors, map_read_errors, request_id_of
from ._request import ReasoningEcho, RequestEncoder
from ._stream import ChunkTranslator, stream_error

if TYPE_CHECKING:
    import httpx2

logger = logging.getLogger(__name__)

_PATH: Final = "/chat/completions"
_DONE: Final = "[DONE]"
_POST_OPTIONS: Final[Any] = {
    "security": {"bearer_auth": True},
    "headers": {"Accept": "text/event-stream"},
}


class ChatCompletionsModel:
    """A model behind a Chat Completions endpoint: the transport both dialects share.

    Subclasses (`OpenAIChatModel`, `DeepSeekChatModel`) check their options, then call
    this constructor with the body options of their dialect.

    Args:
        model: the provider's model id, sent verbatim.
        provider: the route recorded in message sources (`openai`, `deepseek`).
        label: the provider's display name, for messages.
        options: the checked adapter options; `base_url` is the API root (the request goes
            to `<base_url>/chat/completions`) and `timeout_seconds` the SDK's timeout for
            connecting and for each read.
        default_base_url: the API root when `options.base_url` is None.
        echo: how assistant reasoning goes back (`ReasoningEcho`).
        body_options: builds the body keys after `messages` (see `RequestEncoder`).
        request_headers: the dialect's extra headers for one request (e.g. DeepSeek's
            `x-deepseek-harness-compact` for a summary request); None sends none.

    Attributes:
        context_window: the model's context window in tokens (`options.context_window`),
            or None; see `duraloop.llm.context_window_of`.
        last_activity_seconds: the event-loop clock (`anyio.current_time()`), in seconds,
            when the last response bytes arrived (SSE comments included); None before any.
    """

    def __init__(
        self,
        model: str,
        *,
        provider: str,
        label: str,
        options: AdapterOptions,
        default_base_url: str,
        echo: ReasoningEcho,
        body_options: Callable[[ModelRequest], JsonObject],
        request_headers: Callable[[ModelRequest], Mapping[str, str]] | None = None,
    ) -> None:
        # Deferred to here: the SDK costs about 1 s to import.
        import httpx2
        import openai

        api_key, base_url = options.api_key, options.base_url or default_base_url
        self.provider = provider
        self.model = model
        self.base_url = base_url
        self.context_window = options.context_window
        self.last_activity_seconds: float | None = None
        self._label = label
        self._request_headers = request_headers
        self._openai = openai
        self._httpx = httpx2
        self._client = openai.AsyncOpenAI(
            api_key=api_key, base_url=base_url, max_retries=0, timeout=options.timeout_seconds
        )
        self._encoder = RequestEncoder(model, provider=provider, echo=echo, options=body_options)
        self._redactor = SecretRedactor([api_key], base_url=base_url)

    async def aclose(self) -> None:
        """Close the underlying HTTP client and its connections."""
        await self._client.close()

    def encode_request(self, request: ModelRequest) -> bytes:
        """Build the request body for `request` as JSON bytes, its pairing checked.

        The history prefix shared with the previous request (the same message objects, in
        order) is not converted, encoded or checked again.

        Args:
            request: the messages and options.

        Returns:
            Compact UTF-8 JSON: the body `stream()` sends (see `payload` for its keys).

        Raises:
            LlmError: `UNSUPPORTED_CONTENT` if a message holds an image or has an unknown role.
            WirePairingError: if the wire messages would break the pairing rule of
                docs/providers.md#chat-completions-pairing (a duraloop bug; nothing is sent).
        """
        return self._encoder.encode(request)

    def encoded_prefix(self, messages: Sequence[Message]) -> EncodedPrefix | None:
        """Return the encoded wire messages of `messages` for a snapshot, or None.

        See `RequestEncoder.encoded_prefix` and docs/store.md#snapshots: an adapter of the
        same route and reasoning echo in a resumed process starts its cache from it.

        Args:
            messages: the session's derived messages (all of them).

        Returns:
            The encoded prefix (pairing checked), or None if they cannot be sent.
        """
        return self._encoder.encoded_prefix(messages)

    def payload(self, request: ModelRequest) -> JsonObject:
        """Build the request body for `request` as a dict, for inspection.

        Converts the whole history on every call (no cache) and does not run the pairing
        check; `stream()` sends `encode_request(request)`, which encodes the same value.

        Args:
            request: the messages and options.

        Returns:
            `{model, messages, stream, stream_options, ...dialect options}`.

        Raises:
            LlmError: `UNSUPPORTED_CONTENT` if a message holds an image or has an unknown role.
        """
        messages = self._encoder.wire_messages(request)
        return {"model": self.model, "messages": messages, **self._encoder.options(request)}

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """Make one streaming request and translate the response into chunks.

        Every failure passes the adapter's `SecretRedactor` on its way out: the API key and
        the base URL's credentials never appear in an error's text.

        Args:
            request: the messages and options to send.

        Yields:
            Deltas as they arrive; at `[DONE]`, `block-end` for every block in opening
            order, then `usage`, then `finish`.

        Raises:
            LlmError: on an HTTP error status, a transport failure, a timeout, a stream cut
                before `[DONE]` (`STREAM_CLOSED`), an empty 2xx body (`EMPTY_RESPONSE`), a
                malformed payload (`MALFORMED_RESPONSE`) or an error payload mid-stream;
                `UNSUPPORTED_CONTENT` (before any request) if a message cannot be sent.
            WirePairingError: before any request, if the payload breaks the pairing rule.
        """
        return redacted_stream(self._stream(request), self._redactor)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        body = self.encode_request(request)
        headers = None if self._request_headers is None else self._request_headers(request)
        response = await self._post(body, headers)
        request_id = request_id_of(response.headers)
        translator = ChunkTranslator(
            provider=self.provider,
            original_id=self._encoder.ids.from_wire,
            request_id=request_id,
        )
        try:
            with map_read_errors(self._label, self.base_url, request_id):
                media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
                if media_type == "application/json":
                    await self._raise_non_streaming(response, request_id)
                parser = SseParser()
                received = False
                async for data in response.aiter_bytes():
                    self.last_activity_seconds = anyio.current_time()
                    note_stream_activity()  # re-arms the loop's idle timer, keep-alives included
                    received = received or bool(data)
                    for item in parser.feed(data):
                        chunks, done = self._handle(item, translator, request_id)
                        for chunk in chunks:
                            yield chunk
                        if done:
                            return
                for item in parser.close():
                    chunks, done = self._handle(item, translator, request_id)
                    for chunk in chunks:
                        yield chunk
                    if done:
                        return
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()
        if not received:
            raise LlmError(
                f"{self._label} API returned HTTP {response.status_code} with an empty body",
                code=EMPTY_RESPONSE,
                status=response.status_code,
                request_id=request_id,
            )
        raise LlmError(
            f"{self._label} SSE stream ended without [DONE]: the response was cut off, and "
            "nothing from this attempt is kept (send the turn again to retry)",
            code=STREAM_CLOSED,
            request_id=request_id,
        )

    def _handle(
        self, item: SseEvent | SseComment, translator: ChunkTranslator, request_id: str | None
    ) -> tuple[list[StreamChunk], bool]:
        """Translate one SSE item; return its chunks and whether it was `[DONE]`."""
        if isinstance(item, SseComment):
            return [], False  # activity only (a keep-alive): no chunk
        if item.event == "error":
            payload = self._decode(item, request_id)
            error = payload.get("error", payload) if isinstance(payload, dict) else payload
            raise stream_error(self.provider, error, request_id=request_id)
        if item.event != "message":
            logger.debug("%s stream: skipped an SSE event of type %r", self.provider, item.event)
            return [], False
        if item.data == _DONE:
            return translator.close(), True
        return translator.feed(self._decode(item, request_id)), False

    def _decode(self, item: SseEvent, request_id: str | None) -> Any:
        try:
            return msgspec.json.decode(item.data)
        except msgspec.DecodeError as exc:
            raise LlmError(
                f"{self._label} sent an SSE payload that is not JSON ({exc}): {item.data[:80]!r}",
                code=MALFORMED_RESPONSE,
                request_id=request_id,
            ) from exc

    async def _post(self, body: bytes, headers: Mapping[str, str] | None) -> httpx2.Response:
        options = _POST_OPTIONS
        if headers:
            options = {**_POST_OPTIONS, "headers": {**_POST_OPTIONS["headers"], **headers}}
        with map_openai_errors(self._label, self.base_url):
            stream = True  # the `stream: bool` overload: cast_to decides the return type
            response: object = await self._client.post(
                _PATH,
                cast_to=self._httpx.Response,
                content=body,
                options=options,
                stream=stream,
            )
        if not isinstance(response, self._httpx.Response):
            raise LlmError(
                f"the openai SDK returned {type(response).__name__} for a raw streamed POST "
                "(expected httpx2.Response); duraloop needs a matching openai version",
                code=UNKNOWN,
            )
        return response

    async def _raise_non_streaming(self, response: httpx2.Response, request_id: str | None) -> None:
        raw = await response.aread()
        try:
            payload = msgspec.json.decode(raw) if raw else None
        except msgspec.DecodeError:
            payload = None
        if isinstance(payload, dict) and payload.get("error"):
            raise stream_error(self.provider, payload["error"], request_id=request_id)
        raise LlmError(
            f"{self._label} answered HTTP {response.status_code} with a JSON body instead of "
            "an event stream; duraloop requests `stream: true`: check that the base URL "
            "points at a Chat Completions API",
            code=MALFORMED_RESPONSE,
            status=response.status_code,
            request_id=request_id,
        )
