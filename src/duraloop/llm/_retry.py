"""The model-request retry policy: which failures retry, how often, and after what delay.

Pure policy (docs/providers.md#retry-policy, docs/loop.md#request-retries): the loop asks
`retry_delay_ms` after an in-band failure and records and executes the answer; nothing here waits or
logs. The retry counter lives in the log (`llm/retry` events), so the loop passes it in.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Final, Literal, TypeAlias

from ..errors import ConfigError, LlmError
from ..log.vocabulary import PAIRING_VIOLATION, RETRY_ALWAYS, RETRY_NORMAL

RetryMode: TypeAlias = Literal["normal", "always"]
NEVER_RETRIED_CODES: Final = frozenset({PAIRING_VIOLATION})
"""Codes no mode retries: the request itself is wrong (a pairing violation found before
sending is a duraloop bug), so sending it again would fail the same way, forever."""

DEFAULT_RETRYABLE_CODES: Final = LlmError.RETRYABLE_CODES
"""The codes the normal mode retries by default (docs/providers.md#error-codes): `EMPTY_RESPONSE`,
`RATE_LIMIT`, `SERVER`, `TIMEOUT`, `TRANSPORT`, spelled once, in `LlmError`."""

MAX_TIMER_MS: Final = 2**31 - 1
"""The longest delay a policy may name (dsh validates against Node's timer limit)."""


def _is_int(value: object) -> bool:
    return type(value) is int


@dataclass(frozen=True)
class RetryPolicy:
    """How the loop retries a failed model request within the same step.

    See docs/loop.md#request-retries.

    Args:
        mode: `"normal"` retries a failure whose code is in `retryable_codes` at most
            `max_retries` times per step; `"always"` retries every failure until success or
            cancellation (`max_retries` and `retryable_codes` are then ignored), except the
            codes in `NEVER_RETRIED_CODES` (a duraloop bug the same request would repeat).
        max_retries: retries after the first request, per step (normal mode). Default 5.
        retryable_codes: the failure codes normal mode retries. Default `EMPTY_RESPONSE`,
            `RATE_LIMIT`, `SERVER`, `TIMEOUT`, `TRANSPORT`.
        initial_delay_ms: the backoff before retry 1; doubled for each later retry.
            Default 500.
        max_delay_ms: the cap on every delay, and on a provider Retry-After that is honoured.
            Default 10000.
        jitter_ratio: each backoff is multiplied by a uniform factor in
            `[1 - jitter_ratio, 1 + jitter_ratio]`. Default 0.1.

    Raises:
        ConfigError: if a field is out of range; the message names the field as
            `loop.retry.<field>`.
    """

    mode: RetryMode = RETRY_NORMAL
    max_retries: int = 5
    retryable_codes: frozenset[str] = field(default=DEFAULT_RETRYABLE_CODES)
    initial_delay_ms: int = 500
    max_delay_ms: int = 10_000
    jitter_ratio: float = 0.1

    def __post_init__(self) -> None:
        """Validate every field and normalise the codes to a frozenset.

        See docs/providers.md#retry-policy.
        """
        if self.mode not in (RETRY_NORMAL, RETRY_ALWAYS):
            raise ConfigError(f"loop.retry.mode must be 'normal' or 'always', got {self.mode!r}")
        if not _is_int(self.max_retries) or self.max_retries < 0:
            raise ConfigError(
                f"loop.retry.max_retries must be an integer >= 0, got {self.max_retries!r}"
            )
        object.__setattr__(self, "retryable_codes", _codes(self.retryable_codes))
        for name in ("initial_delay_ms", "max_delay_ms"):
            value = getattr(self, name)
            if not _is_int(value) or not 1 <= value <= MAX_TIMER_MS:
                raise ConfigError(
                    f"loop.retry.{name} must be an integer in [1, {MAX_TIMER_MS}], got {value!r}"
                )
        if self.initial_delay_ms > self.max_delay_ms:
            raise ConfigError(
                "loop.retry.initial_delay_ms must be <= loop.retry.max_delay_ms "
                f"({self.max_delay_ms}), got {self.initial_delay_ms}"
            )
        jitter = self.jitter_ratio
        if type(jitter) not in (int, float) or not 0 <= jitter <= 1:
            raise ConfigError(f"loop.retry.jitter_ratio must be a number in [0, 1], got {jitter!r}")

    @property
    def policy_key(self) -> str:
        """The retry counter's key: dsh's canonical JSON array of every behaviour field.

        Normal mode: `["normal",maxRetries,[codes sorted],initialDelayMs,maxDelayMs,
        jitterRatio]`; always mode: `["always",initialDelayMs,maxDelayMs,jitterRatio]` (the
        fields it ignores are not part of its key), numbers written as JavaScript writes
        them, so a policy has the same key in duraloop and in dsh. Two policies share a
        counter (within one step) only when their keys are equal.
        """
        backoff = f"{self.initial_delay_ms},{self.max_delay_ms},{_js_number(self.jitter_ratio)}"
        mode = json.dumps(self.mode)
        if self.mode == RETRY_ALWAYS:
            return f"[{mode},{backoff}]"
        codes = json.dumps(sorted(self.retryable_codes), separators=(",", ":"))
        return f"[{mode},{self.max_retries},{codes},{backoff}]"

    def retry_delay_ms(
        self,
        failure: Mapping[str, object],
        *,
        retry: int,
        random: Callable[[], float],
    ) -> int | None:
        """Decide whether retry number `retry` may happen, and after how long.

        Normal mode refuses a code outside `retryable_codes`, a `retry` beyond
        `max_retries`, and a provider Retry-After above `max_delay_ms` (it never retries
        earlier than the provider asked). A positive Retry-After at or below the cap is used
        exactly, with no jitter. Otherwise the delay is the backoff
        `min(initial_delay_ms * 2**(retry - 1), max_delay_ms)` times a jitter factor, capped
        at `max_delay_ms` (always mode also falls back to it for a Retry-After above the cap).

        Args:
            failure: the failed attempt's `LlmFailure` JSON (`code`,
                `providerRetryAfterMs`?).
            retry: the 1-based number of the retry being considered.
            random: a source of uniform floats in `[0, 1)`, for the jitter.

        Returns:
            The delay in milliseconds, or None when the policy does not retry.
        """
        if failure.get("code") in NEVER_RETRIED_CODES:
            return None
        always = self.mode == RETRY_ALWAYS
        if not always and (
            failure.get("code") not in self.retryable_codes or retry > self.max_retries
        ):
            return None
        hint = failure.get("providerRetryAfterMs")
        if isinstance(hint, (int, float)) and not isinstance(hint, bool):
            if math.isfinite(hint) and 0 < hint <= self.max_delay_ms:
                return math.ceil(hint)
            if hint > self.max_delay_ms and not always:
                return None
        return self.backoff_ms(retry, random=random)

    def backoff_ms(self, retry: int, *, random: Callable[[], float]) -> int:
        """Return the local backoff before retry number `retry` (1-based), jitter included.

        Args:
            retry: the 1-based retry number.
            random: a source of uniform floats in `[0, 1)`.

        Returns:
            An integer delay in `[base * (1 - jitter_ratio), max_delay_ms]` milliseconds,
            where `base = min(initial_delay_ms * 2**(retry - 1), max_delay_ms)`.
        """
        exponent = min(max(retry, 1) - 1, 62)  # 2**62 * 1 ms is past any cap
        base = min(self.initial_delay_ms << exponent, self.max_delay_ms)
        factor = 1 - self.jitter_ratio + 2 * self.jitter_ratio * random()
        return min(round(base * factor), self.max_delay_ms)

    def to_json(self) -> dict[str, object]:
        """Return the policy as dsh's `retryPolicy` JSON (camelCase, codes sorted).

        Returns:
            `{mode, maxRetries, retryableCodes, backoff: {initialDelayMs, maxDelayMs,
            jitterRatio}}`.
        """
        return {
            "mode": self.mode,
            "maxRetries": self.max_retries,
            "retryableCodes": sorted(self.retryable_codes),
            "backoff": {
                "initialDelayMs": self.initial_delay_ms,
                "maxDelayMs": self.max_delay_ms,
                "jitterRatio": self.jitter_ratio,
            },
        }


def _js_number(value: float) -> str:
    """Write a finite number as JavaScript's `JSON.stringify` does (`0` for 0.0, `1e-7`)."""
    if float(value).is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(float(value))
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    power = int(exponent)
    if -7 < power < 21:  # JavaScript writes these in fixed notation
        return format(Decimal(text), "f")
    return f"{mantissa}e{'+' if power > 0 else '-'}{abs(power)}"


def _codes(codes: Iterable[str]) -> frozenset[str]:
    if isinstance(codes, str):
        raise ConfigError(
            f"loop.retry.retryable_codes must be a collection of codes, got {codes!r}"
        )
    listed = list(codes)
    if not listed:
        raise ConfigError(
            "loop.retry.retryable_codes must not be empty; use max_retries=0 to not retry"
        )
    for code in listed:
        if not isinstance(code, str) or not code:
            raise ConfigError(
                f"loop.retry.retryable_codes must hold non-empty strings, got {code!r}"
            )
    if len(set(listed)) != len(listed):
        duplicates = sorted({code for code in listed if listed.count(code) > 1})
        raise ConfigError(f"loop.retry.retryable_codes holds duplicates: {duplicates}")
    return frozenset(listed)
