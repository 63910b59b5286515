"""One step: request the model, commit its message, run its tool calls (loop-spec 2.4).

The step's durable boundaries: the log is flushed right before each model request (so the
previous step's end, this step's start and any `llm/retry` are durable) and right before the
first tool body runs (so every `tool/call` is durable before its body, Law 5).

A request that fails in-band (an `error` or `aborted` finish) is retried in the same step
when the `request_error` hook answers `"retry"` (at once, loop-spec 2.4 step 5) or else
when the loop's `RetryPolicy` allows (loop-spec 5.1): `llm/retry`, a cancellable wait,
`llm/retry-started`, then a new attempt over freshly derived history. The failed attempt's
chunks stay in the log; the step's `assistant/message` cites only its own attempt's chunks.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import anyio

from ..errors import LlmError, UsageError
from ..llm import (
    BlockAssembler,
    Model,
    ModelRequest,
    RetryPolicy,
    ToolSchema,
    stream_chunks,
)
from ..llm._chunks import FINISH, FINISH_ABORTED, FINISH_ERROR
from ..llm._errors import UNKNOWN
from ..llm._retry import RETRY_ALWAYS, RETRY_NORMAL
from ..log import Message, PairingCheck, Session, assistant_message, tool_calls_of
from ..log._messages import new_message_id
from ..log._vocabulary import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    LLM_RETRY,
    LLM_RETRY_STARTED,
    REASON_COMPLETED,
    REASON_MAX_TOKENS,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    RETRY_ORIGIN_HOOK,
    STEP_START,
    SURFACE_APPEND,
    USER_MESSAGE,
)
from ..tools import CancelSignal, ToolPipeline, execute_tool_calls
from ._hooks import HOOK_RETRY, RequestConfig
from ._idle import next_chunk


@dataclass
class RequestState:
    """What this loop instance has logged about its requests (loop-spec 2.4 step 2)."""

    header: dict[str, Any] | None
    context: dict[str, Any] | None
    logged_header: bool = False


_FAILED_FINISHES = (FINISH_ERROR, FINISH_ABORTED)


@dataclass(frozen=True)
class StepSettings:
    """Inputs of a step that stay fixed for the turn.

    `retry` None never retries; `stream_idle_timeout_seconds` None waits forever for a
    chunk; `jitter` is the uniform `[0, 1)` source of the retry backoff's jitter;
    `configure` (the `LoopHooks.request` hook bound to the step) may change each request's
    settings after history is derived; `recover` (the `LoopHooks.request_error` hook bound
    to the step) answers `"retry"` or None on an in-band failure, before `retry`;
    `accept_context` gets each committed tool result's contexts (None drops them).
    """

    model: Model
    system: str
    tools: Sequence[ToolSchema]
    max_tokens: int | None
    max_parallel_tool_calls: int
    flush: Callable[[], None]
    ensure_durable: Callable[[int], Awaitable[None]]
    retry: RetryPolicy | None = None
    stream_idle_timeout_seconds: float | None = None
    jitter: Callable[[], float] = random.random
    configure: Callable[[RequestConfig], Awaitable[RequestConfig]] | None = None
    recover: Callable[[dict[str, Any]], Awaitable[str | None]] | None = None
    accept_context: Callable[[Message], None] | None = None


def _log_request_header(
    session: Session, settings: StepSettings, state: RequestState, *, max_tokens: int | None
) -> None:
    config: dict[str, Any] = {"provider": settings.model.provider, "model": settings.model.model}
    if max_tokens is not None:
        config["maxTokens"] = max_tokens
    header: dict[str, Any] = {"config": config}
    if settings.system:
        header["system"] = settings.system
    if settings.tools:
        header["tools"] = [tool.to_json() for tool in settings.tools]
    if not state.logged_header:
        reason = "initial" if state.header is None else "resume"
    elif header != state.header:
        reason = "change"
    else:
        reason = ""
    if reason:
        session.append(REQUEST_HEADER, {"header": header, "reason": reason})
        state.header = header
        state.logged_header = True
    context = {"provider": config["provider"], "model": config["model"]}
    if context != state.context:
        session.append(REQUEST_CONTEXT, context)
        state.context = context


async def run_step(
    session: Session,
    *,
    turn: int,
    step: int,
    entering: Sequence[Message],
    settings: StepSettings,
    pipeline: ToolPipeline,
    signal: CancelSignal,
    state: RequestState,
    pairing: PairingCheck,
) -> str | None:
    """Run the body of one open step (after `step/start`, before `step/end`).

    Args:
        session: the live session.
        turn: the open turn.
        step: the open step.
        entering: user messages entering at this step.
        settings: model, system prompt, tools, retry policy and durability callbacks.
        pipeline: the tool pipeline.
        signal: the turn's cancellation signal.
        state: request-header bookkeeping of this loop instance.
        pairing: the incremental provider pairing check run on the request's messages.

    Returns:
        `"completed"` (a text answer, or a committed result concluded the turn, B16),
        `"max-tokens"`, or None when the model must be asked again after tool results.

    Raises:
        TurnCancelled: if the turn was cancelled (an interrupted prefix is kept), including
            during a retry's wait.
        LlmError: if the model request failed and the retry policy does not retry it.
        Exception: any scheduler or append failure, unchanged.
    """
    for message in entering:
        session.append(USER_MESSAGE, message, surface_op=SURFACE_APPEND)
    model = settings.model
    while True:
        assembler, chunk_seqs = await _attempt(
            session, turn=turn, step=step, settings=settings, signal=signal, state=state,
            pairing=pairing,
        )
        finish = assembler.finish
        if finish["kind"] not in _FAILED_FINISHES:
            break
        failure = dict(finish.get("failure") or {"message": "model request failed", "code": UNKNOWN})
        await _retry_or_raise(
            session, failure, turn=turn, step=step, settings=settings, signal=signal
        )
    message = assembler.message(model.provider, model.model)
    data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
    if assembler.usage is not None:
        data["usage"] = assembler.usage
    session.append(ASSISTANT_MESSAGE, data, surface_op=SURFACE_APPEND, source_event_seqs=chunk_seqs)
    if finish["kind"] == REASON_MAX_TOKENS:
        return REASON_MAX_TOKENS
    calls = tool_calls_of(message)
    if not calls:
        return REASON_COMPLETED
    outcome = await execute_tool_calls(
        session, calls, turn=turn, step=step, pipeline=pipeline, signal=signal,
        max_parallel_tool_calls=settings.max_parallel_tool_calls,
        ensure_durable=settings.ensure_durable,
        accept_context=settings.accept_context,
    )
    signal.throw_if_aborted()
    return REASON_COMPLETED if outcome.concluded else None


async def _attempt(
    session: Session,
    *,
    turn: int,
    step: int,
    settings: StepSettings,
    signal: CancelSignal,
    state: RequestState,
    pairing: PairingCheck,
) -> tuple[BlockAssembler, list[int]]:
    """Make one model request over freshly derived history and log its chunks.

    Returns the assembler (its finish may be a failure) and the attempt's chunk seqs. A
    cancel keeps the visible prefix as an interrupted assistant message and raises.
    """
    messages = session.derive_messages()
    max_tokens = settings.max_tokens
    if settings.configure is not None:
        max_tokens = (await settings.configure(RequestConfig(max_tokens=max_tokens))).max_tokens
    # A cancel before the request (e.g. from a `step/start` observer, B26) logs no header.
    signal.throw_if_aborted()
    _check_route(settings.model)
    _log_request_header(session, settings, state, max_tokens=max_tokens)
    pairing.check(messages, generation=session.surface.replace_generation)
    settings.flush()
    signal.throw_if_aborted()
    request = ModelRequest(
        messages=messages, system=settings.system or None, tools=settings.tools,
        max_tokens=max_tokens,
    )
    assembler = BlockAssembler()
    chunk_seqs: list[int] = []
    model = settings.model
    with anyio.CancelScope() as scope:
        remove = signal.add_listener(lambda _reason: scope.cancel())
        try:
            async with aclosing(stream_chunks(model, request)) as stream:
                while True:
                    chunk = await next_chunk(stream, settings.stream_idle_timeout_seconds)
                    # A cancel between chunks (e.g. from a chunk observer) must keep the
                    # visible prefix like one during an await does: stop, don't raise here.
                    if chunk is None or signal.aborted:
                        break
                    event = session.append(
                        ASSISTANT_CHUNK, {"turn": turn, "step": step, "chunk": chunk}
                    )
                    chunk_seqs.append(event.seq)
                    assembler.push(chunk)
                    if chunk["type"] == FINISH:
                        break
        finally:
            remove()
    if signal.aborted or scope.cancelled_caught:
        _append_interrupted(session, assembler, turn=turn, step=step, chunk_seqs=chunk_seqs, model=model)
        signal.throw_if_aborted()
    return assembler, chunk_seqs


def _check_route(model: Model) -> None:
    """Refuse a model without a provider or model name before anything is requested (B38).

    Raises:
        UsageError: naming the empty field and the model object.
    """
    for field_name in ("provider", "model"):
        value = getattr(model, field_name, None)
        if not isinstance(value, str) or not value:
            raise UsageError(
                f"the model {type(model).__name__} has no {field_name}: provider="
                f"{getattr(model, 'provider', None)!r}, model={getattr(model, 'model', None)!r}; "
                f"set `{field_name}` to a non-empty string"
            )


async def _retry_or_raise(
    session: Session,
    failure: dict[str, Any],
    *,
    turn: int,
    step: int,
    settings: StepSettings,
    signal: CancelSignal,
) -> None:
    """Record a hook-asked or policy-allowed retry and wait it out, or raise the failure.

    Follows the `dsh-llm-retry` listener (loop-spec 5.1): the retry number comes from the
    durable `llm/retry` events of this step with the same provider and policy key; the
    wait is cancellable, and a cancel raises without `llm/retry-started` (signal wins). A
    hook retry waits 0 ms and counts apart: its own chain (`policyKey` and `origin`
    `"hook"`, `mode` `"always"` as it has no budget); a hook answering None leaves the
    decision to the policy.

    Raises:
        TurnCancelled: if the turn is cancelled before or during the wait, or while the
            `request_error` hook runs (cancellation beats its retry, B35).
        LlmError: the failure, when neither the hook nor the policy retries it.
        Exception: what the `request_error` hook raised (no retry, B36).
    """
    signal.throw_if_aborted()
    provider = settings.model.provider
    policy = settings.retry
    action = None if settings.recover is None else await settings.recover(failure)
    signal.throw_if_aborted()
    if action == HOOK_RETRY:  # dsh's checker knows only these modes: the origin is apart
        mode, policy_key = RETRY_ALWAYS, RETRY_ORIGIN_HOOK
    elif policy is None:
        raise _llm_error(failure)
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
        raise _llm_error(failure)
    data: dict[str, Any] = {
        "retryId": retry_id, "turn": turn, "step": step, "provider": provider,
        "mode": mode, "policyKey": policy_key, "retry": retry,
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
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        data = event.data
        if event.type == STEP_START and data.get("turn") == turn and data.get("step") == step:
            break
        if (
            event.type == LLM_RETRY
            and data.get("turn") == turn
            and data.get("step") == step
            and data.get("provider") == provider
            and data.get("policyKey") == policy_key
        ):
            return int(data.get("retry", 0)), str(data["retryId"])
    return 0, new_message_id()


def _llm_error(failure: dict[str, Any]) -> LlmError:
    """Rebuild the `LlmError` carrying a failed attempt's `LlmFailure` verbatim."""
    return LlmError.from_failure(failure)


def _append_interrupted(
    session: Session,
    assembler: BlockAssembler,
    *,
    turn: int,
    step: int,
    chunk_seqs: list[int],
    model: Model,
) -> None:
    """Keep the visible prefix of a cancelled stream as an interrupted assistant message."""
    blocks = assembler.interrupted_blocks()
    if not blocks:
        return
    message = assistant_message(blocks, provider=model.provider, model=model.model)
    data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
    if assembler.usage is not None:
        data["usage"] = assembler.usage
    data["interrupted"] = True
    session.append(ASSISTANT_MESSAGE, data, surface_op=SURFACE_APPEND, source_event_seqs=chunk_seqs)

