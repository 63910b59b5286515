"""The options every provider adapter takes, as one frozen type.

See docs/providers.md#adapter-guarantees.

`AdapterOptions` carries them inside duraloop: the three adapters' public constructors
(`OpenAIChatModel`, `DeepSeekChatModel`, `AnthropicMessagesModel`) take them as keywords,
for users, and turn them into one `AdapterOptions` checked once (`checked`); the model-spec
parser names the options a provider setting may set with `SETTING_OPTIONS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Final

from ..errors import ConfigError
from ._windows import checked_context_window

DEFAULT_TIMEOUT_SECONDS: Final = 600
"""The HTTP timeout when none is given, in seconds."""

SETTING_OPTIONS: Final = ("base_url", "max_tokens", "reasoning_effort", "timeout_seconds")
"""The options a provider's settings may set (every option but the key), in the order the
model-spec parser quotes them."""


@dataclass(frozen=True, slots=True)
class AdapterOptions:
    """The constructor options of a provider adapter.

    Args:
        api_key: the API key (left out of the repr).
        base_url: the API root; None for the provider's own.
        timeout_seconds: the HTTP timeout for connecting and for each read, in seconds.
        max_tokens: the default output cap when a request sets none; None for the
            adapter's default.
        reasoning_effort: the adapter's effort name, or None for its default; each
            adapter checks the names it knows.
        context_window: the model's context window in tokens, for compaction
            (`duraloop.llm.context_window_of`); None when the adapter does not know it.
    """

    api_key: str = field(repr=False)  # a secret: never in a repr or a log
    base_url: str | None = None
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    context_window: int | None = None

    def checked(self, *, label: str, model: str) -> AdapterOptions:
        """Check the options every adapter shares, and trim the key.

        Args:
            label: the provider's display name (`OpenAI`, `DeepSeek`, `Anthropic`), for messages.
            model: the model id.

        Returns:
            These options with surrounding whitespace removed from the key.

        Raises:
            ConfigError: if the key is not a string, is empty or is not printable ASCII
                without spaces (docs/providers.md#adapter-guarantees; the message never shows
                the key), the model id is empty, the timeout is not a positive finite number,
                or `max_tokens` or `context_window` is not an integer >= 1.
        """
        if not isinstance(self.api_key, str):
            raise ConfigError(
                f"the {label} API key (api_key=) is {type(self.api_key).__name__}, not a string; "
                "pass the key as a str (an unset environment variable gives None: set it)"
            )
        key = self.api_key.strip()
        if not key or not all("\x21" <= ch <= "\x7e" for ch in key):
            raise ConfigError(
                f"the {label} API key (api_key=) is empty or holds spaces or non-printable "
                "characters; a key is printable ASCII without spaces: copy it again from the "
                "provider's console"
            )
        if not model.strip():
            raise ConfigError(
                f"the {label} model id is empty; pass the model name, e.g. in `--model`"
            )
        timeout_seconds = self.timeout_seconds
        if type(timeout_seconds) not in (int, float) or not (
            math.isfinite(timeout_seconds) and timeout_seconds > 0
        ):
            raise ConfigError(f"timeout_seconds must be a number > 0, got {timeout_seconds!r}")
        max_tokens = self.max_tokens
        if max_tokens is not None and (type(max_tokens) is not int or max_tokens < 1):
            raise ConfigError(f"max_tokens must be an integer >= 1 or None, got {max_tokens!r}")
        checked_context_window(self.context_window, what=label)
        return self if key == self.api_key else replace(self, api_key=key)
