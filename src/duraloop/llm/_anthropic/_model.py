"""The Anthropic Messages adapter.

See docs/providers.md#anthropic-wire, #anthropic-pairing, #error-tool-results, #sdks-and-transport,
#adapters.

Built on the official `anthropic` SDK with its retries off (`max_retries=0`): one `stream()`
call is one provider attempt; duraloop's retry policy owns retries
(docs/providers.md#stream-contract). Wire conversion lives in `_convert` and `_request`, event
translation in `_stream`, and the SDK's errors are mapped at one boundary, `map_anthropic_errors`
(`_errors`).

Measured choice of transport: the body is built by `MessagesEncoder` as bytes (each
history message converted and encoded once) and posted with the SDK's own client as raw
`content` (`AsyncAnthropic.post`), reading the SSE events as plain dicts
(`AsyncStream[object]`). At 4,000 history messages `messages.create(stream=True)` spent
74-138 ms per request in the SDK before sending, against 3-5 ms for the raw post of the
same body (msgspec encoding included); auth headers, `anthropic-version`, the base URL,
timeouts, SSE framing, `ping` filtering and the exception classes stay the SDK's.

`anthropic` is imported when an `AnthropicMessagesModel` is constructed, not when this
module is imported: `import duraloop` must not pay the SDK's import time.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Final

from ...errors import ConfigError, LlmError
from ...log import JsonObject
from ...log.vocabulary import MALFORMED_RESPONSE, UNSUPPORTED_OPTION
from .._chunks import StreamChunk
from .._model import ModelRequest
from .._options import DEFAULT_TIMEOUT_SECONDS, AdapterOptions
from .._redact import SecretRedactor, redacted_stream
from .._tool_ids import ANTHROPIC_IDS, ToolIdMap
from ._convert import MessageConverter
from ._errors import map_anthropic_errors
from ._request import BodyOptions, MessagesEncoder
from ._stream import EventTranslator

if TYPE_CHECKING:
    import anthropic

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL: Final = "https://api.anthropic.com"
DEFAULT_MAX_TOKENS: Final = 8192
"""`max_tokens` when neither the request nor the adapter sets one (the API requires it)."""

THINKING_BUDGET_TOKENS: Final[dict[str, int]] = {"low": 2048, "medium": 8192, "high": 16384}
"""Extended-thinking `budget_tokens` per reasoning effort; `off` sends no thinking."""

MIN_THINKING_BUDGET_TOKENS: Final = 1024
"""The API's smallest `budget_tokens`; thinking also leaves at least this much for the answer."""

REASONING_EFFORTS: Final = ("off", *THINKING_BUDGET_TOKENS)
_PATH: Final = "/v1/messages"


class AnthropicMessagesModel:
    """A Claude model behind the Anthropic Messages API, streamed.

    Constructing one imports the `anthropic` SDK (importing duraloop does not).

    Reasoning effort maps to extended thinking `{"type": "enabled", "budget_tokens"}`:
    `low` 2,048, `medium` 8,192, `high` 16,384 tokens; `off` or None sends no thinking.
    `max_tokens` counts thinking too: with thinking on and no explicit cap, the cap is
    8,192 plus the budget (the answer keeps 8,192 tokens); with an explicit cap, the budget
    is lowered to leave the answer at least 1,024 tokens. With thinking on, `temperature` is
    not sent (the API rejects it; a warning is logged once), and a request that continues
    a tool loop whose first assistant message has no thinking block (it came from another
    model) is sent without thinking, as the API's own error suggests, with a warning.

    Args:
        model: the model id, e.g. `claude-sonnet-4-5`, sent verbatim.
        api_key: the API key (surrounding whitespace is trimmed).
        base_url: the API root; None for `https://api.anthropic.com`.
        timeout_seconds: the SDK's timeout per connect and per read, in seconds; a stream
            silent for longer fails with `TIMEOUT`.
        max_tokens: the default output cap in tokens, thinking included; a request's own
            `max_tokens` wins; None for 8,192 (plus the thinking budget).
        reasoning_effort: `off`, `low`, `medium` or `high`; None means `off`.
        context_window: the model's context window in tokens, for automatic compaction
            (read by `duraloop.llm.context_window_of`; `[context_windows]` in config.toml
            wins over it); None leaves it to the built-in table of well-known models.

    Raises:
        ConfigError: if the key is empty or not printable ASCII without spaces, the effort
            is not one of the above, `max_tokens` or `context_window` is below 1, or thinking
            is on and
            `max_tokens` is below 2,048 (no room for the smallest budget plus an answer).
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        max_tokens: int | None = None,
        reasoning_effort: str | None = None,
        context_window: int | None = None,
    ) -> None:
        options = AdapterOptions(
            api_key=api_key,
            base_url=base_url,
            timeout_seconds=timeout_seconds,
            max_tokens=max_tokens,
            reasoning_effort=reasoning_effort,
            context_window=context_window,
        ).checked(label="Anthropic", model=model)
        if reasoning_effort is not None and reasoning_effort not in REASONING_EFFORTS:
            raise ConfigError(
                f"unknown reasoning effort {reasoning_effort!r} for anthropic; use one of "
                f"{', '.join(REASONING_EFFORTS)}"
            )
        budget = THINKING_BUDGET_TOKENS.get(reasoning_effort or "off")
        if (
            budget is not None
            and max_tokens is not None
            and max_tokens < 2 * MIN_THINKING_BUDGET_TOKENS
        ):
            raise ConfigError(
                f"anthropic max_tokens {max_tokens} is too small for thinking (effort "
                f"{reasoning_effort!r}); set max_tokens >= {2 * MIN_THINKING_BUDGET_TOKENS} "
                "or reasoning effort 'off'"
            )
        # Deferred to here: the SDK takes about a second to import.
        import anthropic

        self.provider = "anthropic"
        self.model = model
        self.context_window = options.context_window
        self._base_url = options.base_url or DEFAULT_BASE_URL
        self._max_tokens = options.max_tokens
        self._budget = budget
        self._warned_temperature = False
        self._client = anthropic.AsyncAnthropic(
            api_key=options.api_key,
            base_url=self._base_url,
            max_retries=0,
            timeout=options.timeout_seconds,
        )
        self._stream_cls: type[anthropic.AsyncStream[object]] = anthropic.AsyncStream[object]
        self._encoder = self._new_encoder()
        self._redactor = SecretRedactor([options.api_key], base_url=self._base_url)

    def _new_encoder(self) -> MessagesEncoder:
        converter = MessageConverter(self.provider, self.model, ToolIdMap(ANTHROPIC_IDS))
        return MessagesEncoder(self.model, converter, self._options)

    async def aclose(self) -> None:
        """Close the underlying HTTP client and its connections."""
        await self._client.close()

    def payload(self, request: ModelRequest) -> JsonObject:
        """Build the Messages request body for `request` as a dict, for inspection.

        Converts the whole history on every call (no cache); `stream()` sends
        `encode_request(request)`, which encodes the same value.

        Args:
            request: the messages and options.

        Returns:
            `{model, max_tokens, system?, messages, tools?, tool_choice?, thinking?, temperature?,
            stream: true}`.

        Raises:
            LlmError: `UNSUPPORTED_CONTENT` if a message holds an image or has an unknown
                role; `UNSUPPORTED_OPTION` if the request's `max_tokens` leaves no room for
                thinking.
            WirePairingError: if the wire messages would break the pairing rule.
        """
        return self._new_encoder().body(request)

    def encode_request(self, request: ModelRequest) -> bytes:
        """Build the Messages request body for `request` as JSON bytes, reusing the prefix.

        Args:
            request: the messages and options.

        Returns:
            The compact UTF-8 JSON of `payload(request)`.

        Raises:
            LlmError: as `payload`.
            WirePairingError: as `payload`; nothing has been sent.
        """
        return self._encoder.encode(request)

    def _options(self, request: ModelRequest, *, thinking_allowed: bool) -> BodyOptions:
        explicit = request.max_tokens if request.max_tokens is not None else self._max_tokens
        budget = self._budget
        if budget is not None and not thinking_allowed:
            logger.warning(
                "anthropic request sent without thinking: the tool loop it continues began "
                "with an assistant message that has no thinking block (from another model)"
            )
            budget = None
        if budget is None:
            max_tokens = DEFAULT_MAX_TOKENS if explicit is None else explicit
            return BodyOptions(max_tokens, None, request.temperature)
        if explicit is None:
            max_tokens = DEFAULT_MAX_TOKENS + budget
        else:
            max_tokens = explicit
            budget = min(budget, explicit - MIN_THINKING_BUDGET_TOKENS)
            if budget < MIN_THINKING_BUDGET_TOKENS:
                raise LlmError(
                    f"max_tokens {explicit} is too small for anthropic thinking; set it to at "
                    f"least {2 * MIN_THINKING_BUDGET_TOKENS} or turn reasoning effort off",
                    code=UNSUPPORTED_OPTION,
                )
        if request.temperature is not None and not self._warned_temperature:
            self._warned_temperature = True
            logger.warning(
                "anthropic ignores temperature while thinking is on (the API rejects it)"
            )
        return BodyOptions(max_tokens, {"type": "enabled", "budget_tokens": budget}, None)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """Make one streaming Messages request and translate its events into chunks.

        Every failure passes the adapter's `SecretRedactor` on its way out: the API key and
        the base URL's credentials never appear in an error's text.

        Args:
            request: the messages and options to send.

        Yields:
            Chunks as the events arrive: block-start and deltas, block-end when the
            provider closes a block, then at `message_stop` `usage` and `finish` (with the
            replay envelope `{response, blocks}`).

        Raises:
            LlmError: on any HTTP, transport, timeout or protocol failure (raised `from` the
                SDK error): HTTP status codes by `code_for_status` (529 overloaded is
                `SERVER`), with `status`, `request_id` and Retry-After in ms; an
                `event: error` frame by its error type; `STREAM_CLOSED` if the stream ended
                before `message_stop`; `MALFORMED_RESPONSE` for a data line that is not
                JSON; `UNSUPPORTED_CONTENT` / `UNSUPPORTED_OPTION` before any request.
            WirePairingError: before any request, if the payload would break the pairing
                rule (a duraloop bug).
        """
        return redacted_stream(self._stream(request), self._redactor)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        body = self.encode_request(request)
        translator = EventTranslator(self.provider)
        with map_anthropic_errors(self.provider, self._base_url):
            response = await self._client.post(
                _PATH, cast_to=object, content=body, stream=True, stream_cls=self._stream_cls
            )
            async with response:
                async for event in response:
                    if not isinstance(event, Mapping):
                        raise LlmError(
                            f"{self.provider} sent an event that is not a JSON object",
                            code=MALFORMED_RESPONSE,
                        )
                    for out in translator.feed(event):
                        yield out
        for out in translator.close():
            yield out
