"""What a torn tail may hold: the fsync rule that tells a crash from damage (D12).

A crash can tear only bytes that no fsync covered. duraloop's writer stores a live session
in batches, one write and one fsync each, and starts a batch only after the previous one's
fsync returned; the loop flushes at fixed points:

- right before every model request (loop `_attempt`): every event before a request is
  durable before the first `assistant/chunk` or the `assistant/message` of its response;
- right before a tool body runs (Law 5, `ensure_durable`): a call's `tool/call`, and every
  event before it, is durable before the body runs, so before its result exists;
- after `turn/end` (and dsh's rule, docs/store.md#reading-and-torn-tails, treats a later `turn/end`
  as proof on its own).

So the events read after damage can prove that the damaged line was durable, which makes the
damage corruption (`CorruptLogError`, nothing written), not a torn tail:

1. a response event (`assistant/chunk`, `assistant/message`) after an event that is always
   appended before the request flush of any later response (`step/start`, `request/header`,
   `tool/result`, ... see `_BEFORE_A_REQUEST`), or whose own `step/start` is not in the
   readable prefix (then that `step/start` is the damaged line or after it);
2. a `tool/result` whose body ran (a success, or an error code only a dispatched body gets)
   for a call whose `tool/call` is not in the readable prefix (so it is the damaged line or
   after it, and was fsynced before the body ran).

Results that can be written without a dispatch (`TOOL_OUTCOME_UNKNOWN`, `TOOL_NOT_STARTED`,
`ABORTED_BEFORE_DISPATCH`, a coded-less error from a denial or a hook) prove nothing. The rule
assumes the loop's flush points (duraloop's, and dsh's checkpoint policy,
docs/store.md#coordination); a batch appended whole through `SessionStore.append` that holds both
sides of a boundary, and is damaged inside, reads as corruption, which is the safe side: nothing is
cut.

`TornTail` is what a repair cuts, as the repair report shows it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from duraloop.log import Event, last_turn_start, result_call_id
from duraloop.log import vocabulary as v

_RESPONSES = frozenset({v.ASSISTANT_CHUNK, v.ASSISTANT_MESSAGE})
_BEFORE_A_REQUEST = frozenset(
    {
        v.TURN_START,
        v.TURN_END,
        v.STEP_START,
        v.STEP_END,
        v.REQUEST_HEADER,
        v.REQUEST_CONTEXT,
        v.LLM_RETRY,
        v.LLM_RETRY_STARTED,
        v.TOOL_CALL,
        v.TOOL_RESULT,
        v.ASSISTANT_MESSAGE,
    }
)
"""Event types the loop never appends between a request's flush and its response's events.

(`agent/inbox/spliced` and unknown plugin events may be appended at any time, so they are
not here; neither is `assistant/chunk`, which belongs to the response itself.)"""
_MAX_LISTED_IDS = 10
_MAX_SHOWN_CHARS = 64
_NOT_DISPATCHED = frozenset({v.TOOL_OUTCOME_UNKNOWN, v.TOOL_NOT_STARTED, v.ABORTED_BEFORE_DISPATCH})


@dataclass(frozen=True, slots=True)
class TornTail:
    """What a torn tail holds, the part a repair cuts (D12).

    Args:
        size: its size: bytes (JSONL) or rows (SQLite).
        reason: why the readable prefix stops there (a torn fragment, the first bad line).
        event_counts: the events that still decode in it, by type (events of a torn zstd
            frame that are written again are not counted).
        unreadable_count: lines or rows in it that do not decode (a torn fragment included).
        dropped_call_ids: the call ids of its `tool/call` events, in log order.
    """

    size: int
    reason: str
    event_counts: dict[str, int] = field(default_factory=dict)
    unreadable_count: int = 0
    dropped_call_ids: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, size: int, reason: str, events: Iterable[Event], *, unreadable_count: int
    ) -> TornTail:
        """Summarize the decodable `events` of a tail of `size` bytes or rows.

        Returns:
            The tail, its events counted by type.
        """
        listed = list(events)
        counts = Counter(event.type for event in listed)
        calls = tuple(str(_field(event, "callId")) for event in listed if event.type == v.TOOL_CALL)
        return cls(size, reason, dict(sorted(counts.items())), unreadable_count, calls)

    def describe(self) -> str:
        r"""Return one line: the events cut by type, unreadable records, dropped call ids.

        Types and ids come from the damaged log, so each is shown escaped (control and
        non-ASCII characters as `\x..`/`\u....`) and cut to 64 characters; at most 10 ids
        are listed, then how many more there are.
        """
        parts = [f"{count} {_shown(kind)}" for kind, count in self.event_counts.items()]
        if self.unreadable_count:
            parts.append(f"{self.unreadable_count} unreadable")
        text = ", ".join(parts) if parts else "no readable event"
        if self.dropped_call_ids:
            shown = [_shown(call_id) for call_id in self.dropped_call_ids[:_MAX_LISTED_IDS]]
            more = len(self.dropped_call_ids) - len(shown)
            text += (
                "; dropped tool/call ids: "
                + ", ".join(shown)
                + (f" and {more} more" if more else "")
            )
        return text


def _shown(text: str) -> str:
    escaped = text.encode("unicode_escape").decode("ascii")
    return escaped if len(escaped) <= _MAX_SHOWN_CHARS else escaped[: _MAX_SHOWN_CHARS - 3] + "..."


def fsync_evidence(prefix: Sequence[Event], later: Sequence[Event]) -> str | None:
    """Return why the record right after `prefix` must have been fsynced, or None (D12).

    Args:
        prefix: the readable contiguous prefix (the damage comes right after it).
        later: the events that still decode after the damaged record, in log order.

    Returns:
        A sentence naming the later event that proves it, or None if a crash could have
        left the damage (then it is a torn tail).
    """
    if not later:
        return None
    open_steps, open_calls = _open_turn(prefix)
    boundary: Event | None = None
    for event in later:
        if event.type in _RESPONSES:
            if boundary is not None:
                return (
                    f"{event.type} at seq {event.seq} was written after the flush before its model "
                    f"request, which covered {boundary.type} at seq {boundary.seq}, after "
                    "the damage"
                )
            step = (_field(event, "turn"), _field(event, "step"))
            if step not in open_steps:
                return (
                    f"{event.type} at seq {event.seq} was written after the flush before its model "
                    f"request, which covered its step/start (turn {step[0]}, step {step[1]}), "
                    "which is not before the damage"
                )
        elif event.type == v.TOOL_RESULT and _dispatched(event):
            call_id = result_call_id(_field(event, "message"))
            if call_id not in open_calls:
                return (
                    f"the tool/result for call {call_id} at seq {event.seq} comes from a body that "
                    "ran only after its tool/call was fsynced, and that tool/call is not before "
                    "the damage"
                )
        if event.type in _BEFORE_A_REQUEST:
            boundary = boundary or event
    return None


def _open_turn(prefix: Sequence[Event]) -> tuple[set[tuple[Any, Any]], set[Any]]:
    """Return the (turn, step) of every `step/start`, and the `tool/call` ids, of the last turn."""
    steps: set[tuple[Any, Any]] = set()
    calls: set[Any] = set()
    start = last_turn_start(prefix)
    for index in range(0 if start is None else start + 1, len(prefix)):
        event = prefix[index]
        if event.type == v.STEP_START:
            steps.add((_field(event, "turn"), _field(event, "step")))
        elif event.type == v.TOOL_CALL:
            calls.add(_field(event, "callId"))
    return steps, calls


def _dispatched(result: Event) -> bool:
    """Whether a `tool/result` can only have come from a body that ran."""
    if result.surface_op != v.SURFACE_APPEND:
        return False
    message = _field(result, "message")
    content = message.get("content") if isinstance(message, dict) else None
    block = (
        content[0] if isinstance(content, list) and content and isinstance(content[0], dict) else {}
    )
    if block.get("isError") is False:
        return True
    error = _field(result, "error")
    code = error.get("code") if isinstance(error, dict) else None
    return isinstance(code, str) and code not in _NOT_DISPATCHED


def _field(event: Event, key: str) -> Any:
    return event.data.get(key) if isinstance(event.data, dict) else None
