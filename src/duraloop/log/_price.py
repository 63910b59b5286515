"""What a model's tokens cost: `Price`, per million tokens (docs/loop.md#budgets)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_PER_TOKEN = 1e-6  # prices are per million tokens


@dataclass(frozen=True)
class Price:
    """What one model's tokens cost, per million tokens (in any one currency you choose).

    Args:
        input_per_mtok: uncached input.
        output_per_mtok: output (reasoning included).
        cache_read_per_mtok: input read from the provider's cache; None: the input price.
        cache_write_per_mtok: input written to the provider's cache; None: the input price.

    Raises:
        ValueError: if a price is not a finite number >= 0.
    """

    input_per_mtok: float
    output_per_mtok: float
    cache_read_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None

    def __post_init__(self) -> None:
        """Refuse a negative, infinite or non-numeric price."""
        for name in ("input_per_mtok", "output_per_mtok", "cache_read_per_mtok"):
            _check_price(name, getattr(self, name), optional=name.startswith("cache"))
        _check_price("cache_write_per_mtok", self.cache_write_per_mtok, optional=True)

    def cost(self, usage: Mapping[str, Any]) -> float:
        """Return the cost of one `TokenUsage` JSON object (`{inputTokens, outputTokens, ...}`)."""
        read = self.cache_read_per_mtok
        write = self.cache_write_per_mtok
        return _PER_TOKEN * (
            usage_count(usage, "inputTokens") * self.input_per_mtok
            + usage_count(usage, "outputTokens") * self.output_per_mtok
            + usage_count(usage, "cacheReadTokens")
            * (self.input_per_mtok if read is None else read)
            + usage_count(usage, "cacheWriteTokens")
            * (self.input_per_mtok if write is None else write)
        )


def _check_price(name: str, value: object, *, optional: bool) -> None:
    if value is None and optional:
        return
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"price {name} must be a finite number >= 0, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"price {name} must be a finite number >= 0, got {value!r}")


def usage_count(usage: Mapping[str, Any], key: str) -> int:
    """Return a `TokenUsage` JSON count (`inputTokens`, ...), 0 when absent or not an int > 0."""
    value = usage.get(key)
    return value if type(value) is int and value > 0 else 0
