"""How a turn ended: `TurnResult` (docs/loop.md#turns)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..log import PendingApproval, Usage


@dataclass(frozen=True)
class TurnResult:
    """How a turn ended.

    Args:
        turn: the turn number.
        reason: the `turn/end` reason JSON, e.g. `{"kind": "completed"}`.
        text: the text of the turn's last assistant message ("" if none).
        steps: the number of steps the turn ran.
        error: for an `error` turn, the original exception (already recorded in the log);
            `run_turn()` raises it, a background drain reports it here.
        usage: what the turn spent: model requests, tokens, tool calls, cost
            (docs/loop.md#budgets).
        approval: for a `paused` turn, the ask it waits on (docs/approvals.md#pausing).
    """

    turn: int
    reason: dict[str, Any]
    text: str
    steps: int
    error: BaseException | None = field(default=None, compare=False, repr=False)
    usage: Usage = field(default_factory=Usage)
    approval: PendingApproval | None = None

    @property
    def kind(self) -> str:
        """The reason kind: completed, aborted, blocked, error, max-tokens, or paused.

        `paused` is never written to the log: the turn stays open, waiting for approval.
        """
        return str(self.reason.get("kind"))
