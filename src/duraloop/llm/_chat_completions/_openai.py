"""The OpenAI Chat Completions adapter (OpenAI, and servers that speak its dialect).

Built on the shared Chat Completions transport (`_transport`: the official `openai`
SDK's client with retries off, raw SSE read, exact error mapping) and the shared request
encoder (`_request`). What is OpenAI's own:

- `reasoning_effort` is OpenAI's native body parameter; the accepted values are those the
  Chat Completions reference lists: `none`, `minimal`, `low`, `medium`, `high`, `xhigh`,
  `max` (openai-python `CompletionCreateParams.reasoning_effort`; not every model accepts
  every value, and the API says so with a 400).
- The output cap is sent as `max_completion_tokens`: OpenAI deprecated `max_tokens` and
  rejects it for reasoning models (same reference).
- Assistant reasoning is never sent back: Chat Completions has no field for it (reasoning
  blocks from another provider's history are left out, docs/providers.md#chat-completions-wire).
"""

from __future__ import annotations

from functools import partial
from typing import Final

from ...errors import ConfigError
from .._options import DEFAULT_TIMEOUT_SECONDS, AdapterOptions
from ._request import body_options
from ._transport import ChatCompletionsModel

OPENAI_BASE_URL: Final = "https://api.openai.com/v1"
OPENAI_EFFORTS: Final = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
"""The `reasoning_effort` values of the Chat Completions API reference."""


class OpenAIChatModel(ChatCompletionsModel):
    """A model behind the OpenAI Chat Completions API (or a server speaking its dialect).

    Constructing one imports the `openai` SDK (importing duraloop does not).

    Args:
        model: the model id, sent verbatim (e.g. `gpt-4.1`).
        api_key: the API key (surrounding whitespace is trimmed).
        base_url: the API root; None for `https://api.openai.com/v1` (the SDK's own
            `OPENAI_BASE_URL` lookup is bypassed: settings come from the caller).
        timeout_seconds: the HTTP timeout for connecting and for each read, in seconds.
        max_tokens: the output cap (`max_completion_tokens`) when a request sets none;
            None sends no cap. A request's own `max_tokens` wins.
        reasoning_effort: OpenAI's `reasoning_effort` (one of `OPENAI_EFFORTS`), or None
            to send none (the model's default).
        context_window: the model's context window in tokens, for automatic compaction
            (read by `duraloop.llm.context_window_of`; `[context_windows]` in config.toml
            wins over it); None leaves it to the built-in table of well-known models.

    Raises:
        ConfigError: if the key is empty or not printable ASCII without spaces, the model
            id is empty, the timeout, `max_tokens` or `context_window` is out of range, or
            the effort is not one of `OPENAI_EFFORTS`.
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
        ).checked(label="OpenAI", model=model)
        if reasoning_effort is not None and reasoning_effort not in OPENAI_EFFORTS:
            raise ConfigError(
                f"unknown OpenAI reasoning effort {reasoning_effort!r}; use one of "
                f"{', '.join(OPENAI_EFFORTS)} (or none, for the model's default)"
            )
        extra = {} if reasoning_effort is None else {"reasoning_effort": reasoning_effort}
        self.reasoning_effort = reasoning_effort
        super().__init__(
            model,
            provider="openai",
            label="OpenAI",
            options=options,
            default_base_url=OPENAI_BASE_URL,
            echo="never",
            body_options=partial(
                body_options,
                extra=extra,
                max_tokens_field="max_completion_tokens",
                default_max_tokens=options.max_tokens,
            ),
        )
