"""Plain words for the recovery and abort codes a timeline marks (docs/view.md#recovery)."""

from __future__ import annotations

from typing import Final

from duraloop.log import vocabulary as v

EXPLANATIONS: Final[dict[str, str]] = {
    v.TOOL_OUTCOME_UNKNOWN: (
        "The call was recorded as started, but no result was: it may or may not have run. "
        "duraloop never re-runs it by itself."
    ),
    v.TOOL_NOT_STARTED: (
        "The call was never recorded as started (the step failed or the process stopped "
        "first), so it never ran. It is safe to run it again."
    ),
    v.ABORTED_BEFORE_DISPATCH: (
        "The turn was cancelled before this call was started, so it never ran."
    ),
    v.ABORTED: (
        "The turn was cancelled while this call ran: it was interrupted (or its effects "
        "happened and the result says so)."
    ),
    v.TOOL_TIMEOUT: "The call ran past its declared timeout and was stopped.",
    v.UNKNOWN_TOOL: "The model called a tool that does not exist; it got an error result.",
    v.INVALID_ARGS: "The model's arguments did not match the tool's schema; it never ran.",
}
"""Code -> what it means for the person reading the timeline (a fixed table)."""

RECOVERY_CODES: Final = frozenset({v.TOOL_OUTCOME_UNKNOWN, v.TOOL_NOT_STARTED})
"""The codes of results crash repair writes (docs/recovery.md#crash-tail-repair)."""


def explanation(code: str | None) -> str | None:
    """Return the plain-words explanation of a result code, or None for other codes."""
    return None if code is None else EXPLANATIONS.get(code)
