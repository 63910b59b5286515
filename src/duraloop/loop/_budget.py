"""Budgets: hard limits on what a turn and a session may spend (docs/loop.md#budgets).

A budget is checked before each step starts, never mid-step: a step that starts may take
its turn past a limit, and the next step then does not start. Reaching a turn budget ends
the turn `blocked`, with a message naming the budget and the figures; reaching a session
budget does the same, and afterwards no turn of the session starts
(`BudgetExceededError`) until the budget is raised. What is spent is folded from the log
(`log.UsageFold`), so a session budget holds across a resume.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from ..errors import ConfigError
from ..llm import Model
from ..log import Price, Session, Usage, UsageFold
from ._snapshot import restored_fold

logger = logging.getLogger(__name__)

Scope = Literal["turn", "session"]

_FLAGS: Final = {
    "requests": "--max-requests-per-{scope}",
    "tokens": "--max-tokens-per-{scope}",
    "tool_calls": "--max-tool-calls-per-{scope}",
    "cost": "--max-cost-per-{scope}",
}


@dataclass(frozen=True)
class Budget:
    """Limits on a turn's or a session's spending; None means no limit.

    Args:
        requests: model requests (steps plus retries).
        tokens: input plus output tokens, as the provider reports them (an estimate only
            for a response without usage).
        tool_calls: tool bodies started.
        cost: the priced usage, in the currency of `LoopConfig.prices`; needs a price for
            the loop's model.

    Raises:
        ConfigError: if a count is not an integer >= 1 or the cost not a number > 0.
    """

    requests: int | None = None
    tokens: int | None = None
    tool_calls: int | None = None
    cost: float | None = None

    def __post_init__(self) -> None:
        """Validate the limits."""
        for name in ("requests", "tokens", "tool_calls"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < 1):
                raise ConfigError(f"budget {name} must be an integer >= 1 or None, got {value!r}")
        cost = self.cost
        if cost is not None and (
            type(cost) not in (int, float) or not math.isfinite(cost) or cost <= 0
        ):
            raise ConfigError(f"budget cost must be a number > 0 or None, got {cost!r}")

    @property
    def limited(self) -> bool:
        """Whether any limit is set."""
        return any(
            value is not None for value in (self.requests, self.tokens, self.tool_calls, self.cost)
        )

    def reached(self, usage: Usage, scope: Scope) -> str | None:
        """Return why `usage` reached this budget, or None if every limit still has room.

        Args:
            usage: what the turn or the session spent so far.
            scope: which budget this is, for the message.

        Returns:
            One sentence naming the first limit reached (in the order requests, tokens, tool
            calls, cost), the figures, and how to raise it; None when none is reached.
        """
        if self.requests is not None and usage.requests >= self.requests:
            spent = _counted(usage.requests, "model request")
            return _spent(scope, "requests", spent, self.requests)
        if self.tokens is not None and usage.tokens >= self.tokens:
            estimated = ", partly estimated" if usage.estimated else ""
            spent = (
                f"{usage.tokens:,} tokens (input {usage.input_tokens:,}, output "
                f"{usage.output_tokens:,}{estimated})"
            )
            return _spent(scope, "tokens", spent, self.tokens)
        if self.tool_calls is not None and usage.tool_calls >= self.tool_calls:
            spent = _counted(usage.tool_calls, "tool call")
            return _spent(scope, "tool_calls", spent, self.tool_calls)
        if self.cost is not None and usage.cost >= self.cost:
            return _spent(scope, "cost", f"{usage.cost:.6g}", self.cost)
        return None


def _counted(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _spent(scope: Scope, name: str, spent: str, limit: float) -> str:
    flag = _FLAGS[name].format(scope=scope)
    unit = name.replace("_", " ")
    if name == "cost":
        limit_text = f"{limit:.6g} in"
    else:
        limit_text = f"{int(limit):,}"
        unit = unit.removesuffix("s") if limit == 1 else unit
    then = (
        "no turn of this session starts until it is raised"
        if scope == "session"
        else "run another turn to continue"
    )
    return (
        f"the {scope} budget of {limit_text} {unit} is reached: {spent} "
        f"spent; {then} (LoopConfig.{scope}_budget, {flag})"
    )


class BudgetConfig(Protocol):
    """The budget options of a `LoopConfig` (which satisfies this)."""

    @property
    def turn_budget(self) -> Budget | None:
        """See `LoopConfig.turn_budget`."""

    @property
    def session_budget(self) -> Budget | None:
        """See `LoopConfig.session_budget`."""

    @property
    def prices(self) -> Mapping[str, Price]:
        """See `LoopConfig.prices`."""


def model_key(model: Model) -> str:
    """Return the price-table key of `model`: `provider:model` (e.g. `deepseek:deepseek-chat`)."""
    return f"{model.provider}:{model.model}"


def check_priced(budgets: tuple[Budget | None, ...], prices: Mapping[str, Price], key: str) -> None:
    """Refuse a cost budget the loop's model has no price for.

    Raises:
        ConfigError: if a budget limits cost and `prices` has no entry `key`.
    """
    if any(budget is not None and budget.cost is not None for budget in budgets) and (
        key not in prices
    ):
        raise ConfigError(
            f"a cost budget needs the price of {key}: add it to LoopConfig.prices, or "
            f'[prices."{key}"] input_per_mtok = ... and output_per_mtok = ... to config.toml'
        )


class SessionUsage:
    """A session's usage, folded from its log when first asked for and kept up as it grows.

    A session restored from a snapshot starts from the snapshot's fold and reads only the
    events after it (docs/store.md#snapshots).

    Args:
        prices: the price table.
        model: the loop model's `provider:model`.
    """

    def __init__(self, prices: Mapping[str, Price], model: str) -> None:
        self._prices = prices
        self._model = model
        self._fold: UsageFold | None = None
        self._fed = 0

    @classmethod
    def of_loop(cls, config: BudgetConfig, model: Model) -> SessionUsage:
        """Return the usage of a loop over `model` with `config`'s budgets and prices.

        Raises:
            ConfigError: if a budget limits cost and `config.prices` has no price for `model`.
        """
        key = model_key(model)
        check_priced((config.turn_budget, config.session_budget), config.prices, key)
        return cls(config.prices, key)

    def of(self, session: Session) -> Usage:
        """Return what `session` spent up to its last event."""
        return self._up_to_date(session).usage

    def state(self, session: Session) -> dict[str, Any]:
        """Return the fold's state for a snapshot (between turns)."""
        return self._up_to_date(session).to_json()

    def _up_to_date(self, session: Session) -> UsageFold:
        fold = self._fold
        if fold is None:
            fold, self._fed = self._start(session)
            self._fold = fold
        events = session.events
        if len(events) > self._fed:
            fold.feed(events[self._fed :])
            self._fed = len(events)
        return fold

    def _start(self, session: Session) -> tuple[UsageFold, int]:
        restored = restored_fold(session)
        stored = None if restored is None else restored[1].usage
        if restored is not None and stored is not None:
            checkpoint = restored[0]
            try:
                fold = UsageFold.from_json(stored, self._prices, model=self._model)
                return fold, checkpoint.count
            except ValueError as exc:
                logger.warning(
                    "session %s: the snapshot's usage is unusable (%s); folding the whole log",
                    session.id,
                    exc,
                )
        return UsageFold(self._prices, model=self._model), 0
