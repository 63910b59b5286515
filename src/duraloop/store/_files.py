"""File primitives of the JSONL backend: a stable whole-file read, a full write, a dir fsync."""

from __future__ import annotations

import os
from pathlib import Path

from duraloop.errors import StoreError

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
