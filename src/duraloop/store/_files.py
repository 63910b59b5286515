"""File primitives of the stores: stable reads, full writes, dir fsync, locks, cache files."""

from __future__ import annotations

import contextlib
import fcntl
import gc
import os
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from duraloop.errors import SessionLockedError, StoreError

_MAX_READ_ATTEMPTS = 8
_LOCK_ATTEMPTS = 8
_FILE_MODE = 0o600


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
    """Read the whole file, again while its stat changes during the read.

    See docs/store.md#durability-and-locks.

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


class StaleLockFileError(Exception):
    """The lock file was unlinked (by a releasing writer) between its open and its flock."""


def lock_session_file(
    fd: int, lock_path: Path, session_id: str, *, on_release: Callable[[], None] | None = None
) -> Callable[[], None]:
    """Take the single-writer lock on an open lock file with `flock`.

    The OS releases it if the process dies, so a stale lock never blocks. A writer may
    remove the lock file when it releases (`on_release`, while it still holds the lock):
    a locker that raced with that removal locked an unlinked file, so after the flock the
    path must still name the locked file, or `StaleLockFileError` tells the caller to open
    the path again.

    Args:
        fd: the open lock file; it is closed if the lock cannot be taken.
        lock_path: its path, for messages.
        session_id: the session the lock guards.
        on_release: called with the lock still held, right before it is released (e.g. to
            remove the lock file of a session that was never stored).

    Returns:
        An idempotent function that releases the lock.

    Raises:
        SessionLockedError: if another process holds the lock.
        StaleLockFileError: if the lock file was removed or replaced meanwhile (retry).
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
    try:
        held, current = os.fstat(fd), os.stat(lock_path)
    except FileNotFoundError:
        os.close(fd)
        raise StaleLockFileError(str(lock_path)) from None
    except OSError as exc:
        os.close(fd)
        raise StoreError(f"cannot stat {lock_path}: {exc}") from exc
    if (held.st_dev, held.st_ino) != (current.st_dev, current.st_ino):
        os.close(fd)
        raise StaleLockFileError(str(lock_path))
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            released = True
            try:
                if on_release is not None:
                    on_release()
            finally:
                os.close(fd)

    return release


def lock_directory(
    lock_path: Path, session_id: str, *, mkdirs: Callable[[Path], None], stored: Callable[[], bool]
) -> Callable[[], None]:
    """Lock a session's `lock_path`, creating its directories; undo them if nothing is stored.

    Releasing removes the lock file, and the directories this call created, when `stored()`
    is False then (a run that failed before its first write, an append to an unknown id):
    a failed command leaves no orphan `session.lock` (D14). Lockers that race with such a
    removal open the path again (`StaleLockFileError`).

    Args:
        lock_path: the lock file, inside the session's directory.
        session_id: the session, for messages.
        mkdirs: creates the directory and its missing parents (durably).
        stored: whether the session has a log beside the lock file.

    Returns:
        An idempotent function that releases the lock.

    Raises:
        SessionLockedError: if another process holds the lock.
        StoreError: if the lock file cannot be opened or locked.
    """
    directory = lock_path.parent
    for _ in range(_LOCK_ATTEMPTS):
        created = _missing_dirs(directory)
        try:
            mkdirs(directory)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, _FILE_MODE)
        except FileNotFoundError:
            continue  # a releasing writer removed the directory meanwhile
        except OSError as exc:
            raise StoreError(f"cannot open the lock file {lock_path}: {exc}") from exc

        def drop_unused(created: list[Path] = created) -> None:
            if stored():
                return
            with contextlib.suppress(FileNotFoundError):
                lock_path.unlink()
            for path in created:
                try:
                    path.rmdir()
                except OSError:
                    return  # not empty (another writer is there now) or already gone

        try:
            return lock_session_file(fd, lock_path, session_id, on_release=drop_unused)
        except StaleLockFileError:
            continue
    raise StoreError(f"cannot lock {lock_path}: other processes kept removing it")


def _missing_dirs(directory: Path) -> list[Path]:
    """The directories from `directory` up that do not exist yet, deepest first."""
    missing: list[Path] = []
    current = directory
    while not current.exists():
        missing.append(current)
        current = current.parent
    return missing


def write_private_copy(path: Path, data: bytes) -> str:
    """Write `data` to a new `<path>.torn-<UTC time>` (mode 0600), fsync it and its directory.

    A repair keeps what it cuts this way before it cuts (D12). The name is the UTC time to the
    millisecond; a name already taken gets a `-<n>` suffix.

    Returns:
        The new file's path.

    Raises:
        StoreError: if the file cannot be written.
    """
    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"
    for attempt in range(100):
        copy = path.with_name(f"{path.name}.torn-{stamp}" + (f"-{attempt}" if attempt else ""))
        try:
            fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, _FILE_MODE)
        except FileExistsError:
            continue
        except OSError as exc:
            raise StoreError(f"cannot keep the torn tail of {path} in {copy}: {exc}") from exc
        try:
            try:
                write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            fsync_dir(copy.parent)
        except OSError as exc:
            raise StoreError(f"cannot keep the torn tail of {path} in {copy}: {exc}") from exc
        return str(copy)
    raise StoreError(
        f"cannot keep the torn tail of {path}: 100 copies named {path.name}.torn-{stamp}* exist"
    )


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for a bulk decode of acyclic values.

    On exit the objects allocated meanwhile are promoted straight to the oldest generation
    (`gc.freeze()` then `gc.unfreeze()`: two list splices, no traversal) instead of being
    walked by a young collection and then again by the middle one; they are looked at with
    the next full collection, like any long-lived object. That promotion is skipped when
    the process has frozen objects of its own (`gc.get_freeze_count()`), which it must not
    unfreeze. A collector that was already disabled stays disabled and untouched.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()


def truncate_keeping_tail(path: Path, torn: int) -> tuple[str, int]:
    """Keep the bytes of `path` from `torn` on in a private copy, then truncate there durably.

    Returns:
        The copy's path (`write_private_copy`) and the file's size before the cut.

    Raises:
        StoreError: if the file is now shorter than `torn` (the torn tail changed since it
            was read), or it cannot be read, copied, truncated or fsynced.
    """
    try:
        fd = os.open(path, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            if size < torn:
                raise StoreError(
                    f"the torn tail of {path} changed since it was read (it started at byte "
                    f"{torn}, the file is {size} bytes); load the session again"
                )
            copy = write_private_copy(path, os.pread(fd, size - torn, torn))
            os.ftruncate(fd, torn)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise StoreError(f"cannot truncate the torn tail of {path}: {exc}") from exc
    return copy, size


def read_written(path: Path, size: int, *, purpose: str) -> bytes:
    """Read the first `size` bytes of a file this store wrote (its writer's lock is held).

    Args:
        path: the log file.
        size: how many bytes this store knows it holds.
        purpose: what the bytes are read for, for the message (e.g. "to take a snapshot").

    Raises:
        StoreError: if it cannot be read, or holds fewer bytes than this store wrote.
    """
    try:
        with path.open("rb") as handle:
            data = handle.read(size)
    except OSError as exc:
        raise StoreError(f"cannot read {path} {purpose}: {exc}") from exc
    if len(data) != size:
        raise StoreError(f"{path} is shorter than the {size} bytes this store wrote")
    return data


def replace_private_file(final: Path, blob: bytes, *, what: str) -> None:
    """Replace `final` with `blob`: a temporary file (mode 0600) renamed over it, no fsync.

    For caches (snapshots): a lost or torn file is ignored by whoever reads it. Temporary
    files of `final` left by a write killed earlier are removed first.

    Args:
        final: the file to replace; its directory must exist.
        blob: the new content.
        what: the file, for the message (e.g. "the snapshot").

    Raises:
        StoreError: if it cannot be written (nothing else is touched).
    """
    for stale in final.parent.glob(f"{final.name}.*.tmp"):
        with contextlib.suppress(OSError):
            stale.unlink()
    tmp = final.with_name(f"{final.name}.{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, _FILE_MODE)
        try:
            write_all(fd, blob)
        finally:
            os.close(fd)
        os.replace(tmp, final)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise StoreError(f"cannot write {what} {final}: {exc}") from exc
