"""The relational invariant checker: turn, step and tool relations (docs/log.md#invariants).

The checker folds events one at a time. `check()` raises for a violating event without
changing state; `commit()` advances the state for an accepted event. Explicitly allowed: a
`tool/call` left unanswered at `step/end`, and a `TOOL_NOT_STARTED` recovery result with no
`tool/call` in its step, but only for a call its step's assistant message requested and that
is still unanswered (the shared pending-call tracker says which); any other result without a
`tool/call` is an orphan and refused. The compaction brackets' rules are a part of the same
fold (`CompactionInvariants`, `_compaction_invariants.py`), so every log a `Session` checks
gets them.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import InvariantError
from ._compaction_invariants import WATCHED, CompactionInvariants
from ._event import Event
from ._messages import result_call_id
from ._pending import PendingToolCalls, UnansweredStep
from .vocabulary import (
    APPROVAL_ASKED,
    APPROVAL_DECIDED,
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    SURFACE_APPEND,
    TODO_WRITE,
    TOOL_CALL,
    TOOL_NOT_STARTED,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
)

_STEP_SCOPED = frozenset({ASSISTANT_CHUNK, ASSISTANT_MESSAGE, TOOL_CALL})
_TURN_SCOPED = frozenset(
    {TODO_WRITE, REQUEST_HEADER, REQUEST_CONTEXT, APPROVAL_ASKED, APPROVAL_DECIDED}
)
"""Events only an open turn may hold (dsh's rule for approvals too, docs/approvals.md)."""


class InvariantChecker:
    """Check turn/step/tool relations of a log, event by event."""

    __slots__ = (
        "compaction",
        "inexact_numbers",
        "last_seq",
        "next_step",
        "next_turn",
        "open_step",
        "open_turn",
        "pending_calls",
        "requested",
        "unanswered",
    )

    def __init__(self) -> None:
        self.last_seq = -1
        self.open_turn: int | None = None
        self.open_step: int | None = None
        self.next_turn = 1
        self.next_step = 1
        self.pending_calls: set[object] = set()
        self.requested = PendingToolCalls()
        self.unanswered: list[UnansweredStep] = []
        """The steps closed with calls unanswered, as `scan_turns` finds them (law 4)."""
        self.inexact_numbers = False
        """Whether a `turn/start` or `step/start` number was equal to, not an `int` (1.0)."""
        self.compaction = CompactionInvariants()
        """The compaction brackets' part of the fold (its `open` bracket, or None)."""

    def check_all(self, events: Iterable[Event]) -> None:
        """Check and commit each event in order.

        Raises:
            InvariantError: at the first violating event, naming its seq.
        """
        for event in events:
            self.check(event)
            self.commit(event)

    def check(self, event: Event) -> None:
        """Raise if `event` would violate an invariant; change nothing.

        Raises:
            InvariantError: with dsh's wording (e.g. "turn/start 2 while turn 1 is still open").
        """
        if event.seq <= self.last_seq:
            self._fail(event, "seq must strictly increase")
        kind = event.type
        data = event.data if isinstance(event.data, dict) else {}
        if kind == TURN_START:
            turn = data.get("turn")
            if self.open_turn is not None:
                self._fail(event, f"turn/start {turn} while turn {self.open_turn} is still open")
            if turn != self.next_turn:
                self._fail(event, f"turn/start expected turn {self.next_turn}, got {turn}")
        elif kind == TURN_END:
            turn = data.get("turn")
            if self.open_turn is None or turn != self.open_turn:
                self._fail(event, f"turn/end {turn} does not match open turn {self.open_turn}")
            if self.open_step is not None:
                self._fail(event, f"turn/end {turn} while step {self.open_step} is still open")
        elif kind == STEP_START:
            turn, step = data.get("turn"), data.get("step")
            if self.open_turn is None or turn != self.open_turn:
                self._fail(event, f"step/start names turn {turn} but open turn is {self.open_turn}")
            if self.open_step is not None:
                self._fail(event, f"step/start {step} while step {self.open_step} is still open")
            if step != self.next_step:
                self._fail(
                    event, f"step/start expected step {self.next_step} in turn {turn}, got {step}"
                )
        elif kind == STEP_END or kind in _STEP_SCOPED:
            self._require_step(event, data)
        elif kind == TOOL_RESULT:
            self._check_tool_result(event, data)
        elif kind in _TURN_SCOPED and self.open_turn is None:
            self._fail(event, f"{kind} appended outside any open turn")
        if kind in WATCHED:
            self.compaction.check(event, self.open_turn)

    def commit(self, event: Event) -> None:
        """Advance the state for an event that passed `check()`."""
        self.last_seq = event.seq
        kind = event.type
        requested = self.requested
        if len(requested) and (kind == STEP_END or kind == TURN_END):
            calls = tuple(requested.pending())
            self.unanswered.append(UnansweredStep(self.open_turn, calls[0].step, event.seq, calls))
        requested.observe(event)
        if kind in WATCHED:
            self.compaction.commit(event)
        data = event.data if isinstance(event.data, dict) else {}
        if kind == TURN_START:
            self.inexact_numbers |= type(data.get("turn")) is not int
            self.open_turn = data.get("turn")
            self.open_step = None
            self.next_step = 1
            self.pending_calls.clear()
        elif kind == TURN_END:
            self.open_turn = None
            self.next_turn += 1
        elif kind == STEP_START:
            self.inexact_numbers |= type(data.get("step")) is not int
            self.open_step = data.get("step")
        elif kind == STEP_END:
            self.open_step = None
            self.next_step += 1
            self.pending_calls.clear()
        elif kind == TOOL_CALL:
            self.pending_calls.add(data.get("callId"))
        elif kind == TOOL_RESULT and event.surface_op == SURFACE_APPEND:
            self.pending_calls.discard(result_call_id(data.get("message")))

    def _require_step(self, event: Event, data: dict[str, object]) -> None:
        turn, step = data.get("turn"), data.get("step")
        if self.open_step is None or turn != self.open_turn or step != self.open_step:
            self._fail(
                event,
                f"{event.type} names turn {turn}/step {step} but open is "
                f"turn {self.open_turn}/step {_text(self.open_step)}",
            )

    def _check_tool_result(self, event: Event, data: dict[str, object]) -> None:
        if event.surface_op != SURFACE_APPEND:
            if self.open_turn is None:
                self._fail(event, "tool/result surface replacement appended outside any open turn")
            return
        self._require_step(event, data)
        call_id = result_call_id(data.get("message"))
        if call_id in self.pending_calls:
            return
        error = data.get("error")
        not_started = isinstance(error, dict) and error.get("code") == TOOL_NOT_STARTED
        if not_started and _is_error(data) and call_id in self.requested:
            return
        orphan = " and answers no unanswered tool call of its step" if not_started else ""
        self._fail(
            event, f'tool/result for "{call_id}" has no prior tool/call in this step{orphan}'
        )

    def _fail(self, event: Event, detail: str) -> None:
        raise InvariantError(f"invariant violated at seq {event.seq}: {detail}")


def _text(value: object) -> str:
    return "null" if value is None else str(value)


def _is_error(data: dict[str, object]) -> bool:
    message = data.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    first = content[0] if isinstance(content, list) and content else None
    return isinstance(first, dict) and first.get("isError") is True
