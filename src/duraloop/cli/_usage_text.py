"""The usage line under each turn's end in `run`, `chat` and `show` (docs/loop.md#budgets)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..log.vocabulary import TURN_END, TURN_START

if TYPE_CHECKING:
    from ..log import Event, Price, Usage, UsageFold

_MAX_NAME = 80  # characters of one unpriced model name shown
_MAX_NAMES = 3


def usage_text(usage: Usage, *, priced: bool) -> str:
    """Return one line of a turn's spending: requests, tokens, tool calls, and cost if priced.

    Args:
        usage: what the turn spent.
        priced: whether a price table is configured (without one no cost is shown).

    Returns:
        E.g. `3 model requests · 1,234 tokens (in 1,000, out 234) · 4 tool calls · cost
        0.0012`; `estimated` is said when some tokens are, and a cost with models that have
        no price reads `cost unknown (no price for M)` (or `cost 0.1 + unknown (...)`).
    """
    parts = [
        f"{usage.requests:,} model request{'s' if usage.requests != 1 else ''}",
        f"{usage.tokens:,} tokens (in {usage.input_tokens:,}, out {usage.output_tokens:,}"
        + (", estimated)" if usage.estimated else ")"),
        f"{usage.tool_calls:,} tool call{'s' if usage.tool_calls != 1 else ''}",
    ]
    if priced:
        cost = f"cost {usage.cost:.6g}"
        if usage.unpriced:  # model names come from the log: bounded here, escaped by the caller
            names = ", ".join(name[:_MAX_NAME] for name in usage.unpriced[:_MAX_NAMES])
            more = len(usage.unpriced) - _MAX_NAMES
            known = f"{usage.cost:.6g} + " if usage.cost else ""
            cost = f"cost {known}unknown (no price for {names}"
            cost += f" and {more} more)" if more > 0 else ")"
        parts.append(cost)
    return " · ".join(parts)


class TurnUsageLines:
    """Folds each turn's events as a transcript prints them; says the usage at its end.

    Args:
        prices: the config file's price table (empty: no cost shown).
    """

    def __init__(self, prices: Mapping[str, Price]) -> None:
        self._prices = prices
        self._fold: UsageFold | None = None

    def feed(self, event: Event) -> str | None:
        """Count `event`; return the turn's usage line when it is the turn's `turn/end`."""
        from ..log import UsageFold  # loaded with the first event: `--help` never needs it

        if event.type == TURN_START:
            self._fold = UsageFold(self._prices)
        fold = self._fold
        if fold is None:
            return None
        usage = fold.feed((event,))
        if event.type != TURN_END:
            return None
        self._fold = None
        return usage_text(usage, priced=bool(self._prices))
