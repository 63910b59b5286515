"""dsh's llm-retry invariants over a whole log, for tests (`dsh-llm-retry`'s own checker).

dsh validates every `llm/retry` and `llm/retry-started` event when it loads a session and
when one is appended; a log duraloop writes must pass those same rules or dsh refuses it.
The rules, as dsh states them:

- `llm/retry` carries a non-empty `retryId`, `provider` and `policyKey`; a positive safe
  integer `retry`; a `failure` that is an `LlmFailure` (non-empty `message` and `code`;
  `status` an integer in 100..599, `providerRetryAfterMs` positive and finite, `requestId`
  non-empty, each when present); `mode` `normal` (with a positive safe integer
  `maxRetries` >= `retry`) or `always` (with no `maxRetries` key); a finite `delayMs` in
  0..2^31-1.
- It sits inside an open turn and an open step and names them (`turn`, `step`), and its
  `provider` is the one of the last `request/header` (the provider the request went to).
- A chain is the `llm/retry` events of one turn, step, provider and `policyKey`: its
  retries are numbered 1, 2, ... with no gap, all share the chain's `retryId`, and a new
  chain's `retryId` is used by no earlier retry event. The step's end closes the chain.
- `llm/retry-started` carries a non-empty `retryId`, pairs with an earlier `llm/retry` of
  the same `retryId` and `retry` in the same turn and step, and at most once.

Any other field (duraloop's `origin`) is ignored, as dsh ignores it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final

from ..log import Event
from ..log.vocabulary import (
    LLM_RETRY,
    LLM_RETRY_STARTED,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TURN_END,
    TURN_START,
)

MAX_TIMER_DELAY_MS: Final = 2**31 - 1
_MAX_SAFE_INTEGER: Final = 2**53 - 1

_Chain = tuple[object, object, object, object]  # turn, step, provider, policyKey


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_integer(value: object) -> bool:
    """JavaScript's `Number.isInteger`: a finite number with no fraction (1.0 is one)."""
    return (
        _is_number(value)
        and math.isfinite(value)  # type: ignore[arg-type]
        and float(value).is_integer()  # type: ignore[arg-type]
    )


def _is_safe_integer(value: object) -> bool:
    return _is_integer(value) and abs(value) <= _MAX_SAFE_INTEGER  # type: ignore[arg-type]


def _non_empty_string(value: object) -> bool:
    return isinstance(value, str) and len(value) > 0


def _check_failure(value: object) -> None:
    if not isinstance(value, Mapping):
        raise AssertionError("llm/retry failure must be an object")
    if not _non_empty_string(value.get("message")):
        raise AssertionError("llm/retry failure.message must be a non-empty string")
    if not _non_empty_string(value.get("code")):
        raise AssertionError("llm/retry failure.code must be a non-empty string")
    if "status" in value and not (_is_integer(value["status"]) and 100 <= value["status"] <= 599):
        raise AssertionError(
            "llm/retry failure.status must be an integer from 100 through 599 when present"
        )
    hint = value.get("providerRetryAfterMs")
    if "providerRetryAfterMs" in value and not (
        _is_number(hint) and math.isfinite(hint) and hint > 0  # type: ignore[arg-type,operator]
    ):
        raise AssertionError(
            "llm/retry failure.providerRetryAfterMs must be a positive finite number when present"
        )
    if "requestId" in value and not _non_empty_string(value["requestId"]):
        raise AssertionError("llm/retry failure.requestId must be a non-empty string when present")


class _RetryLedger:
    """What the log before the current event says about turns, steps and retry chains."""

    def __init__(self) -> None:
        self.open_turn: Mapping[str, object] | None = None
        self.open_step: Mapping[str, object] | None = None
        self.provider: object = None  # the last request/header's provider
        self.chains: dict[_Chain, tuple[object, object]] = {}  # -> (last retry, retryId)
        self.owned: set[object] = set()  # every retryId of a retry event so far
        self.scheduled: dict[tuple[object, object], tuple[object, object]] = {}
        self.started: set[tuple[object, object]] = set()

    def see(self, event: Event) -> None:
        kind, data = event.type, event.data
        if kind == TURN_START:
            self.open_turn = data
        elif kind == TURN_END:
            self.open_turn = None
        elif kind == STEP_START:
            self.open_step = data
        elif kind == STEP_END:
            self.open_step = None
        elif kind == REQUEST_HEADER:
            header = data.get("header")
            config = header.get("config") if isinstance(header, Mapping) else None
            self.provider = config.get("provider") if isinstance(config, Mapping) else None
        elif kind == LLM_RETRY:
            self.check_retry(data)
            chain = (data["turn"], data["step"], data["provider"], data["policyKey"])
            self.chains[chain] = (data["retry"], data["retryId"])
            self.owned.add(data["retryId"])
            self.scheduled[(data["retryId"], data["retry"])] = (data["turn"], data["step"])
        elif kind == LLM_RETRY_STARTED:
            self.check_started(data)
            self.owned.add(data["retryId"])
            self.started.add((data["retryId"], data["retry"]))

    def check_retry(self, data: Mapping[str, object]) -> None:
        retry_id, turn, step = data.get("retryId"), data.get("turn"), data.get("step")
        provider, mode, retry = data.get("provider"), data.get("mode"), data.get("retry")
        if not _non_empty_string(retry_id):
            raise AssertionError("llm/retry retryId must be a non-empty string")
        _check_failure(data.get("failure"))
        if not (_is_safe_integer(retry) and retry >= 1):  # type: ignore[operator]
            raise AssertionError("llm/retry retry must be a positive safe integer")
        if not _non_empty_string(provider):
            raise AssertionError("llm/retry provider must be a non-empty string")
        if not _non_empty_string(data.get("policyKey")):
            raise AssertionError("llm/retry policyKey must be a non-empty string")
        if mode == "normal":
            most = data.get("maxRetries")
            if not (
                _is_safe_integer(most)
                and most >= 1  # type: ignore[operator]
                and retry <= most  # type: ignore[operator]
            ):
                raise AssertionError(
                    f"llm/retry retry {retry} must not exceed a positive safe maxRetries {most}"
                )
        elif mode == "always":
            if "maxRetries" in data:
                raise AssertionError("llm/retry always mode must omit maxRetries")
        else:
            raise AssertionError(f"llm/retry mode must be normal or always, got {mode}")
        delay = data.get("delayMs")
        if not (
            _is_number(delay)
            and math.isfinite(delay)  # type: ignore[arg-type]
            and 0 <= delay <= MAX_TIMER_DELAY_MS  # type: ignore[operator]
        ):
            raise AssertionError(
                f"llm/retry delayMs must be a finite number within 0..{MAX_TIMER_DELAY_MS}"
            )
        if self.open_turn is None:
            raise AssertionError("llm/retry must be appended inside an open turn")
        if turn != self.open_turn.get("turn"):
            raise AssertionError(
                f"llm/retry names turn {turn}, but the open turn is {self.open_turn.get('turn')}"
            )
        opened = self.open_step
        if opened is None:
            raise AssertionError("llm/retry must be appended inside an open step")
        if step != opened.get("step") or turn != opened.get("turn"):
            raise AssertionError(
                f"llm/retry names turn {turn}/step {step}, but the open step is "
                f"{opened.get('turn')}/{opened.get('step')}"
            )
        if provider != self.provider:
            raise AssertionError(
                f"llm/retry provider {provider} does not match the failed request provider "
                f"{self.provider}"
            )
        prior = self.chains.get((turn, step, provider, data.get("policyKey")))
        expected = 1 if prior is None else prior[0] + 1  # type: ignore[operator]
        if retry != expected:
            raise AssertionError(
                f"llm/retry retry {retry} must equal provider policy retry {expected}"
            )
        if prior is not None and prior[1] != retry_id:
            raise AssertionError("llm/retry must preserve retryId across one provider-policy chain")
        if prior is None and retry_id in self.owned:
            raise AssertionError(
                f"llm/retry retryId {retry_id!r} is already owned by another chain"
            )

    def check_started(self, data: Mapping[str, object]) -> None:
        retry_id, retry = data.get("retryId"), data.get("retry")
        if not _non_empty_string(retry_id):
            raise AssertionError("llm/retry-started retryId must be a non-empty string")
        scheduled = self.scheduled.get((retry_id, retry))
        if scheduled is None:
            raise AssertionError("llm/retry-started pairs no prior scheduled attempt")
        if scheduled != (data.get("turn"), data.get("step")):
            raise AssertionError("llm/retry-started turn/step must match its scheduled attempt")
        if (retry_id, retry) in self.started:
            raise AssertionError("llm/retry-started repeats one scheduled attempt")


def check_retry_events(events: Sequence[Event]) -> None:
    """Check every `llm/retry` and `llm/retry-started` event as dsh's llm-retry checker does.

    Args:
        events: the whole log, in seq order.

    Raises:
        AssertionError: naming the first event that breaks a rule (its seq) and the rule,
            in dsh's own words.
    """
    ledger = _RetryLedger()
    for event in events:
        try:
            ledger.see(event)
        except AssertionError as exc:
            raise AssertionError(f"dsh llm-retry invariant, seq {event.seq}: {exc}") from exc
