"""The status line of `duraloop chat`: step, running tools and tokens, printed on changes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console

from ..log import result_call_id
from ..log.vocabulary import (
    ASSISTANT_MESSAGE,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
)
from ._approval_lines import NotRunCalls
from ._render import safe

if TYPE_CHECKING:
    from ..log import Event


class StatusLine:
    """Print `[running · step 2 · 1 tool running · 1,234 tokens]` on changes (an observer).

    Args:
        errors: where the status goes (stderr).
    """

    def __init__(self, errors: Console, history: Sequence[Event] = ()) -> None:
        self.errors = errors
        self.state = "idle"
        self.step = 0
        self.running_tools: set[str] = set()
        self.tokens = 0
        self._not_run = NotRunCalls()  # a call answered unrun (rejected) is never running
        for event in history:  # a resumed chat counts on from the session's earlier turns
            self._not_run.feed(event)
            if event.type == ASSISTANT_MESSAGE:
                self.tokens += _usage_tokens(event)

    def text(self) -> str:
        """Return the current status line."""
        parts = [self.state]
        if self.state != "idle":
            parts.append(f"step {self.step}")
            count = len(self.running_tools)
            parts.append(f"{count} tool{'' if count == 1 else 's'} running")
        parts.append(f"{self.tokens:,} tokens")
        return "[" + " · ".join(parts) + "]"

    def show(self) -> None:
        """Print the status line now."""
        self.errors.print(safe(self.text(), "dim"))

    def __call__(self, event: Event) -> None:
        """Update from one committed event; print when the step, tools or turn changed."""
        data: dict[str, Any] = event.data if isinstance(event.data, dict) else {}
        kind = event.type
        unrun = self._not_run.feed(event)
        if kind == TURN_START:
            self.state, self.step = "running", 0
            self.running_tools.clear()
        elif kind == STEP_START:
            self.step = int(data.get("step", self.step + 1))
            self.show()
        elif kind == ASSISTANT_MESSAGE:
            self.tokens += _usage_tokens(event)
        elif kind == TOOL_CALL and unrun is None:
            self.running_tools.add(str(data.get("callId")))
            self.show()
        elif kind == TOOL_RESULT:
            call_id = str(result_call_id(data.get("message", {})))
            if call_id in self.running_tools:
                self.running_tools.discard(call_id)
                self.show()
        elif kind == TURN_END:
            self.state = "idle"
            self.running_tools.clear()
            self.show()


def _usage_tokens(event: Event) -> int:
    """Return the input plus output tokens an `assistant/message` reports (0 without usage)."""
    usage = event.data.get("usage") if isinstance(event.data, dict) else None
    if not isinstance(usage, dict):
        return 0
    counts = (usage.get("inputTokens"), usage.get("outputTokens"))
    return sum(count for count in counts if isinstance(count, int))
