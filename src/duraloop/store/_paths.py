"""JSONL on-disk layout: path segments and project keys (session-spec 6.3).

`<root>/--<project_key(cwd)>--/<encode_segment(id)>/session.jsonl[.zstd]`, or `_no-cwd/` as the
project directory when the session has no cwd. Segment encoding is injective, so distinct
ids never share a directory; the project key is lossy by design (lookup scans by id).
"""

from __future__ import annotations

from pathlib import Path

LOG_FILE_NAME = "session.jsonl"
ZSTD_LOG_FILE_NAME = "session.jsonl.zstd"
LOCK_FILE_NAME = "session.lock"
NO_CWD_DIR = "_no-cwd"
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_SEPARATORS = frozenset("/\\:")
_MAX_SLUG_CHARS = 251


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
    """Encode a session id as one injective path segment (session-spec 6.3).

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
    if value in (".", ".."):
        return "~002E" * len(value)
    return "".join(unit if unit in _SAFE else _escape(unit) for unit in _code_units(value))


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
    """Return the directory holding one session's log and lock file."""
    project = NO_CWD_DIR if cwd is None else project_key(cwd)
    return root / project / encode_segment(session_id)
