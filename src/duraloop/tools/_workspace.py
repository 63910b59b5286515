"""Confine file paths to the session workspace.

The check resolves the path (following every symlink that exists) and then requires the
result to lie inside the resolved workspace, so `..`, absolute paths and symlinks that
point outside are all refused the same way. It guards against model mistakes; it is not a
sandbox (a path can change between the check and its use).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, NoReturn

from ..errors import ToolError

PATH_OUTSIDE_WORKSPACE: Final = "PATH_OUTSIDE_WORKSPACE"
PATH_INVALID: Final = "PATH_INVALID"
FS_NOT_FOUND: Final = "FS_NOT_FOUND"
FS_NOT_A_FILE: Final = "FS_NOT_A_FILE"
FS_NOT_A_DIRECTORY: Final = "FS_NOT_A_DIRECTORY"
FS_NOT_TEXT: Final = "FS_NOT_TEXT"
FS_PERMISSION_DENIED: Final = "FS_PERMISSION_DENIED"
FS_IO_ERROR: Final = "FS_IO_ERROR"
FS_EDIT_NOT_FOUND: Final = "FS_EDIT_NOT_FOUND"
FS_AMBIGUOUS_EDIT: Final = "FS_AMBIGUOUS_EDIT"
GREP_INVALID_PATTERN: Final = "GREP_INVALID_PATTERN"


def resolve_in_workspace(cwd: Path, path: str) -> Path:
    """Resolve `path` against the workspace `cwd` and require it to stay inside.

    Args:
        cwd: the workspace, absolute and resolved (`ToolContext.cwd`).
        path: a relative or absolute path from the model; `~` is not expanded.

    Returns:
        The resolved absolute path (it need not exist).

    Raises:
        ToolError: `PATH_INVALID` if the path holds a NUL byte (no file can be named so);
            `PATH_OUTSIDE_WORKSPACE` if the resolved path is outside `cwd`.
    """
    if "\x00" in path:
        raise ToolError(
            f"path {path!r} contains a NUL byte, which no file name can hold; "
            "use a path without it",
            code=PATH_INVALID,
        )
    candidate = Path(path)
    joined = candidate if candidate.is_absolute() else cwd / candidate
    resolved = joined.resolve()
    if not resolved.is_relative_to(cwd):
        raise ToolError(
            f"path {path!r} resolves to {resolved}, outside the workspace {cwd}; "
            "use a path inside the workspace",
            code=PATH_OUTSIDE_WORKSPACE,
        )
    return resolved


def display_path(cwd: Path, resolved: Path) -> str:
    """Return `resolved` relative to the workspace, as the model should see it.

    Args:
        cwd: the workspace, absolute and resolved.
        resolved: a path inside it.

    Returns:
        The relative POSIX path, or `.` for the workspace itself.
    """
    relative = resolved.relative_to(cwd)
    return relative.as_posix() if relative.parts else "."


def raise_os_error(exc: OSError, shown: str) -> NoReturn:
    """Raise the coded `ToolError` for an `OSError` raised on `shown`, chained to it.

    Args:
        exc: the error.
        shown: the path as the model named it.

    Raises:
        ToolError: `FS_NOT_FOUND`, `FS_PERMISSION_DENIED`, `FS_NOT_A_FILE`,
            `FS_NOT_A_DIRECTORY`, or `FS_IO_ERROR` for anything else.
    """
    if isinstance(exc, FileNotFoundError):
        raise ToolError(f"{shown}: no such file or directory", code=FS_NOT_FOUND) from exc
    if isinstance(exc, PermissionError):
        raise ToolError(f"{shown}: permission denied", code=FS_PERMISSION_DENIED) from exc
    if isinstance(exc, IsADirectoryError):
        raise ToolError(f"{shown} is a directory, not a file", code=FS_NOT_A_FILE) from exc
    if isinstance(exc, NotADirectoryError):
        raise ToolError(
            f"{shown}: a path component is not a directory", code=FS_NOT_A_DIRECTORY
        ) from exc
    raise ToolError(f"{shown}: {exc.strerror or exc}", code=FS_IO_ERROR) from exc


def truncate_utf8(text: str, max_bytes: int) -> tuple[str, bool]:
    """Cut `text` to at most `max_bytes` bytes of UTF-8 without splitting a character.

    Args:
        text: the text.
        max_bytes: the cap, in bytes.

    Returns:
        `(text, was_truncated)`.
    """
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text, False
    # "ignore" only drops the one character the byte cut may have split in half.
    return encoded[:max_bytes].decode("utf-8", errors="ignore"), True
