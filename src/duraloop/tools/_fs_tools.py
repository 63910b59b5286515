"""Built-in file tools, confined to the session workspace (`ToolContext.cwd`).

`read_file`, `list_dir` and `grep` only read, so they are parallel-safe; `write_file` and
`edit_file` change files, so they are exclusive. Every path goes through
`resolve_in_workspace`. Outputs are capped in bytes and say so when they are cut.
"""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path
from typing import Annotated, Final

from pydantic import Field

from ..errors import ToolError
from ._context import ToolContext
from ._definition import Tool, tool
from ._workspace import (
    FS_AMBIGUOUS_EDIT,
    FS_EDIT_NOT_FOUND,
    FS_NOT_A_DIRECTORY,
    FS_NOT_A_FILE,
    FS_NOT_FOUND,
    FS_NOT_TEXT,
    GREP_INVALID_PATTERN,
    display_path,
    raise_os_error,
    resolve_in_workspace,
    truncate_utf8,
)

MAX_OUTPUT_BYTES: Final = 256 * 1024
"""The cap on what one file tool returns, in bytes."""

MAX_LIST_ENTRIES: Final = 1000
MAX_GREP_MATCHES: Final = 500
_SKIPPED_DIRS: Final = frozenset({".git"})


@tool(parallel=True)
def read_file(
    path: str,
    ctx: ToolContext,
    start_line: Annotated[int, Field(ge=1)] = 1,
    max_lines: Annotated[int | None, Field(ge=1)] = None,
) -> str:
    """Read a UTF-8 text file in the workspace.

    Args:
        path: the file, relative to the workspace.
        start_line: the 1-based line to start from.
        max_lines: how many lines to return at most; all remaining lines when omitted.
        ctx: injected; `ctx.cwd` is the workspace every path is confined to.

    Returns:
        The lines, as they are in the file; a final `[truncated: ...]` note names the
        `start_line` to read on from when the output cap is reached.

    Raises:
        ToolError: `PATH_OUTSIDE_WORKSPACE` for a path outside the workspace; `FS_NOT_FOUND`, `FS_NOT_A_FILE`, `FS_NOT_TEXT`,
            `FS_PERMISSION_DENIED` or `FS_IO_ERROR` when the file cannot be read as text.
    """
    resolved = resolve_in_workspace(ctx.cwd, path)
    if resolved.is_dir():
        raise ToolError(f"{path} is a directory; use list_dir", code=FS_NOT_A_FILE)
    kept: list[str] = []
    kept_bytes = 0
    truncated = False
    try:
        with resolved.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if number < start_line:
                    continue
                if max_lines is not None and len(kept) >= max_lines:
                    break
                kept_bytes += len(line.encode("utf-8"))
                if kept_bytes > MAX_OUTPUT_BYTES:
                    truncated = True
                    break
                kept.append(line)
    except UnicodeDecodeError as exc:
        raise ToolError(f"{path} is not UTF-8 text", code=FS_NOT_TEXT) from exc
    except OSError as exc:
        raise_os_error(exc, path)
    text = "".join(kept)
    if truncated:
        next_line = start_line + len(kept)
        text += (
            f"\n[truncated: output exceeds {MAX_OUTPUT_BYTES} bytes; "
            f"read on with start_line={next_line}]"
        )
    return text


@tool(parallel=True)
def list_dir(ctx: ToolContext, path: str = ".") -> str:
    """List a directory in the workspace; directories end with `/`.

    Args:
        path: the directory, relative to the workspace.
        ctx: injected; `ctx.cwd` is the workspace every path is confined to.

    Returns:
        One entry name a line, sorted, directories ending with `/`.

    Raises:
        ToolError: `PATH_OUTSIDE_WORKSPACE` for a path outside the workspace; `FS_NOT_FOUND`, `FS_NOT_A_DIRECTORY`,
            `FS_PERMISSION_DENIED` or `FS_IO_ERROR` when the directory cannot be listed.
    """
    resolved = resolve_in_workspace(ctx.cwd, path)
    try:
        entries = sorted(os.scandir(resolved), key=lambda entry: entry.name)
    except NotADirectoryError as exc:
        raise ToolError(f"{path} is not a directory", code=FS_NOT_A_DIRECTORY) from exc
    except OSError as exc:
        raise_os_error(exc, path)
    if not entries:
        return f"{path}: empty directory"
    names = [
        f"{entry.name}/" if entry.is_dir(follow_symlinks=False) else entry.name
        for entry in entries[:MAX_LIST_ENTRIES]
    ]
    if len(entries) > MAX_LIST_ENTRIES:
        names.append(f"[truncated: {len(entries) - MAX_LIST_ENTRIES} more entries]")
    text, cut = truncate_utf8("\n".join(names), MAX_OUTPUT_BYTES)
    return text + ("\n[truncated]" if cut else "")


@tool(parallel=True)
def grep(ctx: ToolContext, pattern: str, path: str = ".", glob: str | None = None) -> str:
    """Search files in the workspace for a regular expression; prints `file:line:text`.

    `.git` directories, symlinks and files that are not UTF-8 text are skipped.

    Args:
        pattern: a Python regular expression.
        path: the file or directory to search, relative to the workspace.
        glob: only search files whose name or relative path matches this pattern (`*.py`).
        ctx: injected; `ctx.cwd` is the workspace every path is confined to.

    Returns:
        `file:line:text` lines, `no matches`, and notes on skipped files or the match cap.

    Raises:
        ToolError: `PATH_OUTSIDE_WORKSPACE` for a path outside the workspace; `GREP_INVALID_PATTERN` for a bad regular
            expression; `FS_NOT_FOUND` when `path` does not exist.
    """
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"invalid pattern {pattern!r}: {exc}", code=GREP_INVALID_PATTERN) from exc
    root = resolve_in_workspace(ctx.cwd, path)
    if not root.exists():
        raise ToolError(f"{path}: no such file or directory", code=FS_NOT_FOUND)
    matches: list[str] = []
    skipped = 0
    for file in _walk_files(root):
        shown = display_path(ctx.cwd, file)
        if glob is not None and not (
            fnmatch.fnmatch(file.name, glob) or fnmatch.fnmatch(shown, glob)
        ):
            continue
        found: list[str] = []
        try:
            with file.open(encoding="utf-8") as handle:
                for number, line in enumerate(handle, start=1):
                    if regex.search(line):
                        found.append(f"{shown}:{number}:{line.rstrip()}")
        except (UnicodeDecodeError, OSError):
            skipped += 1  # not text or unreadable: counted in the summary line below
            continue
        matches.extend(found)
        if len(matches) >= MAX_GREP_MATCHES:
            break
    lines = matches[:MAX_GREP_MATCHES] or ["no matches"]
    if len(matches) >= MAX_GREP_MATCHES:
        lines.append(f"[stopped after {MAX_GREP_MATCHES} matches]")
    if skipped:
        lines.append(f"[skipped {skipped} unreadable or non-text files]")
    text, cut = truncate_utf8("\n".join(lines), MAX_OUTPUT_BYTES)
    return text + ("\n[truncated]" if cut else "")


def _walk_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    found: list[Path] = []
    for directory, subdirs, files in os.walk(root, followlinks=False):
        subdirs[:] = sorted(d for d in subdirs if d not in _SKIPPED_DIRS)
        base = Path(directory)
        found.extend(base / name for name in sorted(files) if not (base / name).is_symlink())
    return found


@tool
def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Write a UTF-8 text file in the workspace, creating parent directories.

    Args:
        path: the file, relative to the workspace; replaced if it exists.
        content: the full new content.
        ctx: injected; `ctx.cwd` is the workspace every path is confined to.

    Returns:
        `wrote <n> bytes to <path>`.

    Raises:
        ToolError: `PATH_OUTSIDE_WORKSPACE` for a path outside the workspace; `FS_NOT_A_FILE` for a directory;
            `FS_PERMISSION_DENIED` or `FS_IO_ERROR` when the write fails.
    """
    resolved = resolve_in_workspace(ctx.cwd, path)
    if resolved.is_dir():
        shown = display_path(ctx.cwd, resolved)
        raise ToolError(
            f"path {path!r} names the directory {shown}, not a file; give the path of a file",
            code=FS_NOT_A_FILE,
        )
    data = content.encode("utf-8")
    try:
        resolved.parent.mkdir(parents=True, exist_ok=True)
        resolved.write_bytes(data)
    except OSError as exc:
        raise_os_error(exc, path)
    return f"wrote {len(data)} bytes to {display_path(ctx.cwd, resolved)}"


@tool
def edit_file(
    ctx: ToolContext,
    path: str,
    old: Annotated[str, Field(min_length=1)],
    new: str,
) -> str:
    """Replace exactly one occurrence of `old` with `new` in a workspace file.

    Args:
        path: the file, relative to the workspace.
        old: the exact text to replace; it must occur exactly once.
        new: the replacement text.
        ctx: injected; `ctx.cwd` is the workspace every path is confined to.

    Returns:
        `edited <path>`.

    Raises:
        ToolError: `PATH_OUTSIDE_WORKSPACE` for a path outside the workspace; `FS_EDIT_NOT_FOUND` when `old` does not
            occur; `FS_AMBIGUOUS_EDIT` when it occurs more than once; `FS_NOT_FOUND`,
            `FS_NOT_TEXT`, `FS_PERMISSION_DENIED` or `FS_IO_ERROR` when the file cannot be
            read or written.
    """
    resolved = resolve_in_workspace(ctx.cwd, path)
    try:
        text = resolved.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(f"{path} is not UTF-8 text", code=FS_NOT_TEXT) from exc
    except OSError as exc:
        raise_os_error(exc, path)
    count = text.count(old)
    if count == 0:
        raise ToolError(
            f"the text to replace was not found in {path}; read the file and copy it exactly",
            code=FS_EDIT_NOT_FOUND,
        )
    if count > 1:
        raise ToolError(
            f"the text to replace occurs {count} times in {path}; include more context so "
            "it occurs exactly once",
            code=FS_AMBIGUOUS_EDIT,
        )
    try:
        resolved.write_text(text.replace(old, new, 1), encoding="utf-8")
    except OSError as exc:
        raise_os_error(exc, path)
    return f"edited {display_path(ctx.cwd, resolved)}"


def file_tools() -> list[Tool]:
    """Return the five built-in file tools.

    Returns:
        `[read_file, list_dir, grep, write_file, edit_file]`.
    """
    return [read_file, list_dir, grep, write_file, edit_file]
