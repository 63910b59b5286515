"""JSONL on-disk layout: path segments and project keys (docs/store.md#jsonl-layout).

`<root>/--<project_key(cwd)>--/<encode_segment(id)>/session.jsonl[.zstd]`, or `_no-cwd/` as the
project directory when the session has no cwd. Segment encoding is injective, so distinct
ids never share a directory; the project key is lossy by design (lookup scans by id).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING

from duraloop.errors import CorruptLogError, UsageError

if TYPE_CHECKING:
    from duraloop.log import SessionHeader

LOG_FILE_NAME = "session.jsonl"
ZSTD_LOG_FILE_NAME = "session.jsonl.zstd"
LOCK_FILE_NAME = "session.lock"
NO_CWD_DIR = "_no-cwd"
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_SEPARATORS = frozenset("/\\:")
_MAX_SLUG_CHARS = 251
MAX_SESSION_ID_CHARS = 200
_MAX_SEGMENT_CHARS = 255  # the common file-name limit (ext4, APFS, NTFS)


def check_session_id(session_id: str) -> None:
    """Refuse a session id that cannot name a stored session; the one place for the rule.

    An id is 1 to 200 characters of UTF-8 text without NUL or line breaks, and its encoded
    directory name
    (`encode_segment`) must fit a file name (255 characters).

    Args:
        session_id: the id to check.

    Raises:
        UsageError: naming the id and what is allowed.
    """
    _check_session_id(session_id)


# Every append locates its log by id, so the checks and the encoding are cached per id (a
# refused id raises, and raising is never cached).
@functools.lru_cache(maxsize=4096)
def _check_session_id(session_id: str) -> None:
    allowed = (
        f"a session id is 1 to {MAX_SESSION_ID_CHARS} characters without NUL or line breaks "
        "(a UUID is typical)"
    )
    if not session_id:
        raise UsageError(f"the session id is empty; {allowed}")
    if len(session_id) > MAX_SESSION_ID_CHARS:
        raise UsageError(
            f"session id {session_id[:20]!r}... is {len(session_id)} characters; {allowed}"
        )
    if any(char in session_id for char in "\x00\n\r"):
        raise UsageError(f"session id {session_id!r} holds NUL or a line break; {allowed}")
    if any("\ud800" <= char <= "\udfff" for char in session_id):
        # Bytes that are not UTF-8 on a command line arrive as lone surrogates.
        raise UsageError(f"session id {session_id!r} is not UTF-8 text; {allowed}")
    encoded = len(_encode(session_id))
    if encoded > _MAX_SEGMENT_CHARS:
        raise UsageError(
            f"session id {session_id!r} encodes to a {encoded}-character directory name, over "
            f"the {_MAX_SEGMENT_CHARS}-character file-name limit; each character outside "
            "A-Z a-z 0-9 . _ - takes 5, so use fewer of them"
        )


def _code_units(text: str) -> list[str]:
    """Split `text` into UTF-16 code units (astral characters become surrogate pairs)."""
    units: list[str] = []
    for char in text:
        point = ord(char)
        if point > 0xFFFF:
            point -= 0x10000
            units.append(chr(0xD800 + (point >> 10)))
            units.append(chr(0xDC00 + (point & 0x3FF)))
        else:
            units.append(char)
    return units


def _escape(unit: str) -> str:
    return f"~{ord(unit):04X}"


def encode_segment(value: str) -> str:
    """Encode a session id as one injective path segment (docs/store.md#jsonl-layout).

    Args:
        value: a non-empty session id.

    Returns:
        The id with every UTF-16 unit outside `[A-Za-z0-9._-]` written as `~XXXX`;
        `.` and `..` are escaped whole.

    Raises:
        ValueError: if `value` is empty.
    """
    if not value:
        raise ValueError("a session id path segment must not be empty")
    return _encode(value)


@functools.lru_cache(maxsize=4096)
def _encode(value: str) -> str:
    if value in (".", ".."):
        return "~002E" * len(value)
    return "".join(unit if unit in _SAFE else _escape(unit) for unit in _code_units(value))


def decode_segment(segment: str) -> str:
    """Invert `encode_segment`: turn each `~XXXX` back into its UTF-16 unit.

    Used to name a session whose header cannot be read. A malformed escape is kept as is.

    Args:
        segment: a directory name made by `encode_segment`.

    Returns:
        The session id it encodes (lone surrogates, if any, become U+FFFD).
    """
    units = re.sub(r"~([0-9A-F]{4})", lambda match: chr(int(match.group(1), 16)), segment)
    return units.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def project_key(cwd: str) -> str:
    r"""Return the project directory name `--<slug>--` for a working directory.

    Args:
        cwd: the session's working directory.

    Returns:
        Runs of `/`, `\` and `:` become one `-`, other unsafe units `~XXXX`, leading `-`
        stripped, `root` when empty, the slug cut to 251 characters.
    """
    parts: list[str] = []
    in_separator = False
    for unit in _code_units(cwd):
        if unit in _SEPARATORS:
            if not in_separator:
                parts.append("-")
            in_separator = True
            continue
        in_separator = False
        parts.append(unit if unit in _SAFE else _escape(unit))
    slug = "".join(parts).lstrip("-") or "root"
    return f"--{slug[:_MAX_SLUG_CHARS]}--"


def session_dir(root: Path, session_id: str, cwd: str | None) -> Path:
    """Return the directory holding one session's log and lock file.

    Raises:
        UsageError: if `session_id` is not a valid session id (`check_session_id`).
    """
    project = NO_CWD_DIR if cwd is None else project_key(cwd)
    check_session_id(session_id)
    return root / project / encode_segment(session_id)


def check_identity(root: Path, header: SessionHeader, session_id: str, path: Path) -> None:
    """Check a log's header names the requested id and maps to the file it was read from.

    Raises:
        CorruptLogError: if the header's id differs, or its id and cwd map to another file.
    """
    if header.id != session_id:
        raise CorruptLogError(
            f'requested id "{session_id}" does not match header id "{header.id}"',
            path=str(path),
            line=1,
        )
    if session_dir(root, header.id, header.cwd) != path.parent:
        raise CorruptLogError(
            f'header (id "{header.id}", cwd {header.cwd!r}) does not map to this file',
            path=str(path),
            line=1,
        )
