"""Context windows: how many tokens one request to a model may hold.

Automatic compaction needs the window of the model a step calls (compaction-spec 4.2 step 3:
without one, pressure compaction cannot run, case C5). `context_window_of` looks it up, first
found wins:

1. the caller's table, `provider:model` -> tokens (`CompactionConfig.context_windows`, which
   `[context_windows]` in `config.toml` fills);
2. the model object's own `context_window` attribute (the built-in adapters take it as a
   constructor argument; `ScriptedModel` has it settable);
3. a small built-in table of well-known models (`_BUILT_IN`), by route and model id;
4. else None: the window is unknown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from ..errors import ConfigError

if TYPE_CHECKING:
    from ._model import Model

_BUILT_IN: Final[tuple[tuple[str, str, int], ...]] = (
    # (route, model id or prefix ending in "*", window in tokens), the providers' published
    # figures. Deliberately small: `[context_windows]` in config.toml (or
    # CompactionConfig.context_windows, or an adapter's context_window=) overrides it and
    # covers every other model. Exact ids come before the prefix that would also match them.
    ("deepseek", "deepseek-chat", 131072),  # 128K (DeepSeek API docs, Models & Pricing)
    ("deepseek", "deepseek-reasoner", 131072),
    ("openai", "gpt-4o*", 128000),  # gpt-4o, gpt-4o-mini and their dated snapshots
    ("openai", "gpt-4.1*", 1047576),  # gpt-4.1, -mini, -nano
    ("openai", "gpt-5-chat-latest", 128000),
    ("openai", "gpt-5*", 400000),  # gpt-5, -mini, -nano, gpt-5.1 ...
    ("anthropic", "claude-*", 200000),  # without the 1M-context beta header
)


def context_window_of(model: Model, windows: Mapping[str, int] | None = None) -> int | None:
    """Return the context window of `model`, in tokens, or None when it is unknown.

    The lookup order is the module's: `windows[f"{provider}:{model}"]`, then the model's
    `context_window` attribute (when set, not None), then the built-in table of well-known
    models (DeepSeek `deepseek-chat` / `deepseek-reasoner`, OpenAI `gpt-4o*`, `gpt-4.1*`,
    `gpt-5*`, Anthropic `claude-*`), else None.

    Args:
        model: the model a request goes to (its `provider` route and `model` id).
        windows: `provider:model` (e.g. `deepseek:deepseek-chat`, the key of
            `LoopConfig.prices`) -> tokens; None or empty for none.

    Returns:
        The window in tokens (>= 1), or None if no source knows it (automatic compaction
        then cannot measure pressure: compaction-spec case C5).

    Raises:
        ConfigError: if the entry in `windows` or the model's `context_window` is not an
            integer >= 1; the message names the model.
    """
    key = f"{model.provider}:{model.model}"
    if windows and key in windows:
        return _checked(windows[key], f"the context window of {key} (context_windows)")
    own = getattr(model, "context_window", None)
    if own is not None:
        return _checked(own, f"the context_window of model {key}")
    for route, pattern, tokens in _BUILT_IN:
        if route != model.provider:
            continue
        if pattern.endswith("*"):
            if model.model.startswith(pattern[:-1]):
                return tokens
        elif model.model == pattern:
            return tokens
    return None


def checked_context_window(value: object, *, what: str) -> int | None:
    """Check an adapter's `context_window=` argument: None, or an integer >= 1.

    Args:
        value: the argument.
        what: the adapter's name, for the message (e.g. `DeepSeek`).

    Returns:
        The value.

    Raises:
        ConfigError: if it is neither None nor an integer >= 1 (a bool is not an integer).
    """
    return None if value is None else _checked(value, f"the {what} context_window")


def _checked(value: object, what: str) -> int:
    if type(value) is not int or value < 1:
        raise ConfigError(f"{what} must be an integer number of tokens >= 1, got {value!r}")
    return value
