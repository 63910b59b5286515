"""The events the scheduler appends: `tool/call`, `tool/result` and the skipped pair.

See docs/scheduler.md#results. A `tool/call` or `tool/result` the scheduler builds is lossless
JSON when the few values in it that came from elsewhere are (the call's id, name and argument
text, the outcome's content, error and meta): only those are checked (`is_lossless`), and
`Session.append_lossless` skips the walk over the whole payload. When one is not, the event
goes through `Session.append`, which refuses it with the message it always gave, so both paths
write the same log and refuse the same events (tests/tools/test_scheduler_events.py).
"""

from __future__ import annotations

from ..log import Session, is_lossless, tool_result_message
from ..log.vocabulary import (
    ABORTED_BEFORE_DISPATCH_ERROR,
    ABORTED_BEFORE_DISPATCH_TEXT,
    BLOCK_TEXT,
    SURFACE_APPEND,
    TOOL_CALL,
    TOOL_RESULT,
)
from ._outcome import ToolOutcome
from ._request import ToolCallRequest


def commit_result(
    session: Session, call: ToolCallRequest, outcome: ToolOutcome, *, call_seq: int
) -> None:
    """Append the `tool/result` for `call`, citing its `tool/call` (docs/scheduler.md#results)."""
    data: dict[str, object] = {
        "turn": call.turn,
        "step": call.step,
        "message": tool_result_message(call.call_id, outcome.content, is_error=outcome.is_error),
    }
    if outcome.error is not None:
        data["error"] = outcome.error
    if outcome.meta is not None:
        data["meta"] = outcome.meta
    if _lossless_call(call) and _lossless_outcome(outcome):
        session.append_lossless(
            TOOL_RESULT, data, surface_op=SURFACE_APPEND, source_event_seqs=[call_seq]
        )
    else:  # `append` checks everything and names what is not lossless JSON
        session.append(
            TOOL_RESULT, data, surface_op=SURFACE_APPEND, source_event_seqs=[call_seq], copy=False
        )


def append_call(session: Session, call: ToolCallRequest) -> int:
    """Append the `tool/call` that records `call` starting; return its seq."""
    data = {
        "turn": call.turn,
        "step": call.step,
        "callId": call.call_id,
        "name": call.name,
        "arguments": call.raw_arguments,
    }
    if _lossless_call(call):
        return session.append_lossless(TOOL_CALL, data).seq
    return session.append(TOOL_CALL, data, copy=False).seq


# The depths of the checked values inside the event's data, so `MAX_JSON_DEPTH` counts as for
# the whole payload.
_CONTENT_DEPTH = 5  # data > message > content > tool-result block > its content
_TOP_DEPTH = 2  # data > error / meta


def _lossless_call(call: ToolCallRequest) -> bool:
    return (
        type(call.turn) is int
        and type(call.step) is int
        and _lossless_str(call.call_id)
        and _lossless_str(call.name)
        and _lossless_str(call.raw_arguments)
    )


def _lossless_str(value: object) -> bool:
    return type(value) is str and is_lossless(value)


def _lossless_outcome(outcome: ToolOutcome) -> bool:
    return (
        type(outcome.is_error) is bool
        and type(outcome.content) is list
        and is_lossless(outcome.content, depth=_CONTENT_DEPTH)
        and (outcome.error is None or is_lossless(outcome.error, depth=_TOP_DEPTH))
        and (outcome.meta is None or is_lossless(outcome.meta, depth=_TOP_DEPTH))
    )


def append_skipped_pair(session: Session, call: ToolCallRequest) -> None:
    """Answer a call that never started: its `tool/call` plus `ABORTED_BEFORE_DISPATCH`."""
    call_seq = append_call(session, call)
    outcome = ToolOutcome(
        is_error=True,
        content=[{"type": BLOCK_TEXT, "text": ABORTED_BEFORE_DISPATCH_TEXT}],
        error=dict(ABORTED_BEFORE_DISPATCH_ERROR),
    )
    commit_result(session, call, outcome, call_seq=call_seq)
