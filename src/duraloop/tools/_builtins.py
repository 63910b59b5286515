"""The set of built-in tools."""

from __future__ import annotations

from ._bash_tool import bash
from ._definition import Tool
from ._fs_tools import file_tools


def builtin_tools() -> list[Tool]:
    """Return the six built-in tools, each confined to `ToolContext.cwd`.

    Returns:
        `[read_file, list_dir, grep, write_file, edit_file, bash]`; the first three are
        parallel-safe, the others exclusive.
    """
    return [*file_tools(), bash]
