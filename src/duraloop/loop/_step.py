"""One step: request the model, commit its message, run its tool calls (loop-spec 2.4).

The step's durable boundaries: the log is flushed right before the model request (so the
previous step's end and this step's start are durable) and right before the first tool body
runs (so every `tool/call` is durable before its body, Law 5).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import anyio

from ..errors import LlmError
from ..llm import BlockAssembler, Model, ModelRequest, ToolSchema, stream_chunks
from ..log import Message, PairingCheck, Session, assistant_message, tool_calls_of
from ..log._vocabulary import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    REASON_COMPLETED,
    REASON_MAX_TOKENS,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    SURFACE_APPEND,
    USER_MESSAGE,
)
from ..tools import CancelSignal, ToolPipeline, execute_tool_calls


@dataclass
class RequestState:
    """What this loop instance has logged about its requests (loop-spec 2.4 step 2)."""

    header: dict[str, Any] | None
    context: dict[str, Any] | None
    logged_header: bool = False


@dataclass(frozen=True)
class StepSettings:
    """Inputs of a step that stay fixed for the turn."""

    model: Model
    system: str
    tools: Sequence[ToolSchema]
    max_tokens: int | None
    max_parallel_tool_calls: int
    flush: Callable[[], None]
    ensure_durable: Callable[[int], Awaitable[None]]


def _log_request_header(session: Session, settings: StepSettings, state: RequestState) -> None:
    config: dict[str, Any] = {"provider": settings.model.provider, "model": settings.model.model}
    if settings.max_tokens is not None:
        config["maxTokens"] = settings.max_tokens
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
        settings: model, system prompt, tools and durability callbacks.
        pipeline: the tool pipeline.
        signal: the turn's cancellation signal.
        state: request-header bookkeeping of this loop instance.
        pairing: the incremental provider pairing check run on the request's messages.

    Returns:
        `"completed"` (a text-only answer), `"max-tokens"`, or None when tool results were
        recorded and the model must be asked again.

    Raises:
        TurnCancelled: if the turn was cancelled (an interrupted prefix is kept).
        LlmError: if the model request failed.
        Exception: any scheduler or append failure, unchanged.
    """
    for message in entering:
        session.append(USER_MESSAGE, message, surface_op=SURFACE_APPEND)
    _log_request_header(session, settings, state)
    messages = session.derive_messages()
    pairing.check(messages, generation=session.surface.replace_generation)
    settings.flush()
    signal.throw_if_aborted()
    request = ModelRequest(
        messages=messages, system=settings.system or None, tools=settings.tools,
        max_tokens=settings.max_tokens,
    )
    assembler = BlockAssembler()
    chunk_seqs: list[int] = []
    model = settings.model
    with anyio.CancelScope() as scope:
        remove = signal.add_listener(lambda _reason: scope.cancel())
        try:
            async with aclosing(stream_chunks(model, request)) as stream:
                async for chunk in stream:
                    # A cancel between chunks (e.g. from a chunk observer) must keep the
                    # visible prefix like one during an await does: stop, don't raise here.
                    if signal.aborted:
                        break
                    event = session.append(
                        ASSISTANT_CHUNK, {"turn": turn, "step": step, "chunk": chunk}
                    )
                    chunk_seqs.append(event.seq)
                    assembler.push(chunk)
        finally:
            remove()
    if signal.aborted or scope.cancelled_caught:
        _append_interrupted(session, assembler, turn=turn, step=step, chunk_seqs=chunk_seqs, model=model)
        signal.throw_if_aborted()
    finish = assembler.finish
    if finish["kind"] in ("error", "aborted"):
        failure = finish.get("failure") or {"message": "model request failed", "code": "UNKNOWN"}
        raise LlmError(
            str(failure.get("message", "model request failed")),
            code=str(failure.get("code", "UNKNOWN")),
            status=failure.get("status"),
            provider_retry_after_ms=failure.get("providerRetryAfterMs"),
            request_id=failure.get("requestId"),
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
    await execute_tool_calls(
        session, calls, turn=turn, step=step, pipeline=pipeline, signal=signal,
        max_parallel_tool_calls=settings.max_parallel_tool_calls,
        ensure_durable=settings.ensure_durable,
    )
    signal.throw_if_aborted()
    return None


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

