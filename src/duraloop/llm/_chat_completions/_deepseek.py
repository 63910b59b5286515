"""The DeepSeek adapter: DeepSeek's Chat Completions dialect.

See docs/providers.md#deepseek, #deepseek-thinking-mode, #adapters.

Built on the shared Chat Completions transport (`_transport`: the official `openai`
SDK's client with retries off, a spec-strict SSE read that sees `[DONE]`, exact error
mapping) and the shared request encoder (`_request`). What is DeepSeek's own:

- Thinking and effort (docs/providers.md#deepseek; DeepSeek's "Thinking Mode" guide):
  effort `off` sends `thinking: {type: disabled}` and no `reasoning_effort`; `low`,
  `high` and `max` send `thinking: {type: enabled}` and `reasoning_effort` with the same
  string; None sends neither (the provider default: thinking on, effort `high`).
- Reasoning echo (docs/providers.md#deepseek-thinking-mode, #deepseek): every assistant message that
  had reasoning sends it back as `reasoning_content`, byte-exact (one reasoning block per response,
  joined as streamed). When thinking may be on (any effort but `off`), an assistant message without
  reasoning (a history from another provider, or an interrupted turn) sends `reasoning_content: ""`:
  DeepSeek answers a missing field on a tool-call turn in thinking mode with HTTP 400 "The
  reasoning_content in the thinking mode must be passed back to the API", and pi-ai's DeepSeek
  compat does the same (docs/providers.md#chat-completions-wire,
  `requiresReasoningContentOnAssistantMessages`). This is one deliberate addition to
  docs/providers.md#deepseek, which leaves the field absent.
- Assistant `content` is always a string (`""` without text, never null: "content or
  tool_calls must be set"); an empty tool result is sent as `(no output)`.
- A request whose `purpose` is `compaction` (a summary request) carries the header
  `x-deepseek-harness-compact: 1`, as dsh's DeepSeek adapter sends it (compaction-spec 8).
- The output cap is `max_tokens`; errors add `x-deepseek-request-id` as a request id
  fallback, and a 402 "Insufficient Balance" maps to `QUOTA` through its text (2.1).
"""

from __future__ import annotations

from functools import partial
from typing import Final

from ...errors import ConfigError
from ...log import JsonObject
from .._model import COMPACTION_PURPOSE, ModelRequest
from .._options import DEFAULT_TIMEOUT_SECONDS, AdapterOptions
from ._request import ReasoningEcho, body_options
from ._transport import ChatCompletionsModel

DEEPSEEK_BASE_URL: Final = "https://api.deepseek.com"
DEEPSEEK_EFFORTS: Final = ("off", "low", "high", "max")
"""The reasoning efforts of docs/providers.md#deepseek; `off` disables thinking."""
COMPACT_HEADER: Final = "x-deepseek-harness-compact"
"""The header marking a summary request (`purpose` `compaction`), valued `1`."""


def _purpose_headers(request: ModelRequest) -> dict[str, str]:
    return {COMPACT_HEADER: "1"} if request.purpose == COMPACTION_PURPOSE else {}


class DeepSeekChatModel(ChatCompletionsModel):
    """A model behind DeepSeek's Chat Completions API.

    Constructing one imports the `openai` SDK (importing duraloop does not).

    Args:
        model: the model id, sent verbatim (e.g. `deepseek-v4-pro`, `deepseek-chat`).
        api_key: the API key (surrounding whitespace is trimmed).
        base_url: the API root; None for `https://api.deepseek.com`.
        timeout_seconds: the HTTP timeout for connecting and for each read, in seconds.
        max_tokens: the output cap (`max_tokens`) when a request sets none; None sends no
            cap (the provider default). A request's own `max_tokens` wins.
        reasoning_effort: one of `off`, `low`, `high`, `max`, or None for the provider
            default (thinking on, effort `high`).
        context_window: the model's context window in tokens, for automatic compaction
            (read by `duraloop.llm.context_window_of`; `[context_windows]` in config.toml
            wins over it); None leaves it to the built-in table of well-known models.

    Raises:
        ConfigError: if the key is empty or not printable ASCII without spaces, the model
            id is empty, the timeout, `max_tokens` or `context_window` is out of range, or
            the effort is not one of `DEEPSEEK_EFFORTS`.
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
        ).checked(label="DeepSeek", model=model)
        extra: JsonObject
        echo: ReasoningEcho = "always"
        if reasoning_effort is None:
            extra = {}
        elif reasoning_effort == "off":
            extra, echo = {"thinking": {"type": "disabled"}}, "present"
        elif reasoning_effort in DEEPSEEK_EFFORTS:
            extra = {"thinking": {"type": "enabled"}, "reasoning_effort": reasoning_effort}
        else:
            raise ConfigError(
                f"unknown DeepSeek reasoning effort {reasoning_effort!r}; use one of "
                f"{', '.join(DEEPSEEK_EFFORTS)} (or none, for the provider default)"
            )
        self.reasoning_effort = reasoning_effort
        super().__init__(
            model,
            provider="deepseek",
            label="DeepSeek",
            options=options,
            default_base_url=DEEPSEEK_BASE_URL,
            echo=echo,
            request_headers=_purpose_headers,
            body_options=partial(
                body_options,
                extra=extra,
                max_tokens_field="max_tokens",
                default_max_tokens=options.max_tokens,
            ),
        )
