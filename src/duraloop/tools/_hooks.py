"""Pre- and post-execute hooks around every tool call.

See docs/scheduler.md#pipeline-stages, simplified.

A pre-execute hook sees each call in model order before its body may run (and before its
`tool/call` is recorded) and can deny it or ask a person to approve it.
A post-execute hook sees each outcome in model order and can replace it. Hooks are
awaited inline by the scheduler; they may be sync or async.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ._definition import Tool
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


@dataclass(frozen=True)
class AskApproval:
    """A pre-execute decision asking a person to approve one call before it runs.

    The call waits, with no `tool/call` yet, until the session's approval policy or a person
    answers (docs/approvals.md#which-calls-ask). Later hooks are not run; an approved call
    is dispatched without running the hooks again.

    Args:
        reason: why approval is needed, shown to the person (and recorded in
            `approval/asked`).
    """

    reason: str = ""


PreExecuteHook: TypeAlias = Callable[
    [ToolCallRequest], "Deny | AskApproval | None | Awaitable[Deny | AskApproval | None]"
]
"""`(call) -> Deny | AskApproval | None`, sync or async; None allows the call."""

PostExecuteHook: TypeAlias = Callable[
    [ToolCallRequest, ToolOutcome], "ToolOutcome | None | Awaitable[ToolOutcome | None]"
]
"""`(call, outcome) -> ToolOutcome | None`, sync or async; None keeps the outcome."""


@dataclass
class ToolHooks:
    """The hooks a `ToolPipeline` runs, each list in order.

    Args:
        pre_execute: run before each call's `tool/call`, in model order; the first `Deny` or
            `AskApproval` wins and later hooks are skipped.
            A raising hook fails the call with a final result that bypasses post-execute.
        post_execute: run on each outcome; each may return a replacement. A raising hook
            replaces the outcome with `Error: <message>` and stops the chain.
    """

    pre_execute: list[PreExecuteHook] = field(default_factory=list)
    post_execute: list[PostExecuteHook] = field(default_factory=list)


def tool_asks(found: Tool | None, arguments: Any) -> str | None:
    """Return why `found`'s `requires_approval` makes a call ask, or None when it does not.

    Fail closed: a classifier that raises or returns anything but a bool asks.

    Args:
        found: the called tool (None for an unknown tool: it never asks, its call fails).
        arguments: the call's parsed JSON arguments.

    Returns:
        The ask's reason, or None.
    """
    if found is None or found.requires_approval is False:
        return None
    rule = found.requires_approval
    if rule is True:
        return f'tool "{found.name}" requires approval'
    try:
        verdict = rule(found.validator(arguments))
    except Exception as exc:  # noqa: BLE001 - a failing rule asks (fail closed)
        return f'tool "{found.name}" requires approval (its rule raised {type(exc).__name__})'
    if verdict is False:
        return None
    return f'tool "{found.name}" requires approval'
