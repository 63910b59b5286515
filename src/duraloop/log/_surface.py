"""The surface fold: which events are model-visible, in which order.

See docs/log.md#surface-and-derived-messages.

Each surface event joins by `append` (pushed to the end) or by `replace` (a positional range
of current nodes is spliced out and replaced by the new event). Validation is atomic:
`plan()` checks an event without changing anything; `apply()` commits a checked plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import EventRejectedError
from ._event import Event
from ._json import MAX_SAFE_INTEGER, is_safe_int
from .vocabulary import (
    ASSISTANT_MESSAGE,
    SURFACE_APPEND,
    SURFACE_REPLACE,
    SURFACE_TYPES,
    TOOL_RESULT,
)


@dataclass(frozen=True, slots=True)
class SurfacePlan:
    """A checked surface transition: append (`start_index` None) or a positional splice."""

    seq: int
    start_index: int | None = None
    end_index: int | None = None


class Surface:
    """The ordered list of surface node seqs, folded incrementally."""

    __slots__ = ("_nodes", "replace_generation")

    def __init__(self) -> None:
        self._nodes: list[int] = []
        self.replace_generation = 0

    @property
    def nodes(self) -> list[int]:
        """The current surface: seqs of model-visible events, in order (do not mutate)."""
        return self._nodes

    def restore(self, nodes: list[int], replace_generation: int) -> None:
        """Start from a snapshot's fold: `nodes` in order, after `replace_generation` replaces."""
        self._nodes = list(nodes)
        self.replace_generation = replace_generation

    def plan(self, event: Event, events: Sequence[Event]) -> SurfacePlan | None:
        """Check how `event` joins the surface; return None for a non-surface event.

        Args:
            event: the candidate event, with its final seq.
            events: the committed log before it.

        Raises:
            EventRejectedError: on any rule of docs/log.md#source-citations,
                #surface-and-derived-messages.
        """
        op = event.surface_op
        sources = event.source_event_seqs
        if event.type not in SURFACE_TYPES:
            if op is not None or sources is not None:
                raise EventRejectedError(
                    f'session event "{event.type}" is not surface-eligible and cannot carry '
                    "surfaceOp or sourceEventSeqs"
                )
            return None
        if op is None:
            raise EventRejectedError(
                f'session event "{event.type}" is surface-eligible and requires a surfaceOp marker'
            )
        _check_sources(event)
        if op == SURFACE_APPEND:
            return SurfacePlan(event.seq)
        if (
            not isinstance(op, dict)
            or op.get("op") != SURFACE_REPLACE
            or set(op) != {"op", "start", "end"}
        ):
            raise EventRejectedError(f"invalid surfaceOp {op!r} on seq {event.seq}")
        start, end = op["start"], op["end"]
        if not is_safe_int(start) or not is_safe_int(end):
            raise EventRejectedError(f"invalid replace surfaceOp {op!r} on seq {event.seq}")
        start_index = self._position(start, "start")
        end_index = self._position(end, "end")
        if start_index > end_index:
            raise EventRejectedError(
                f"replace start seq {start} (index {start_index}) is after end seq {end} "
                f"(index {end_index})"
            )
        shadowed = self._nodes[start_index : end_index + 1]
        cited = set(sources or ())
        missing = [seq for seq in shadowed if seq not in cited]
        if missing:
            raise EventRejectedError(
                "sourceEventSeqs must include every shadowed surface node; missing "
                + ", ".join(map(str, missing))
            )
        if event.type == TOOL_RESULT:
            _check_tool_result_rewrite(event, shadowed, events)
        return SurfacePlan(event.seq, start_index, end_index)

    def apply(self, plan: SurfacePlan) -> None:
        """Commit a plan returned by `plan()` for the event just committed."""
        if plan.start_index is None or plan.end_index is None:
            self._nodes.append(plan.seq)
            return
        self._nodes[plan.start_index : plan.end_index + 1] = [plan.seq]
        self.replace_generation += 1

    def _position(self, seq: int, which: str) -> int:
        try:
            return self._nodes.index(seq)
        except ValueError:
            raise EventRejectedError(f"replace {which} seq {seq} not found in surface") from None


_INT_ONLY = {int}


def _valid_sources(sources: list[Any], seq: int) -> bool:
    """Whether `sources` keeps every rule `_check_sources` loops over, checked in C.

    Distinct non-negative safe integers below `seq` (or empty); False sends the check to the
    loop, which names the first value that breaks a rule.
    """
    if not sources:
        return True
    if set(map(type, sources)) != _INT_ONLY or min(sources) < 0:
        return False
    top = max(sources)
    return top < seq and top <= MAX_SAFE_INTEGER and len(set(sources)) == len(sources)


def _check_sources(event: Event) -> None:
    sources = event.source_event_seqs
    if sources is None:
        return
    if not isinstance(sources, list):
        raise EventRejectedError(f"sourceEventSeqs on seq {event.seq} must be an array")
    if not sources and event.type != ASSISTANT_MESSAGE:
        raise EventRejectedError(
            f"sourceEventSeqs on seq {event.seq} must not be empty except on assistant/message"
        )
    if _valid_sources(sources, event.seq):
        return
    seen: set[int] = set()
    for value in sources:
        if not is_safe_int(value):
            raise EventRejectedError(
                f"sourceEventSeqs on seq {event.seq} must be non-negative safe integers, "
                f"got {value!r}"
            )
        if value in seen:
            raise EventRejectedError(f"sourceEventSeqs on seq {event.seq} has duplicates ({value})")
        if value >= event.seq:
            raise EventRejectedError(
                f"sourceEventSeqs on seq {event.seq} must reference earlier events, got {value}"
            )
        seen.add(value)


def _strip_result_content(data: Any) -> Any:
    if not isinstance(data, dict):
        return data
    copy = dict(data)
    message = copy.get("message")
    if isinstance(message, dict):
        message = dict(message)
        content = message.get("content")
        if isinstance(content, list) and content and isinstance(content[0], dict):
            first = dict(content[0])
            first.pop("content", None)
            message["content"] = [first, *content[1:]]
        copy["message"] = message
    return copy


def _check_tool_result_rewrite(event: Event, shadowed: list[int], events: Sequence[Event]) -> None:
    if len(shadowed) != 1:
        raise EventRejectedError("a tool/result replacement must rewrite exactly one current node")
    target = events[shadowed[0]]
    if target.type != TOOL_RESULT:
        raise EventRejectedError("a tool/result replacement must target a current tool/result")
    if _strip_result_content(target.data) != _strip_result_content(event.data):
        raise EventRejectedError("a tool/result replacement may change only content")
