"""Pre- and post-execute hooks around every tool call.

See docs/scheduler.md#pipeline-stages, simplified.

A pre-execute hook sees each call in model order before its body may run and can deny it.
A post-execute hook sees each outcome in model order and can replace it. Hooks are
awaited inline by the scheduler; they may be sync or async.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeAlias

from ._outcome import ToolOutcome
from ._request import ToolCallRequest


@dataclass(frozen=True)
class Deny:
    """A pre-execute decision refusing one call; the model sees `Error: <reason>`.

    A denial carries no error code (docs/scheduler.md#pipeline-stages).

    Args:
        reason: why the call was refused, shown to the model.
    """

    reason: str


PreExecuteHook: TypeAlias = Callable[[ToolCallRequest], "Deny | None | Awaitable[Deny | None]"]
"""`(call) -> Deny | None`, sync or async; None allows the call."""

PostExecuteHook: TypeAlias = Callable[
    [ToolCallRequest, ToolOutcome], "ToolOutcome | None | Awaitable[ToolOutcome | None]"
]
"""`(call, outcome) -> ToolOutcome | None`, sync or async; None keeps the outcome."""


@dataclass
class ToolHooks:
    """The hooks a `ToolPipeline` runs, each list in order.

    Args:
        pre_execute: run before dispatch; the first `Deny` wins and later hooks are skipped.
            A raising hook fails the call with a final result that bypasses post-execute.
        post_execute: run on each outcome; each may return a replacement. A raising hook
            replaces the outcome with `Error: <message>` and stops the chain.
    """

    pre_execute: list[PreExecuteHook] = field(default_factory=list)
    post_execute: list[PostExecuteHook] = field(default_factory=list)
