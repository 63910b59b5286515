"""What a session spent: model requests, tokens, tool calls and cost, folded from its log.

See docs/loop.md#budgets.

Everything is read from events, so a resumed session, `duraloop show` and a live turn agree:

- a **model request** is a `step/start` (the step's first request), an `llm/retry` (each
  retry sends another) or a compaction's summarization request (a `compaction/summary` with
  `llmStreamCall: true` or a `usage`; its `usage` is priced with its own `provider:model`);
- a **tool call** is a `tool/call` (a body that started);
- **tokens** are the provider's usage: each `assistant/chunk` of type `usage` (failed
  attempts included: they were billed), or an `assistant/message`'s `usage` when no usage
  chunk came before it in its step. Input counts the billed input (`inputTokens +
  cacheReadTokens + cacheWriteTokens`; `reasoningTokens` is already in `outputTokens`,
  llm-spec 1.7). A successful `assistant/message` with no usage at all is **estimated**: its
  output at 4 characters a token, its input as the whole history's text before it at 4
  characters a token, and the total is marked `estimated`;
- **cost** prices each usage with the `Price` of the model that produced it
  (`provider:model` of the step's `assistant/message`, e.g. `deepseek:deepseek-chat`); a
  model without a price is listed in `unpriced` and adds nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ._event import Event
from ._price import Price, usage_count
from .vocabulary import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    COMPACTION_SUMMARY,
    LLM_RETRY,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    USAGE,
    USER_MESSAGE,
)

CHARS_PER_TOKEN = 4
"""The estimate's rate, when a provider reports no usage."""


@dataclass(frozen=True)
class Usage:
    """What a turn or a session spent.

    Args:
        requests: model requests sent (steps plus retries).
        input_tokens: billed input tokens (uncached + cache read + cache write).
        output_tokens: output tokens (reasoning included).
        tool_calls: tool bodies started (`tool/call` events).
        cost: the priced usage, in the price table's currency (0 without prices).
        estimated: whether some tokens are estimates (a response without usage).
        unpriced: the `provider:model` keys that produced tokens but have no price.
    """

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0
    cost: float = 0.0
    estimated: bool = False
    unpriced: tuple[str, ...] = field(default=())

    @property
    def tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def to_json(self) -> dict[str, Any]:
        """Return the usage as JSON.

        Returns:
            `{"requests", "inputTokens", "outputTokens", "toolCalls", "cost", "estimated",
            "unpriced"}`.
        """
        return {
            "requests": self.requests,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "toolCalls": self.tool_calls,
            "cost": self.cost,
            "estimated": self.estimated,
            "unpriced": list(self.unpriced),
        }


_UNKNOWN_MODEL: Final = "unknown"
"""The model key of usage no `assistant/message` named (a failed attempt, with no model given)."""


class UsageFold:
    """Adds up the `Usage` of a log's events, fed in order (see the module docstring).

    It keeps raw token counts per model and prices them when asked, so the same fold read
    with other prices (a changed price table) gives their cost.

    Args:
        prices: `provider:model` -> `Price`; models missing from it are `unpriced`.
        model: the `provider:model` to price a failed attempt's usage with before any
            `assistant/message` names one (the loop's model); None: `unknown`.
    """

    def __init__(self, prices: Mapping[str, Price] | None = None, *, model: str | None = None):
        self.prices: dict[str, Price] = dict(prices or {})
        self._model = model
        self._requests = 0
        self._tool_calls = 0
        self._estimated = False
        self._tokens: dict[str, list[int]] = {}  # model -> [input, output, cache read, write]
        self._pending: list[Mapping[str, Any]] = []  # this step's usage, not yet attributed
        self._history_chars: int | None = None  # counted from the first estimate on
        self._seen: list[Event] = []  # message events before the first estimate

    @property
    def usage(self) -> Usage:
        """The usage so far; this step's usage not yet attributed counts with the last model."""
        tokens = self._tokens
        if self._pending:
            tokens = {model: list(counts) for model, counts in tokens.items()}
            _attribute(tokens, self._model or _UNKNOWN_MODEL, self._pending)
        input_tokens = output_tokens = 0
        cost = 0.0
        unpriced: list[str] = []
        for model, (uncached, output, read, write) in tokens.items():
            input_tokens += uncached + read + write
            output_tokens += output
            price = self.prices.get(model)
            if price is not None:
                cost += price.cost(
                    {
                        "inputTokens": uncached,
                        "outputTokens": output,
                        "cacheReadTokens": read,
                        "cacheWriteTokens": write,
                    }
                )
            elif uncached or output or read or write:
                unpriced.append(model)
        return Usage(
            requests=self._requests,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            tool_calls=self._tool_calls,
            cost=cost,
            estimated=self._estimated,
            unpriced=tuple(unpriced),
        )

    def feed(self, events: Iterable[Event]) -> Usage:
        """Count `events` (in log order, after those fed before) and return the usage so far."""
        for event in events:
            kind = event.type
            if kind == ASSISTANT_CHUNK:
                chunk = event.data.get("chunk")
                if isinstance(chunk, dict) and chunk.get("type") == USAGE:
                    reported = chunk.get(USAGE)
                    if isinstance(reported, dict):
                        self._pending.append(reported)
            elif kind == STEP_START or kind == LLM_RETRY:
                self._requests += 1
            elif kind == TOOL_CALL:
                self._tool_calls += 1
            elif kind == ASSISTANT_MESSAGE:
                self._message(event)
            elif kind == STEP_END:
                self._settle()
            elif kind == COMPACTION_SUMMARY:
                self._summary(event.data)
            elif kind == USER_MESSAGE or kind == TOOL_RESULT:
                if self._history_chars is None:
                    self._seen.append(event)
                else:
                    self._history_chars += _message_chars(event)
        return self.usage

    def to_json(self) -> dict[str, Any]:
        """Return the fold's state as JSON, between steps (a snapshot stores it).

        Raises:
            ValueError: if a step's usage is still unattributed (inside a step).
        """
        if self._pending:
            raise ValueError("a usage fold is stored only between steps")
        if self._history_chars is None:
            chars = sum(_message_chars(seen) for seen in self._seen)
        else:
            chars = self._history_chars
        return {
            "requests": self._requests,
            "toolCalls": self._tool_calls,
            "estimated": self._estimated,
            "tokens": {model: list(counts) for model, counts in self._tokens.items()},
            "model": self._model,
            "historyChars": chars,
        }

    @classmethod
    def from_json(
        cls,
        data: Mapping[str, Any],
        prices: Mapping[str, Price] | None = None,
        *,
        model: str | None = None,
    ) -> UsageFold:
        """Return a fold that goes on from the state `to_json` wrote.

        Args:
            data: the state.
            prices: see `UsageFold`.
            model: see `UsageFold`; used only when the state names no model yet.

        Raises:
            ValueError: if the state is not one `to_json` writes.
        """
        fold = cls(prices)
        try:
            fold._requests = _non_negative(data["requests"])
            fold._tool_calls = _non_negative(data["toolCalls"])
            fold._estimated = data["estimated"] is True
            fold._history_chars = _non_negative(data["historyChars"])
            stored = data["model"]
            fold._model = stored if isinstance(stored, str) else model
            tokens = data["tokens"]
            for model_key, counts in tokens.items():
                if len(counts) != 4:
                    raise ValueError(f"token counts of {model_key!r} are not 4 numbers")
                fold._tokens[str(model_key)] = [_non_negative(count) for count in counts]
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a usage fold: {exc!r}") from None
        return fold

    def _message(self, event: Event) -> None:
        data = event.data
        message = data.get("message")
        source = message.get("source") if isinstance(message, dict) else None
        if isinstance(source, dict) and source.get("provider") and source.get("model"):
            self._model = f"{source['provider']}:{source['model']}"
        reported = data.get(USAGE)
        if not self._pending:
            if isinstance(reported, dict):
                self._pending.append(reported)
            elif not data.get("interrupted"):
                self._pending.append(self._estimate(event))
                self._estimated = True
        self._settle()
        if self._history_chars is None:
            self._seen.append(event)
        else:
            self._history_chars += _message_chars(event)

    def _summary(self, data: Any) -> None:
        # A summarization request: counted and priced apart from the step it may sit in.
        if not isinstance(data, dict):
            return
        reported = data.get(USAGE)
        if not isinstance(reported, dict) and data.get("llmStreamCall") is not True:
            return
        self._requests += 1
        if isinstance(reported, dict):
            provider, model = data.get("provider"), data.get("model")
            named = isinstance(provider, str) and isinstance(model, str) and provider and model
            key = f"{provider}:{model}" if named else self._model or _UNKNOWN_MODEL
            _attribute(self._tokens, key, [reported])

    def _settle(self) -> None:
        if self._pending:
            _attribute(self._tokens, self._model or _UNKNOWN_MODEL, self._pending)
            self._pending = []

    def _estimate(self, event: Event) -> dict[str, int]:
        if self._history_chars is None:
            # The first estimate: count the history seen so far once, then keep it up.
            self._history_chars = sum(_message_chars(seen) for seen in self._seen)
            self._seen = []
        return {
            "inputTokens": math.ceil(self._history_chars / CHARS_PER_TOKEN),
            "outputTokens": math.ceil(_message_chars(event) / CHARS_PER_TOKEN),
        }


def _attribute(
    tokens: dict[str, list[int]], model: str, reports: Iterable[Mapping[str, Any]]
) -> None:
    counts = tokens.setdefault(model, [0, 0, 0, 0])
    for reported in reports:
        counts[0] += usage_count(reported, "inputTokens")
        counts[1] += usage_count(reported, "outputTokens")
        counts[2] += usage_count(reported, "cacheReadTokens")
        counts[3] += usage_count(reported, "cacheWriteTokens")


def _non_negative(value: object) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"expected an integer >= 0, got {value!r}")
    return value


def usage_of(
    events: Sequence[Event], prices: Mapping[str, Price] | None = None, *, model: str | None = None
) -> Usage:
    """Return the usage of `events` (a turn's, or a whole log's).

    Args:
        events: events in log order.
        prices: `provider:model` -> `Price`.
        model: see `UsageFold`.

    Returns:
        The usage (see the module docstring for what counts).
    """
    return UsageFold(prices, model=model).feed(events)


def _message_chars(event: Event) -> int:
    # A `user/message`'s data is the message; `assistant/message` and `tool/result` nest it.
    data = event.data
    message = data if event.type == USER_MESSAGE else data.get("message")
    if not isinstance(message, dict):
        return 0
    return _blocks_chars(message.get("content"))


def _blocks_chars(blocks: object) -> int:
    if not isinstance(blocks, list):
        return 0
    total = 0
    for block in blocks:
        if not isinstance(block, dict):
            continue
        for key in ("text", "arguments", "name"):
            value = block.get(key)
            if isinstance(value, str):
                total += len(value)
        inner = block.get("content")
        if isinstance(inner, list):
            total += _blocks_chars(inner)
    return total
