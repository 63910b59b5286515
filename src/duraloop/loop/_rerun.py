"""Re-running outcome-unknown calls of idempotent tools: the plan and the re-run step.

See docs/recovery.md#re-running-outcome-unknown-calls.

Nothing re-runs a `TOOL_OUTCOME_UNKNOWN` call automatically (law 5). An explicit
`AgentLoop.retry_unknown_calls()` (`duraloop resume --retry-unknown`) re-runs the calls whose
tool is registered and declared `idempotent`, as the first step of a new turn: `step/start`,
then for each call its new `tool/call` (citing the earlier one in `retryOf`), the body with
the same idempotency key, and a content-only `tool/result` replacement of the unknown
result, then `step/end`. A crash during a re-run leaves the unknown result in place (crash
repair ignores a `tool/call` no assistant message requested), so the call may be re-run again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from ..log import Session, UnknownCall, outcome_unknown_calls, rerun_result_data, rerun_text
from ..log.vocabulary import (
    INBOX_NEXT_STEP,
    RETRY_OF,
    STEP_END,
    STEP_START,
    SURFACE_REPLACE,
    TOOL_CALL,
    TOOL_RESULT,
)
from ..tools import CancelSignal, ToolCallRequest, ToolRegistry
from ._state import TurnDeps

SkipCause = Literal["", "already-rerun", "not-current", "not-registered", "not-idempotent"]
"""Why a call is skipped, as a value a program can test ("" when it is re-run)."""

CANCELLED_RERUN = "the turn was cancelled during the re-run; its outcome is still unknown"
"""The reason of a re-run the turn's cancellation reached (its unknown result is kept)."""


@dataclass(frozen=True)
class RerunDecision:
    """Whether one `TOOL_OUTCOME_UNKNOWN` call is re-run, and why not.

    Args:
        call: the call and its unknown result.
        rerun: True when `retry_unknown_calls()` re-runs it.
        reason: why it is skipped ("" when it is re-run), e.g. `tool "bash" is not declared
            idempotent`.
        cause: the same as a `SkipCause`, e.g. `"not-registered"`, for a caller that adds
            its own advice (the CLI says which `--mcp` or program registers the tool).
    """

    call: UnknownCall
    rerun: bool
    reason: str = ""
    cause: SkipCause = ""


@dataclass(frozen=True)
class Rerun:
    """What one re-run did.

    Args:
        call: the call re-run.
        call_seq: the seq of the re-run's `tool/call`, or None when a pre-execute hook (or
            an approval the tool asks for) kept it from running.
        result_seq: the seq of the replacing `tool/result`, or None when none was written
            (not run, or cancelled during the body: the unknown result stays).
        failed: whether the re-run's own result is an error (True when cancelled).
        reason: why no result was written, when `result_seq` is None.
    """

    call: UnknownCall
    call_seq: int | None
    result_seq: int | None = None
    failed: bool = False
    reason: str = ""


@dataclass
class RerunOrder:
    """The calls the next turn re-runs first, and what became of them (filled by the turn).

    Args:
        calls: the calls to re-run, in log order.
        continue_with_model: after the re-run step, request the model (True) or end the
            turn `completed` (False).
        done: one `Rerun` per call, appended as the step runs.
    """

    calls: tuple[UnknownCall, ...]
    continue_with_model: bool = True
    done: list[Rerun] = field(default_factory=list)


def rerun_decisions(session: Session, registry: ToolRegistry) -> list[RerunDecision]:
    """Decide, for every `TOOL_OUTCOME_UNKNOWN` call of the log, whether it is re-run.

    Args:
        session: the session.
        registry: the tools of the loop.

    Returns:
        One decision per unknown call, in log order: re-run when its tool is registered and
        declared idempotent, it was not re-run before, and its result is still on the surface.
    """
    decisions: list[RerunDecision] = []
    unknown = outcome_unknown_calls(session.events, session.surface.nodes, session.header)
    for call in unknown:
        found = registry.get(call.name)
        reason = ""
        cause: SkipCause = ""
        if call.rerun_seq is not None:
            reason, cause = f"already re-run (tool/call at seq {call.rerun_seq})", "already-rerun"
        elif not call.current:
            reason = "its result is no longer in the model's context (compacted or replaced)"
            cause = "not-current"
        elif found is None:
            reason, cause = f'tool "{call.name}" is not registered', "not-registered"
        elif not found.idempotent:
            reason, cause = f'tool "{call.name}" is not declared idempotent', "not-idempotent"
        decisions.append(RerunDecision(call, rerun=not reason, reason=reason, cause=cause))
    return decisions


async def run_rerun_step(
    deps: TurnDeps, order: RerunOrder, *, turn: int, step: int, signal: CancelSignal
) -> None:
    """Run the re-run step: `step/start`, each call, `step/end` (always), then a flush.

    Args:
        deps: what the turn depends on.
        order: the calls; `order.done` gets one `Rerun` per call.
        turn: the open turn.
        step: this step's number (1: the turn's first).
        signal: the turn's cancel signal.

    Raises:
        EventRejectedError: if an append is refused (after `step/end` is appended).
    """
    session = deps.session
    session.append(STEP_START, {"turn": turn, "step": step})
    try:
        for call in order.calls:
            signal.throw_if_aborted()
            order.done.append(await _rerun_one(deps, call, turn=turn, step=step, signal=signal))
    finally:
        session.append(STEP_END, {"turn": turn, "step": step})
        deps.durability.flush()


async def _rerun_one(
    deps: TurnDeps, call: UnknownCall, *, turn: int, step: int, signal: CancelSignal
) -> Rerun:
    session, pipeline = deps.session, deps.pipeline
    block = {"id": call.call_id, "name": call.name, "arguments": call.arguments}
    request = replace(
        ToolCallRequest.from_block(block, turn=turn, step=step),
        origin_session_id=call.origin_session_id,
    )
    prepared = await pipeline.prepare(request, signal)
    if prepared.kind == "ask":
        return Rerun(call, None, reason=f"the call asks for approval ({prepared.reason})")
    if prepared.kind != "dispatch":
        text = prepared.outcome.text if prepared.outcome is not None else ""
        return Rerun(call, None, reason=f"a pre-execute hook refused it: {text}")
    data = {
        "turn": turn,
        "step": step,
        "callId": call.rerun_call_id,  # an id of its own: UnknownCall.rerun_call_id
        "name": call.name,
        "arguments": call.arguments,
        RETRY_OF: call.call_seq,
    }
    call_seq = session.append(TOOL_CALL, data).seq
    await deps.durability.ensure_durable(call_seq)  # law 5: recorded before the body runs
    outcome = await pipeline.dispatch(request, signal)
    outcome = await pipeline.finalize(request, outcome, signal)
    if signal.aborted:  # cancelled during the body: its outcome is as unknown as before
        return Rerun(call, call_seq, failed=True, reason=CANCELLED_RERUN)
    original = session.events[call.result_seq].data
    content = [rerun_text(call.idempotency_key, failed=outcome.is_error), *outcome.content]
    result = session.append(
        TOOL_RESULT,
        rerun_result_data(original, content),
        surface_op={"op": SURFACE_REPLACE, "start": call.result_seq, "end": call.result_seq},
        source_event_seqs=[call.result_seq, call_seq],
    )
    for message in outcome.additional_contexts:
        deps.inbox.insert(INBOX_NEXT_STEP, message)
    return Rerun(call, call_seq, result.seq, failed=outcome.is_error)
