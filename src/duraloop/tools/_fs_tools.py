"""Built-in file tools, confined to the session workspace (`ToolContext.cwd`).

`read_file`, `list_dir` and `grep` only read, so they are parallel-safe; `write_file` and
`edit_file` change files, so they are exclusive. Every path is opened through
`open_in_workspace` (component by component from a descriptor of the workspace, no symlink
followed out of it); only regular files with one link are read or written, and nothing
blocks on a FIFO or device. Outputs are capped in bytes and say so when they are cut.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Callable, Iterator
from typing import Annotated, Final

from pydantic import Field

from ..errors import ToolError
from ..log.vocabulary import FS_AMBIGUOUS_EDIT, FS_EDIT_NOT_FOUND, FS_NOT_TEXT, GREP_INVALID_PATTERN
from ._context import ToolContext
from ._definition import Tool, tool
from ._fsopen import Opened, open_in_workspace
from ._fstree import TreeSkips, walk_regular_files
from ._workspace import raise_os_error, truncate_utf8

MAX_OUTPUT_BYTES: Final = 256 * 1024
"""The cap on what one file tool returns, in bytes."""

MAX_LIST_ENTRIES: Final = 1000
MAX_GREP_MATCHES: Final = 500
_SKIPPED_DIRS: Final = frozenset({".git"})


@tool(parallel=True, idempotent=True)
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
        ToolError: `PATH_OUTSIDE_WORKSPACE` or `PATH_INVALID` for a path that cannot be
            used; `FS_NOT_A_FILE` for a directory, FIFO, socket or device; `FS_HARD_LINK`
            for a file with more than one link; `FS_NOT_FOUND`, `FS_NOT_TEXT`,
            `FS_PERMISSION_DENIED` or `FS_IO_ERROR` when the file cannot be read as text.
    """
    kept: list[str] = []
    kept_bytes = 0
    truncated = False
    with open_in_workspace(ctx.cwd, path, "read") as opened:
        try:
            with os.fdopen(os.dup(opened.fd), encoding="utf-8") as handle:
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


@tool(parallel=True, idempotent=True)
def list_dir(ctx: ToolContext, path: str = ".") -> str:
    """List a directory in the workspace; directories end with `/`.

    Args:
        path: the directory, relative to the workspace.
        ctx: injected; `ctx.cwd` is the workspace every path is confined to.

    Returns:
        One entry name a line, sorted, directories ending with `/`.

    Raises:
        ToolError: `PATH_OUTSIDE_WORKSPACE` or `PATH_INVALID` for a path that cannot be
            used; `FS_NOT_FOUND`, `FS_NOT_A_DIRECTORY`, `FS_PERMISSION_DENIED` or
            `FS_IO_ERROR` when the directory cannot be listed.
    """
    with open_in_workspace(ctx.cwd, path, "directory") as opened:
        try:
            with os.scandir(opened.fd) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
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


@tool(parallel=True, idempotent=True)
def grep(ctx: ToolContext, pattern: str, path: str = ".", glob: str | None = None) -> str:
    """Search files in the workspace for a regular expression; prints `file:line:text`.

    `.git` directories and symlinks are skipped; so are FIFOs, sockets, devices, files
    with more than one hard link and files that are not UTF-8 text (counted in a note).

    Args:
        pattern: a Python regular expression.
        path: the file or directory to search, relative to the workspace.
        glob: only search files whose name or relative path matches this pattern (`*.py`).
        ctx: injected; `ctx.cwd` is the workspace every path is confined to.

    Returns:
        `file:line:text` lines, `no matches`, and notes on skipped files or the match cap.

    Raises:
        ToolError: `PATH_OUTSIDE_WORKSPACE` or `PATH_INVALID` for a path that cannot be
            used; `GREP_INVALID_PATTERN` for a bad regular expression; `FS_NOT_FOUND`
            when `path` does not exist; `FS_NOT_A_FILE` or `FS_HARD_LINK` when `path`
            names a file that cannot be searched.
    """
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"invalid pattern {pattern!r}: {exc}", code=GREP_INVALID_PATTERN) from exc

    def wanted(name: str, shown: str) -> bool:
        return glob is None or fnmatch.fnmatch(name, glob) or fnmatch.fnmatch(shown, glob)

    matches: list[str] = []
    skips = TreeSkips()
    with open_in_workspace(ctx.cwd, path, "entry") as top:
        for shown, fd in _files_of(top, wanted, skips):
            try:
                with os.fdopen(os.dup(fd), encoding="utf-8") as handle:
                    found = [
                        f"{shown}:{number}:{line.rstrip()}"
                        for number, line in enumerate(handle, start=1)
                        if regex.search(line)
                    ]
            except (UnicodeDecodeError, OSError):
                skips.unreadable += 1  # not text or unreadable: counted in a note below
                continue
            matches.extend(found)
            if len(matches) >= MAX_GREP_MATCHES:
                break
    lines = matches[:MAX_GREP_MATCHES] or ["no matches"]
    if len(matches) >= MAX_GREP_MATCHES:
        lines.append(f"[stopped after {MAX_GREP_MATCHES} matches]")
    if skips.unreadable:
        lines.append(f"[skipped {skips.unreadable} unreadable or non-text files]")
    if skips.not_regular:
        lines.append(f"[skipped {skips.not_regular} FIFOs, sockets or devices]")
    if skips.hard_linked:
        lines.append(f"[skipped {skips.hard_linked} files with more than one hard link]")
    text, cut = truncate_utf8("\n".join(lines), MAX_OUTPUT_BYTES)
    return text + ("\n[truncated]" if cut else "")


def _files_of(
    top: Opened, wanted: Callable[[str, str], bool], skips: TreeSkips
) -> Iterator[tuple[str, int]]:
    if not stat.S_ISDIR(top.status.st_mode):  # a regular file with one link (checked on open)
        yield top.shown, top.fd
        return
    yield from walk_regular_files(top, skipped_dirs=_SKIPPED_DIRS, wanted=wanted, skips=skips)


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
        ToolError: `PATH_OUTSIDE_WORKSPACE` or `PATH_INVALID` for a path that cannot be
            used; `FS_NOT_A_FILE` for a directory, FIFO, socket or device; `FS_HARD_LINK`
            for a file with more than one link (nothing is written); `FS_NOT_A_DIRECTORY`,
            `FS_PERMISSION_DENIED` or `FS_IO_ERROR` when the write fails.
    """
    data = content.encode("utf-8")
    with open_in_workspace(ctx.cwd, path, "write") as opened:
        try:
            os.ftruncate(opened.fd, 0)
            with os.fdopen(os.dup(opened.fd), "wb") as handle:
                handle.write(data)
        except OSError as exc:
            raise_os_error(exc, path)
    return f"wrote {len(data)} bytes to {opened.shown}"


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
        ToolError: `PATH_OUTSIDE_WORKSPACE` or `PATH_INVALID` for a path that cannot be
            used; `FS_EDIT_NOT_FOUND` when `old` does not occur; `FS_AMBIGUOUS_EDIT` when
            it occurs more than once; `FS_NOT_A_FILE` for a directory, FIFO, socket or
            device; `FS_HARD_LINK` for a file with more than one link; `FS_NOT_FOUND`,
            `FS_NOT_TEXT`, `FS_PERMISSION_DENIED` or `FS_IO_ERROR` when the file cannot
            be read or written.
    """
    with open_in_workspace(ctx.cwd, path, "edit") as opened:
        try:
            with os.fdopen(os.dup(opened.fd), "r+", encoding="utf-8") as handle:
                text = handle.read()
                count = text.count(old)
                if count == 0:
                    raise ToolError(
                        f"the text to replace was not found in {path}; read the file and "
                        "copy it exactly",
                        code=FS_EDIT_NOT_FOUND,
                    )
                if count > 1:
                    raise ToolError(
                        f"the text to replace occurs {count} times in {path}; include more "
                        "context so it occurs exactly once",
                        code=FS_AMBIGUOUS_EDIT,
                    )
                handle.seek(0)
                handle.truncate()
                handle.write(text.replace(old, new, 1))
        except UnicodeDecodeError as exc:
            raise ToolError(f"{path} is not UTF-8 text", code=FS_NOT_TEXT) from exc
        except OSError as exc:
            raise_os_error(exc, path)
    return f"edited {opened.shown}"


def file_tools() -> list[Tool]:
    """Return the five built-in file tools.

    Returns:
        `[read_file, list_dir, grep, write_file, edit_file]`.
    """
    return [read_file, list_dir, grep, write_file, edit_file]
