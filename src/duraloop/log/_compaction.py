"""Which span of the surface a compaction may shadow, and the events that record one.

See docs/compaction.md#what-is-shadowed.

Pure, like repair: the loop asks here which range to summarize and builds its events from
here; what it asks of a model is in `loop/`.

- A cut between two surface nodes is **balanced** when every tool call before it has its
  result before it too (a count fold: an assistant message adds its calls, a `tool/result`
  subtracts one; compaction-spec 5.2). A compaction's range begins at the surface head and
  ends at a balanced cut, so a call and its result are never on different sides.
- The range keeps the tail verbatim: at least `retain_tokens` of it, the nodes of an open
  step, and the nodes of the last `keep_turns` turns. When the cut would leave nothing to
  compact it moves toward the head; if nothing is left, nothing is compacted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import CompactionError, EventRejectedError
from ._event import Event
from ._messages import Message, new_message_id
from .vocabulary import (
    ASSISTANT_MESSAGE,
    BLOCK_TEXT,
    BLOCK_TOOL_CALL,
    CHECKPOINT_PREAMBLE,
    COMPACT_PLUGIN,
    SOURCE_PLUGIN,
    SUMMARY_CLOSE_TAG,
    SUMMARY_OPEN_TAG,
    TOOL_RESULT,
    TURN_START,
)


def balanced_cuts(nodes: Sequence[int], events: Sequence[Event]) -> list[bool]:
    """Return, for each of the `len(nodes) + 1` cuts of the surface, whether it is balanced.

    Cut `i` lies before `nodes[i]` (cut `len(nodes)` after the last node).

    Raises:
        EventRejectedError: if a `tool/result` comes before any call it could answer
            (a corrupt surface; compaction-spec 5.2).
    """
    cuts = [True]
    open_calls = 0
    for seq in nodes:
        event = events[seq]
        if event.type == ASSISTANT_MESSAGE:
            message = event.data.get("message") or {}
            open_calls += sum(
                1 for block in message.get("content") or () if block.get("type") == BLOCK_TOOL_CALL
            )
        elif event.type == TOOL_RESULT:
            open_calls -= 1
            if open_calls < 0:
                raise EventRejectedError(
                    f"tool-pairing balance: tool/result at surface seq {seq} has no matching "
                    "tool-call (corrupt surface)"
                )
        cuts.append(open_calls == 0)
    return cuts


def protected_from(
    nodes: Sequence[int], events: Sequence[Event], *, keep_turns: int, open_step_start: int | None
) -> int:
    """Return the index of the first surface node a compaction must keep verbatim.

    The nodes after `open_step_start` (the seq of an open step's `step/start`) and those of
    the last `keep_turns` turns (from the `turn/start` of the oldest of them) are kept: the
    tail of `nodes` whose seqs are all greater than that boundary. `len(nodes)` when nothing
    is kept this way.
    """
    boundary = open_step_start
    if keep_turns > 0:
        starts = [event.seq for event in _turn_starts_backwards(events, keep_turns)]
        if len(starts) == keep_turns:
            boundary = starts[-1] if boundary is None else min(boundary, starts[-1])
        elif starts:
            boundary = -1  # fewer turns than kept: every turn is kept
    if boundary is None:
        return len(nodes)
    index = len(nodes)
    while index > 0 and nodes[index - 1] > boundary:
        index -= 1
    return index


def _turn_starts_backwards(events: Sequence[Event], count: int) -> list[Event]:
    found: list[Event] = []
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event.type == TURN_START:
            found.append(event)
            if len(found) == count:
                break
    return found


def select_range(
    prices: Sequence[int], cuts: Sequence[bool], *, retain_tokens: int, keep_from: int
) -> int | None:
    """Return how many head nodes to compact (the range is `nodes[:k]`), or None.

    Walks from the tail until the kept tail is worth `retain_tokens` (0: only the newest
    node is kept), never past `keep_from`, then moves the cut toward the head until it is
    balanced (compaction-spec 5.1).

    Args:
        prices: each surface node's estimated tokens, in surface order.
        cuts: `balanced_cuts` of the same surface.
        retain_tokens: the estimated tokens to keep verbatim at the tail.
        keep_from: `protected_from`: the first node that must be kept.

    Returns:
        `k >= 1`, or None when no balanced cut leaves anything to compact.
    """
    if not prices:
        return None
    kept, k = 0, len(prices)
    for index in range(len(prices) - 1, -1, -1):
        kept += prices[index]
        k = index
        if kept >= retain_tokens:
            break
    k = min(k, keep_from)
    while k > 0 and not cuts[k]:
        k -= 1
    return k or None


def check_region(
    nodes: Sequence[int], events: Sequence[Event], start: int, end: int
) -> tuple[int, int]:
    """Check an explicit span `start..end` (node seqs) and return its node indexes.

    Raises:
        CompactionError: code `range`, if a seq is not on the surface, `start` comes after
            `end`, or a cut at either side would split a tool call from its result
            (compaction-spec 5.2, C18).
    """
    positions = {seq: index for index, seq in enumerate(nodes)}
    for name, seq in (("start", start), ("end", end)):
        if seq not in positions:
            raise CompactionError(
                f"compaction: {name} seq {seq} not found in surface", code="range"
            )
    first, last = positions[start], positions[end]
    if first > last:
        raise CompactionError(
            f"compaction: start seq {start} (position {first}) is after end seq {end} "
            f"(position {last}) on the surface",
            code="range",
        )
    cuts = balanced_cuts(nodes, events)
    if not cuts[first]:
        raise CompactionError(
            f"compaction: start seq {start} is not a balanced boundary (would split a "
            "step's tool-call/result pair)",
            code="range",
        )
    if not cuts[last + 1]:
        raise CompactionError(
            f"compaction: end seq {end} is not a balanced boundary (would split a step, or "
            "the step is still open)",
            code="range",
        )
    return first, last


def checkpoint_message(
    summary: Sequence[dict[str, Any]], *, compaction_id: str, source_command_id: str | None
) -> Message:
    """Return the checkpoint `user/message` data that replaces a compacted span.

    Its content frames the summary's text blocks: the preamble and `<compacted-summary>`,
    the blocks, `</compacted-summary>`; its source is `{kind: "plugin", plugin: "compact",
    compactionId[, sourceCommandId]}` (compaction-spec 2.3).
    """
    source: dict[str, Any] = {
        "kind": SOURCE_PLUGIN,
        "plugin": COMPACT_PLUGIN,
        "compactionId": compaction_id,
    }
    if source_command_id is not None:
        source["sourceCommandId"] = source_command_id
    content = [
        {"type": BLOCK_TEXT, "text": f"{CHECKPOINT_PREAMBLE}\n\n{SUMMARY_OPEN_TAG}"},
        *summary,
        {"type": BLOCK_TEXT, "text": SUMMARY_CLOSE_TAG},
    ]
    return {"content": content, "source": source, "role": "user", "id": new_message_id()}


def compaction_lifecycle(
    compaction_id: str, turn: int | None, source_command_id: str | None
) -> dict[str, Any]:
    """Return the data `compaction/start` and `compaction/end` share (compaction-spec 2.1)."""
    data: dict[str, Any] = {"compactionId": compaction_id}
    if source_command_id is not None:
        data["sourceCommandId"] = source_command_id
    data["turn"] = turn
    return data
