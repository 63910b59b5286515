"""Constructor option checks shared by every provider adapter (llm-spec 1.11)."""

from __future__ import annotations

import math

from ..errors import ConfigError


def validate_adapter_options(
    *, label: str, api_key: str, model: str, timeout_seconds: float, max_tokens: int | None
) -> str:
    """Check the constructor options every provider adapter shares.

    Args:
        label: the provider's display name (`OpenAI`, `DeepSeek`, `Anthropic`), for messages.
        api_key: the key as given.
        model: the model id.
        timeout_seconds: the HTTP timeout, in seconds.
        max_tokens: the default output cap, or None.

    Returns:
        The key with surrounding whitespace removed.

    Raises:
        ConfigError: if the key is empty or not printable ASCII without spaces (llm-spec
            1.11; the message never shows the key), the model id is empty, the timeout is
            not a positive finite number, or `max_tokens` is not an integer >= 1.
    """
    key = api_key.strip()
    if not key or not all("\x21" <= ch <= "\x7e" for ch in key):
        raise ConfigError(
            f"the {label} API key (api_key=) is empty or holds spaces or non-printable "
            "characters; a key is printable ASCII without spaces: copy it again from the "
            "provider's console"
        )
    if not model.strip():
        raise ConfigError(f"the {label} model id is empty; pass the model name, e.g. in `--model`")
    if type(timeout_seconds) not in (int, float) or not (
        math.isfinite(timeout_seconds) and timeout_seconds > 0
    ):
        raise ConfigError(f"timeout_seconds must be a number > 0, got {timeout_seconds!r}")
    if max_tokens is not None and (type(max_tokens) is not int or max_tokens < 1):
        raise ConfigError(f"max_tokens must be an integer >= 1 or None, got {max_tokens!r}")
    return key
