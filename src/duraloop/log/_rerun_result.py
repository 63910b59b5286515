"""Reading a re-run back from the log: its `tool/call` and the result that replaced the unknown one.

See docs/recovery.md#re-running-outcome-unknown-calls. A re-run is recognised by structure,
not by text: its `tool/call` carries `retryOf`, and its result is a `tool/result` replacement
citing that `tool/call` in `sourceEventSeqs`. Only whether the re-run succeeded is read from
text: the content-only rewrite rule keeps `isError` and `error` those of the unknown result,
so the one place the outcome is written is the sentence that ends the replacement's opening
block (`rerun_text`). Pure functions; readers (`show`, the live stream) use them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .vocabulary import (
    BLOCK_TEXT,
    RERUN_CALL_ID_INFIX,
    RERUN_FAILED_TEXT,
    RERUN_SUCCEEDED_TEXT,
    RETRY_OF,
    TOOL_CALL,
    TOOL_RESULT,
)

if TYPE_CHECKING:
    from ._event import Event


@dataclass(frozen=True, slots=True)
class RerunCall:
    """A re-run's `tool/call`.

    Args:
        seq: the seq of the re-run's `tool/call`.
        retry_of: the seq of the earlier `tool/call` it re-runs (`retryOf`).
        call_id: the re-run's own id (`<callId>-rerun-<n>`).
        original_call_id: the id of the call it re-runs (`call_id` without `-rerun-<n>`).
        name: the tool name.
        arguments: the raw argument text.
    """

    seq: int
    retry_of: int
    call_id: str
    original_call_id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class RerunResult:
    """A `tool/result` that replaced an unknown result with a re-run's outcome.

    Args:
        call: the re-run's `tool/call`.
        result_seq: the seq of the replacement.
        replaced_seq: the seq of the `TOOL_OUTCOME_UNKNOWN` result it replaced.
        succeeded: True or False as the replacement's opening text says, or None when that
            text is not one `rerun_text` writes.
        output: the text of the re-run's own content (the blocks after the opening one).
    """

    call: RerunCall
    result_seq: int
    replaced_seq: int
    succeeded: bool | None
    output: str


def rerun_call(event: Event) -> RerunCall | None:
    """Return the re-run an event records, when it is a re-run's `tool/call`.

    Args:
        event: any event.

    Returns:
        The `RerunCall` for a `tool/call` with an integer `retryOf`, else None.
    """
    data: Any = event.data
    if event.type != TOOL_CALL or not isinstance(data, dict):
        return None
    retry_of = data.get(RETRY_OF)
    if type(retry_of) is not int:
        return None
    call_id = str(data.get("callId", ""))
    original, infix, _ = call_id.rpartition(RERUN_CALL_ID_INFIX)
    return RerunCall(
        seq=event.seq,
        retry_of=retry_of,
        call_id=call_id,
        original_call_id=original if infix else call_id,
        name=str(data.get("name", "")),
        arguments=str(data.get("arguments", "")),
    )


def rerun_result(event: Event, calls: Mapping[int, RerunCall]) -> RerunResult | None:
    """Return the re-run a `tool/result` replacement answers, or None for any other event.

    Args:
        event: any event.
        calls: the re-run `tool/call`s seen so far, by seq (`rerun_call` of each).

    Returns:
        The `RerunResult` of a `tool/result` whose surfaceOp is a replace and whose
        `sourceEventSeqs` cite one of `calls`, else None.
    """
    data: Any = event.data
    op = event.surface_op
    if event.type != TOOL_RESULT or not isinstance(data, dict) or not isinstance(op, dict):
        return None
    call = next((calls[s] for s in event.source_event_seqs or () if s in calls), None)
    start = op.get("start")
    if call is None or type(start) is not int:
        return None
    blocks = _result_blocks(data)
    succeeded = rerun_succeeded(blocks)
    output = "".join(str(b.get("text", "")) for b in blocks[1:] if b.get("type") == BLOCK_TEXT)
    return RerunResult(call, event.seq, start, succeeded, output)


def rerun_succeeded(blocks: Sequence[Mapping[str, Any]]) -> bool | None:
    """Tell from a re-run's replacement content whether the re-run succeeded.

    The replacement keeps the unknown result's `isError` and error code (the content-only
    rule), so the outcome is the closing sentence of its opening text block: `rerun_text`
    ends it with `RERUN_SUCCEEDED_TEXT` or `RERUN_FAILED_TEXT`
    (docs/recovery.md#re-running-outcome-unknown-calls).

    Args:
        blocks: the replacement's tool-result content blocks.

    Returns:
        True, False, or None when the opening text says neither (not written by duraloop).
    """
    opening = blocks[0] if blocks else {}
    text = str(opening.get("text", "")) if opening.get("type") == BLOCK_TEXT else ""
    if text.endswith(RERUN_SUCCEEDED_TEXT):
        return True
    if text.endswith(RERUN_FAILED_TEXT):
        return False
    return None


def _result_blocks(data: dict[str, Any]) -> list[dict[str, Any]]:
    message = data.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    first = content[0] if isinstance(content, list) and content else None
    blocks = first.get("content") if isinstance(first, dict) else None
    if not isinstance(blocks, list):
        return []
    return [b for b in blocks if isinstance(b, dict)]
