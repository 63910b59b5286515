"""The built-in system prompt."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def default_system_prompt(cwd: Path, tool_names: Sequence[str]) -> str:
    """Return a short system prompt naming the workspace and the tools.

    Args:
        cwd: the session's working directory.
        tool_names: the registered tool names, in registration order.

    Returns:
        The prompt text.
    """
    tools = ", ".join(tool_names) if tool_names else "none"
    return (
        "You are a careful software agent. You work inside the workspace directory "
        f"{cwd}; all paths are relative to it and you cannot leave it. "
        f"Tools available: {tools}. Call several read-only tools at once when you can. "
        "When a tool result says its outcome is unknown, verify before repeating side effects. "
        "Answer briefly when the task is done."
    )
