"""The helpers the file tools' coded errors share.

The file tools' codes are defined in `duraloop.log.vocabulary` (style rule D7). How a path is
confined to the workspace is in `_fsopen` (component by component through directory
descriptors).
"""

from __future__ import annotations

import errno
from typing import NoReturn

from ..errors import ToolError
from ..log.vocabulary import (
    FS_IO_ERROR,
    FS_NOT_A_DIRECTORY,
    FS_NOT_A_FILE,
    FS_NOT_FOUND,
    FS_PERMISSION_DENIED,
    PATH_INVALID,
)


def raise_os_error(exc: OSError, shown: str) -> NoReturn:
    """Raise the coded `ToolError` for an `OSError` raised on `shown`, chained to it.

    Args:
        exc: the error.
        shown: the path as the model named it.

    Raises:
        ToolError: `PATH_INVALID` for a name too long or a symlink loop; `FS_NOT_FOUND`,
            `FS_PERMISSION_DENIED`, `FS_NOT_A_FILE`, `FS_NOT_A_DIRECTORY`, or
            `FS_IO_ERROR` for anything else.
    """
    if exc.errno == errno.ENAMETOOLONG:
        raise ToolError(
            f"{shown}: a file name on it is longer than the file system allows; use shorter names",
            code=PATH_INVALID,
        ) from exc
    if exc.errno == errno.ELOOP:
        raise ToolError(f"{shown}: too many levels of symlinks", code=PATH_INVALID) from exc
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
