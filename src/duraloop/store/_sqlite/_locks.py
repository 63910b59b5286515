"""The single-writer locks of a SQLite store: one `flock`ed file per session in `<db>.locks/`.

See docs/store.md#sqlite.

Two processes never write one session, while different sessions of one database are written
by different processes (SQLite serializes their transactions). A session's lock file is named
by the SHA-256 of its id, so any id a SQLite store accepts (`check_id`) names a file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from duraloop.errors import StoreError, UsageError

from .._files import lock_session_file
from .._jsonl._paths import check_session_id

_LOCK_DIR_MODE = 0o700
_LOCK_FILE_MODE = 0o600


def check_id(session_id: str) -> None:
    """Refuse a session id a SQLite store cannot hold.

    Raises:
        UsageError: if the id is not a valid session id (`check_session_id`) or is not
            valid Unicode text (a lone surrogate).
    """
    check_session_id(session_id)
    try:
        session_id.encode()
    except UnicodeEncodeError as exc:
        raise UsageError(
            f"session id {session_id!r} is not valid Unicode text (a lone surrogate)"
        ) from exc


def lock_session(locks_dir: Path, session_id: str) -> Callable[[], None]:
    """Take the exclusive `flock` on the session's lock file in `locks_dir`.

    Args:
        locks_dir: the store's `<db>.locks/` directory (created, mode 0700, if missing).
        session_id: the session to lock.

    Returns:
        The release function (see `lock_session_file`).

    Raises:
        UsageError: if the id is refused (`check_id`).
        StoreError: if the lock file cannot be opened.
        SessionLockedError: if another writer holds the session.
    """
    check_id(session_id)
    digest = hashlib.sha256(session_id.encode()).hexdigest()
    lock_path = locks_dir / f"{digest}.lock"
    try:
        with contextlib.suppress(FileExistsError):
            locks_dir.mkdir(mode=_LOCK_DIR_MODE)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, _LOCK_FILE_MODE)
    except OSError as exc:
        raise StoreError(f"cannot open the lock file {lock_path}: {exc}") from exc
    return lock_session_file(fd, lock_path, session_id)
