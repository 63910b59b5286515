"""Compaction configuration: frozen, validated at construction (style rule D23).

The defaults are dsh's (compaction-spec case C1); the threshold and the retained tail scale
with the context window of the model a step calls (4.2 steps 3-4, case C2), which
`duraloop.llm.context_window_of` finds (`context_windows` first).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ..errors import ConfigError
from ..log import PrunerConfig

if TYPE_CHECKING:
    from ..llm import Model
    from ._summarizer import Summarizer

DEFAULT_RETAIN_RATIO: Final = 0.16
"""The share of the window kept verbatim when neither retain option is set (dsh's default)."""

_COUNTS: Final = (
    ("keep_turns", 0),
    ("max_tokens", 1),
    ("compaction_retries", 0),
    ("max_overflow_retries", 0),
)


@dataclass(frozen=True)
class CompactionConfig:
    """How a loop compacts a session that outgrows its model's context window.

    Args:
        auto: compact automatically: before a step whose estimated request reaches the
            threshold (pressure), and after a `CONTEXT_WINDOW_EXCEEDED` failure (then the
            step is retried). False leaves only manual compaction. Default True.
        threshold_ratio: the share of the context window the estimated request may reach
            before a step compacts; in (0, 1]. Default 0.8.
        retain_ratio: the share of the window kept verbatim at the tail of the surface; in
            (0, 1) and below `threshold_ratio`. None means 0.16 (`DEFAULT_RETAIN_RATIO`)
            unless `retain_tokens` is set.
        retain_tokens: the tail kept verbatim as an absolute number of tokens (>= 1),
            instead of `retain_ratio`; setting both is an error (case C3).
        keep_turns: the last N turns are never compacted, the open turn counting as one;
            0 (the default) applies only the token retention, as dsh does.
        max_tokens: the output cap of the summary request, in tokens (>= 1). Default 8192.
        compaction_retries: further summary attempts when one compaction leaves the
            request above the threshold (>= 0). Default 1.
        max_overflow_retries: how many times a step is compacted and retried after
            `CONTEXT_WINDOW_EXCEEDED` (>= 0); 0 disables that recovery. Default 1.
        summarizer_model: the model that writes summaries; None uses the loop's model.
        summarizer: writes the summaries instead of a model request (any
            `loop.Summarizer`: an async callable from `SummaryRequest` to `Summary`); None
            uses `ModelSummarizer(summarizer_model or the loop's model)`.
        pruner: the tool-result pruner's sizes (`duraloop.log.PrunerConfig`), run before a
            summary is asked for; None: no pruning. Default `PrunerConfig()`.
        context_windows: `provider:model` (e.g. `deepseek:deepseek-chat`) -> the context
            window in tokens, overriding the adapter's `context_window` and the built-in
            table of `duraloop.llm.context_window_of`.

    Raises:
        ConfigError: if a value has the wrong type or range, both retain options are set,
            or the retain ratio (given or default) is not below `threshold_ratio`; the
            message names the field as `compaction.<field>` (compaction-spec case C3).
    """

    auto: bool = True
    threshold_ratio: float = 0.8
    retain_ratio: float | None = None
    retain_tokens: int | None = None
    keep_turns: int = 0
    max_tokens: int = 8192
    compaction_retries: int = 1
    max_overflow_retries: int = 1
    summarizer_model: Model | None = None
    summarizer: Summarizer | None = None
    pruner: PrunerConfig | None = PrunerConfig()
    context_windows: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Validate every field (compaction-spec cases C1, C3)."""
        if type(self.auto) is not bool:
            raise ConfigError(f"compaction.auto must be true or false, got {self.auto!r}")
        threshold = self.threshold_ratio
        if not _ratio(threshold) or threshold > 1:
            raise ConfigError(
                f"compaction.threshold_ratio must be a number in (0, 1], got {threshold!r}"
            )
        retain = self.retain_ratio
        if retain is not None and (not _ratio(retain) or retain >= 1):
            raise ConfigError(f"compaction.retain_ratio must be a number in (0, 1), got {retain!r}")
        tokens = self.retain_tokens
        if tokens is not None and (type(tokens) is not int or tokens < 1):
            raise ConfigError(f"compaction.retain_tokens must be an integer >= 1, got {tokens!r}")
        if retain is not None and tokens is not None:
            raise ConfigError(
                "compaction.retain_ratio and compaction.retain_tokens are alternatives: set "
                f"one of them, not both (got {retain!r} and {tokens!r})"
            )
        if tokens is None:
            share = DEFAULT_RETAIN_RATIO if retain is None else retain
            if share >= threshold:
                given = "" if retain is not None else f" (the default {DEFAULT_RETAIN_RATIO})"
                raise ConfigError(
                    f"compaction.retain_ratio {share!r}{given} must be less than "
                    f"compaction.threshold_ratio {threshold!r}: the kept tail would already "
                    "reach the threshold; lower the retain ratio or raise the threshold"
                )
        for name, least in _COUNTS:
            value = getattr(self, name)
            if type(value) is not int or value < least:
                raise ConfigError(f"compaction.{name} must be an integer >= {least}, got {value!r}")
        model = self.summarizer_model
        if model is not None and not (
            isinstance(getattr(model, "provider", None), str)
            and isinstance(getattr(model, "model", None), str)
            and callable(getattr(model, "stream", None))
        ):
            raise ConfigError(
                "compaction.summarizer_model must be a model (with provider, model and "
                f"stream) or None, got {type(model).__name__}"
            )
        if self.pruner is not None and not isinstance(self.pruner, PrunerConfig):
            raise ConfigError(
                "compaction.pruner must be a PrunerConfig or None, got "
                f"{type(self.pruner).__name__}"
            )
        windows = self.context_windows
        if not isinstance(windows, Mapping):
            raise ConfigError(
                "compaction.context_windows must map `provider:model` to tokens, got "
                f"{type(windows).__name__}"
            )
        for key, window in windows.items():
            if not isinstance(key, str) or ":" not in key:
                raise ConfigError(
                    f'compaction.context_windows keys are "provider:model" (e.g. '
                    f'"deepseek:deepseek-chat"), got {key!r}'
                )
            if type(window) is not int or window < 1:
                raise ConfigError(
                    f"compaction.context_windows[{key!r}] must be an integer number of "
                    f"tokens >= 1, got {window!r}"
                )
        object.__setattr__(self, "context_windows", dict(windows))

    def threshold_tokens(self, window: int) -> int:
        """Return the pressure threshold for a context window: `floor(window * threshold_ratio)`.

        Args:
            window: the model's context window, in tokens (>= 1).

        Returns:
            The estimated request size, in tokens, at which a step compacts first
            (compaction-spec 4.2 step 4; case C2: window 1000 at 0.5 is 500).

        Raises:
            ConfigError: if `window` is not an integer >= 1.
        """
        return math.floor(_window(window) * self.threshold_ratio)

    def retain_tokens_for(self, window: int) -> int:
        """Return the tokens kept verbatim at the tail for a context window.

        `retain_tokens` when set, else `floor(window * retain_ratio)` (0.16 by default).

        Args:
            window: the model's context window, in tokens (>= 1).

        Returns:
            The tail size in tokens (compaction-spec 4.2 step 4; case C2: window 2000 at
            0.1 is 200).

        Raises:
            ConfigError: if `window` is not an integer >= 1, or the retained tail is not
                below `threshold_tokens(window)` (an absolute `retain_tokens` too large for
                a small window): compacting could never bring the request under the
                threshold.
        """
        threshold = self.threshold_tokens(window)
        if self.retain_tokens is not None:
            retain = self.retain_tokens
        else:
            share = DEFAULT_RETAIN_RATIO if self.retain_ratio is None else self.retain_ratio
            retain = math.floor(window * share)
        if retain >= threshold:
            raise ConfigError(
                f"compaction: the retained tail ({retain} tokens) must be less than the "
                f"threshold ({threshold} tokens) for a context window of {window} tokens; "
                "lower compaction.retain_tokens or raise compaction.threshold_ratio"
            )
        return retain


def _ratio(value: object) -> bool:
    """Whether `value` is a finite number > 0 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and value > 0


def _window(window: object) -> int:
    if type(window) is not int or window < 1:
        raise ConfigError(
            f"a context window must be an integer number of tokens >= 1, got {window!r}"
        )
    return window
