"""File primitives of the JSONL backend: a stable whole-file read, a full write, a dir fsync."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path

from duraloop.errors import SessionLockedError, StoreError

_MAX_READ_ATTEMPTS = 8


def fsync_dir(path: Path) -> None:
    """Fsync a directory, so an entry created or linked in it is durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def file_revision(stat: os.stat_result) -> tuple[int, int, int, int, int]:
    """Return (device, inode, size, mtime ns, ctime ns): equal while the file is unchanged."""
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def read_stable(path: Path) -> bytes:
    """Read the whole file, again while its stat changes during the read (spec 6.5).

    Raises:
        StoreError: if the file cannot be read, or keeps changing (a writer ignoring the lock).
    """
    try:
        with path.open("rb", buffering=0) as handle:
            for _ in range(_MAX_READ_ATTEMPTS):
                before = file_revision(os.fstat(handle.fileno()))
                handle.seek(0)
                data = handle.read()
                if file_revision(os.fstat(handle.fileno())) == before:
                    return data
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc}") from exc
    raise StoreError(
        f"{path} kept changing while it was read ({_MAX_READ_ATTEMPTS} attempts); is another "
        "process writing it without the session lock?"
    )


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd`, looping over short writes."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def lock_session_file(fd: int, lock_path: Path, session_id: str) -> Callable[[], None]:
    """Take the single-writer lock on an open lock file with `flock`.

    The OS releases it if the process dies, so a stale lock never blocks.

    Args:
        fd: the open lock file; it is closed if the lock cannot be taken.
        lock_path: its path, for messages.
        session_id: the session the lock guards.

    Returns:
        An idempotent function that releases the lock.

    Raises:
        SessionLockedError: if another process holds the lock.
        StoreError: if locking fails for another reason.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        os.close(fd)
        raise SessionLockedError(session_id, path=str(lock_path)) from exc
    except OSError as exc:
        os.close(fd)
        raise StoreError(f"cannot lock {lock_path}: {exc}") from exc
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            released = True
            os.close(fd)

    return release
