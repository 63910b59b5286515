"""The set of built-in tools."""

from __future__ import annotations

from ._bash_tool import bash
from ._definition import Tool
from ._fs_tools import file_tools


def builtin_tools() -> list[Tool]:
    """Return the six built-in tools, each confined to `ToolContext.cwd`.

    Returns:
        `[read_file, list_dir, grep, write_file, edit_file, bash]`; the first three are
        parallel-safe and, being read-only, idempotent (a `TOOL_OUTCOME_UNKNOWN` call of
        theirs may be re-run by `duraloop resume --retry-unknown`,
        docs/recovery.md#re-running-outcome-unknown-calls); the others are exclusive and
        not idempotent.
    """
    return [*file_tools(), bash]
