"""Loop-level hooks: pre-step, request, request-error, turn-stopping (docs/loop.md#turns, #hooks).

Hooks are plain callables, sync or async. A hook that raises fails the turn: `turn/end`
records the error and the original exception propagates (B42). Tool hooks (pre- and
post-execute) are separate: `duraloop.tools.ToolHooks`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeAlias, TypeVar

from ..errors import UsageError
from ..log import Message
from ..tools import CancelSignal

_T = TypeVar("_T")


class Steering(Protocol):
    """What a hook may do to the running loop: queue messages, or cancel the turn.

    `AgentLoop` satisfies it; each method is the `AgentLoop` method of the same name.
    """

    def steer(self, message: str | Message) -> Message:
        """Queue steering (`next-step`, waking): it enters the running turn at its next step."""

    def inject(self, message: str | Message) -> Message:
        """Queue context for the next step (`next-step`, not waking)."""

    def followup(self, message: str | Message) -> Message:
        """Queue a follow-up (`next-turn`, waking): the prompt of its own later turn."""

    def cancel(self, reason: dict[str, Any] | None = None, *, keep_inbox: bool = False) -> None:
        """Cancel the running turn and, unless `keep_inbox`, discard every pending message."""


@dataclass(frozen=True)
class StepContext:
    """What a loop hook sees.

    Args:
        loop: the running loop, seen through `Steering`: a hook may `steer`, `inject` or
            `followup` through it, or `cancel` the turn.
        turn: the open turn.
        step: the step about to start (`pre_step`), being requested (`request`), or the
            last step of the turn (`turn_stopping`).
        messages: the messages entering the step (`pre_step`, `request`); empty for
            `turn_stopping`.
        signal: the turn's cancellation signal.
    """

    loop: Steering
    turn: int
    step: int
    messages: tuple[Message, ...]
    signal: CancelSignal


@dataclass(frozen=True)
class Reject:
    """A `pre_step` decision that refuses the proposed step: the turn ends `blocked`.

    Args:
        message: why, recorded in the `turn/end` reason when non-empty.
    """

    message: str = ""


@dataclass(frozen=True)
class RequestConfig:
    """The model settings of one request that a `request` hook may change.

    Args:
        max_tokens: the output token cap; None leaves the provider default. The
            `request/header` records the value actually sent.
    """

    max_tokens: int | None = None


PreStepHook: TypeAlias = (
    "Callable[[StepContext], Sequence[Message] | Reject | None | Awaitable[Sequence[Message] | "
    "Reject | None]]"
)
RequestHook: TypeAlias = (
    "Callable[[StepContext, RequestConfig], RequestConfig | Awaitable[RequestConfig]]"
)
RequestErrorHook: TypeAlias = (
    "Callable[[StepContext, dict[str, Any]], str | None | Awaitable[str | None]]"
)
TurnStoppingHook: TypeAlias = "Callable[[StepContext], None | Awaitable[None]]"


@dataclass(frozen=True)
class LoopHooks:
    """Callables the loop runs at its decision points; each may be sync or async.

    Args:
        pre_step: runs before every step opens, after the inbox claim, with the entering
            messages. Return None to enter them unchanged, a list to enter instead (an
            empty first-step entry ends the turn `completed` with no step, B41), or
            `Reject()` to end the turn `blocked` with no step (B40). Claimed messages never
            return to the inbox.
        request: runs before every model request (each retry too) with the proposed
            `RequestConfig`; returns the config to send.
        request_error: runs on an in-band model failure (an `error` or `aborted` finish)
            with a copy of the failure (`message`, `code`, ...), before the `RetryPolicy`
            (docs/loop.md#request-retries). Return `"retry"` to retry at once in the same step
            (logged as `llm/retry` with `origin` and `policyKey` `"hook"`, `mode`
            `"always"` and `delayMs` 0, then `llm/retry-started`), or None to let the policy
            decide. A cancel while it runs
            beats its retry (the turn ends `aborted`, B35); if it raises, the turn ends
            `error` with no retry (B36).
        turn_stopping: runs when the turn would end naturally and no `next-step` message is
            pending; steering or injecting through `ctx.loop` continues the turn (B45).
    """

    pre_step: PreStepHook | None = None
    request: RequestHook | None = None
    request_error: RequestErrorHook | None = None
    turn_stopping: TurnStoppingHook | None = None


HOOK_RETRY: Final = "retry"
"""The `request_error` hook's answer that retries the failed request in the same step."""


class StepHooks:
    """The `request` and `request_error` hooks bound to one step's context, results checked.

    Each method is the `LoopHooks` hook of the same name; without that hook it returns what
    the loop does by default (the proposed config; no retry).

    Args:
        hooks: the loop's hooks.
        context: the step's context, handed to each hook.
    """

    def __init__(self, hooks: LoopHooks, context: StepContext) -> None:
        self._hooks = hooks
        self._context = context

    async def request(self, config: RequestConfig) -> RequestConfig:
        """Return the config to send, as the `request` hook decides.

        Raises:
            UsageError: if the hook returns no valid `RequestConfig`.
        """
        hook = self._hooks.request
        if hook is None:
            return config
        return checked_request_config(await call_hook(hook(self._context, config)))

    async def request_error(self, failure: dict[str, Any]) -> str | None:
        """Return `"retry"` or None for an in-band failure, as the `request_error` hook decides.

        The hook gets a copy of `failure`.

        Raises:
            UsageError: if the hook returns anything else.
        """
        hook = self._hooks.request_error
        if hook is None:
            return None
        action = await call_hook(hook(self._context, dict(failure)))
        if action is not None and action != HOOK_RETRY:
            raise UsageError(f"LoopHooks.request_error must return 'retry' or None, got {action!r}")
        return action


async def call_hook(result: _T | Awaitable[_T]) -> _T:
    """Return a hook's result, awaiting it when the hook was async."""
    if inspect.isawaitable(result):
        return await result
    return result


def entering_messages(decision: object, claimed: list[Message]) -> list[Message] | Reject:
    """Normalize a `pre_step` decision into the messages to enter, or `Reject`.

    Raises:
        UsageError: if the decision is not None, a `Reject` or a sequence of messages.
    """
    if decision is None:
        return claimed
    if isinstance(decision, Reject):
        return decision
    if isinstance(decision, list | tuple) and all(isinstance(m, dict) for m in decision):
        return list(decision)
    raise UsageError(
        "LoopHooks.pre_step must return None, a list of messages or Reject(), got "
        f"{type(decision).__name__}"
    )


def checked_request_config(config: object) -> RequestConfig:
    """Return a `request` hook's result after checking it.

    Raises:
        UsageError: if it is not a `RequestConfig` with `max_tokens` None or an int >= 1.
    """
    if not isinstance(config, RequestConfig):
        raise UsageError(
            f"LoopHooks.request must return a RequestConfig, got {type(config).__name__}"
        )
    limit = config.max_tokens
    if limit is not None and (type(limit) is not int or limit < 1):
        raise UsageError(
            f"LoopHooks.request returned max_tokens={limit!r}; it must be an int >= 1 or None"
        )
    return config
