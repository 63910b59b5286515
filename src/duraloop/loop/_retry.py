"""A step's model retries: record a hook-asked or policy-allowed retry and wait it out.

See docs/loop.md#request-retries.

Follows the `dsh-llm-retry` listener: a chain is the `llm/retry` events of one turn, step,
provider and policy key; it keeps one `retryId` and numbers its retries 1, 2, ...; the
step's end closes it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from ..errors import LlmError
from ..log import Session, new_message_id, step_start
from ..log.vocabulary import (
    LLM_RETRY,
    LLM_RETRY_STARTED,
    RETRY_ALWAYS,
    RETRY_NORMAL,
    RETRY_ORIGIN_HOOK,
)
from ._hooks import HOOK_RETRY
from ._state import StepSettings, TurnDeps


class StepRetries:
    """The retries of one step's model request.

    Args:
        deps: what the turn depends on (the session, the model, the config's `RetryPolicy`).
        settings: the step inputs fixed for the turn (its number, signal and jitter source).
        step: the step's number.
    """

    def __init__(self, deps: TurnDeps, settings: StepSettings, step: int) -> None:
        self._deps = deps
        self._settings = settings
        self._step = step

    async def retry_or_raise(
        self,
        failure: dict[str, Any],
        request_error: Callable[[dict[str, Any]], Awaitable[str | None]],
    ) -> None:
        """Record a hook-asked or policy-allowed retry and wait it out, or raise the failure.

        The retry number comes from the durable `llm/retry` events of this step with the
        same provider and policy key; the wait is cancellable, and a cancel raises without
        `llm/retry-started` (signal wins). A hook retry waits 0 ms and counts apart: its own
        chain (`policyKey` and `origin` `"hook"`, `mode` `"always"` as it has no budget); a
        hook answering None leaves the decision to the policy.

        Args:
            failure: the failed attempt's `LlmFailure` JSON.
            request_error: the step's bound `request_error` hook (`"retry"` or None).

        Raises:
            TurnCancelled: if the turn is cancelled before or during the wait, or while the
                `request_error` hook runs (cancellation beats its retry, B35).
            LlmError: the failure, when neither the hook nor the policy retries it.
            Exception: what the `request_error` hook raised (no retry, B36).
        """
        deps, settings = self._deps, self._settings
        session, signal, turn, step = deps.session, settings.signal, settings.turn, self._step
        signal.throw_if_aborted()
        provider = deps.model.provider
        policy = deps.config.retry
        action = await request_error(failure)
        signal.throw_if_aborted()
        if action == HOOK_RETRY:  # dsh's checker knows only these modes: the origin is apart
            mode, policy_key = RETRY_ALWAYS, RETRY_ORIGIN_HOOK
        elif policy is None:
            raise LlmError.from_failure(failure)
        else:
            mode, policy_key = policy.mode, policy.policy_key
        previous, retry_id = _last_retry_of_chain(
            session, turn=turn, step=step, provider=provider, policy_key=policy_key
        )
        retry = previous + 1
        if policy is None or action == HOOK_RETRY:
            delay_ms: int | None = 0
        else:
            delay_ms = policy.retry_delay_ms(failure, retry=retry, random=settings.jitter)
        if delay_ms is None:
            raise LlmError.from_failure(failure)
        data: dict[str, Any] = {
            "retryId": retry_id,
            "turn": turn,
            "step": step,
            "provider": provider,
            "mode": mode,
            "policyKey": policy_key,
            "retry": retry,
        }
        if policy is not None and mode == RETRY_NORMAL:
            data["maxRetries"] = policy.max_retries
        data["delayMs"] = delay_ms
        data["failure"] = failure
        if action == HOOK_RETRY:
            data["origin"] = RETRY_ORIGIN_HOOK
        session.append(LLM_RETRY, data)
        with anyio.move_on_after(delay_ms / 1000):
            await signal.wait()
        signal.throw_if_aborted()
        session.append(
            LLM_RETRY_STARTED, {"retryId": retry_id, "turn": turn, "step": step, "retry": retry}
        )


def _last_retry_of_chain(
    session: Session, *, turn: int, step: int, provider: str, policy_key: str
) -> tuple[int, str]:
    """Return the `retry` and `retryId` of this step's provider-policy chain so far.

    A chain is the `llm/retry` events of one turn, step, provider and policy key (dsh's
    llm-retry invariant): it keeps one `retryId` and numbers its retries 1, 2, ...; the
    step's end closes it. With no retry yet, `(0, <a fresh id>)`.
    """
    events = session.events
    start = step_start(events, turn=turn, step=step)
    for index in range(len(events) - 1, -1 if start is None else start, -1):
        event = events[index]
        data = event.data
        if (
            event.type == LLM_RETRY
            and data.get("turn") == turn
            and data.get("step") == step
            and data.get("provider") == provider
            and data.get("policyKey") == policy_key
        ):
            return int(data.get("retry", 0)), str(data["retryId"])
    return 0, new_message_id()
