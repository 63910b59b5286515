"""The lines of approval events in a transcript or a live stream, and the calls that never ran.

Every value comes from the log (untrusted): each goes through `ident` or `styled`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text

from ..log.vocabulary import (
    APPROVAL_ALLOWED_ONCE,
    APPROVAL_ASKED,
    APPROVAL_CANCELLED,
    APPROVAL_DECIDED,
    APPROVAL_POLICY,
    STEP_END,
    TOOL_CALL,
)
from ._render import MAX_NAME_CHARS, ident, short_text, styled

if TYPE_CHECKING:
    from ..log import Event

MAX_REASON_CHARS = 300
"""Most characters of an ask's reason or a rejection's feedback shown on one line."""


class ApprovalLines:
    """The lines of `approval/*` events (transcript and live); a decision names its call."""

    def __init__(self) -> None:
        self._calls: dict[str, tuple[str, str]] = {}  # ask id -> (call id, tool name)

    def line(self, kind: str, data: dict[str, Any]) -> Text:
        """Return the line of one `approval/asked`, `approval/decided` or `approval/policy`."""
        if kind == APPROVAL_POLICY:
            return styled(
                (f"── approval policy: {ident(data.get('policy'), MAX_NAME_CHARS)}", "dim")
            )
        if kind == APPROVAL_ASKED:
            call = (str(data.get("callId")), str(data.get("toolName")))
            self._calls[str(data.get("id"))] = call
            reason = short_text(str(data.get("reason") or "-"), MAX_REASON_CHARS)
            return styled(
                ("  ? ", "yellow"),
                f"{ident(call[1], MAX_NAME_CHARS)} ({ident(call[0], MAX_NAME_CHARS)}) asks for "
                f"approval: {reason}",
            )
        asked = self._calls.get(str(data.get("id")))  # None: asked before this renderer saw
        feedback = data.get("feedback")
        told = f": {short_text(str(feedback), MAX_REASON_CHARS)}" if feedback else ""
        called = (
            ""
            if asked is None
            else f" for {ident(asked[1], MAX_NAME_CHARS)} ({ident(asked[0], MAX_NAME_CHARS)})"
        )
        outcome = ident(data.get("outcome"), MAX_NAME_CHARS)
        return styled(("  ! ", "yellow"), f"approval {outcome}{called}{told}")


class NotRunCalls:
    """Tell which `tool/call` of a live turn is answered without its body running.

    A call whose ask is decided other than `allowed-once` (rejected, unavailable) gets its
    `tool/call` and an error result, and its body never runs; after a `cancelled` decision
    every call of the step recorded from then on is answered unrun too
    (`ABORTED_BEFORE_DISPATCH`). Feed it every event in order (the renderer and the
    status line each keep one).
    """

    def __init__(self) -> None:
        self._asks: dict[str, str] = {}  # ask id -> call id
        self._not_run: dict[str, str] = {}  # call id -> outcome
        self._cancelled = False

    def feed(self, event: Event) -> str | None:
        """Count `event`; for the `tool/call` of a call that does not run, return the outcome."""
        data = event.data if isinstance(event.data, dict) else {}
        kind = event.type
        if kind == APPROVAL_ASKED:
            self._asks[str(data.get("id"))] = str(data.get("callId"))
        elif kind == APPROVAL_DECIDED:
            outcome = str(data.get("outcome"))
            call_id = self._asks.get(str(data.get("id")))
            if outcome == APPROVAL_CANCELLED:
                self._cancelled = True
            elif outcome != APPROVAL_ALLOWED_ONCE and call_id is not None:
                self._not_run[call_id] = outcome
        elif kind == STEP_END:
            self._cancelled = False
        elif kind == TOOL_CALL:
            call_id = str(data.get("callId"))
            if self._cancelled:
                return APPROVAL_CANCELLED
            return self._not_run.pop(call_id, None)
        return None
