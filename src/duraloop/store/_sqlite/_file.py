"""The SQLite store's database file: what it is, who may read it, whether it is still there.

The file must be a SQLite database (checked first, so a text file is refused as such, not
for its permissions: E20), a regular file (not a symlink) owned by the current user with no
group or world permissions, in a directory that is not group- or world-writable: a session
log holds prompts and tool output. A store remembers the (device, inode) of the file it
opened and refuses to write once its path names another file or none (D14). SQLite's own
errors, and a schema or pragma text that is not UTF-8, become `StoreError`s naming the file.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

from duraloop.errors import StoreError

SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""
_DIR_MODE = 0o700
_FILE_MODE = 0o600


def check_file(path: Path, *, create: bool = True) -> bool:
    """Check the permissions of the database file and its directory; create them if missing.

    What the file is comes first: a file that is not a SQLite database is refused as such
    before its permissions are judged (E20: "not a database" before "run chmod").

    Args:
        path: the database file (absolute).
        create: create a missing file (and directory); False for a reader, which must find
            the file already there (`SqliteBackend` opens lazily and never calls this for a
            missing file when reading).

    Returns:
        Whether the file was created now.

    Raises:
        StoreError: if the file is not a SQLite database, is a symlink or not a regular
            file, is owned by another user, has group/world permissions, or its directory is
            group- or world-writable.
    """
    directory = path.parent
    try:
        if create and not directory.exists():
            directory.mkdir(mode=_DIR_MODE, parents=True)
        dir_mode = directory.stat().st_mode
    except OSError as exc:
        raise StoreError(f"cannot prepare the directory of the SQLite store {path}: {exc}") from exc
    _check_magic(path)
    if dir_mode & 0o022:
        raise StoreError(
            f"the directory {directory} of the SQLite store {path} is group- or world-writable "
            f"(mode {stat.S_IMODE(dir_mode):04o}); another user could replace the store. Run "
            f"`chmod go-w {directory}` or choose another directory"
        )
    created = False
    if create:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, _FILE_MODE)
        except FileExistsError:
            pass
        except OSError as exc:
            raise StoreError(f"cannot create the SQLite store {path}: {exc}") from exc
        else:
            os.close(fd)
            created = True
    try:
        info = path.lstat()
    except OSError as exc:
        raise StoreError(f"cannot stat the SQLite store {path}: {exc}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise StoreError(
            f"the SQLite store {path} is a symlink; open the file it points to directly"
        )
    if not stat.S_ISREG(info.st_mode):
        raise StoreError(f"the SQLite store {path} is not a regular file")
    if info.st_uid != os.getuid():
        raise StoreError(
            f"the SQLite store {path} is owned by uid {info.st_uid}, not by the current user "
            f"(uid {os.getuid()}); a session store is private to its user"
        )
    if info.st_mode & 0o077:
        raise StoreError(
            f"the SQLite store {path} has group/world permissions (mode "
            f"{stat.S_IMODE(info.st_mode):04o}); run `chmod 600 {path}`"
        )
    return created


def _check_magic(path: Path) -> None:
    """Refuse an existing non-empty regular file that does not start with SQLite's header.

    Raises:
        StoreError: naming the file and what it starts with.
    """
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"cannot stat the SQLite store {path}: {exc}") from exc
    if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
        return  # a symlink or special file is refused below; an empty file is a new database
    try:
        with path.open("rb") as handle:
            head = handle.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise StoreError(f"cannot read the SQLite store {path}: {exc}") from exc
    if head != SQLITE_MAGIC:
        raise StoreError(
            f"{path} is not a SQLite database (it starts with {head[:8]!r}, not "
            f"{SQLITE_MAGIC[:15]!r}); choose another file, or pass a JSONL root as --store DIR"
        )


def damaged_store_error(
    path: Path, what: str, exc: sqlite3.Error | UnicodeDecodeError
) -> StoreError:
    """Return the StoreError for a SQLite failure, saying when the file itself is damaged.

    Args:
        path: the database file.
        what: the operation, e.g. `open` or `read session "x"`.
        exc: SQLite's error, or the decode error of a schema or pragma text.

    Returns:
        `SQLite store <path>: cannot <what>: <exc>`, plus what to do when it is damaged.
    """
    hint = ""
    if isinstance(exc, UnicodeDecodeError):
        hint = " (a schema or pragma text is not UTF-8: the database file is damaged)"
    elif isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
        hint = " (another process held the database for over 5 seconds; retry)"
    elif isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        hint = (
            " (the database file is damaged or not a database; restore it from a backup, or "
            "try `sqlite3 FILE .recover`)"
        )
    return StoreError(f"SQLite store {path}: cannot {what}: {exc}{hint}")


def sessions_damage(connection: sqlite3.Connection) -> str | None:
    """Run `PRAGMA integrity_check` on the `sessions` table, its index and `persistence_state`.

    Every write and every lookup by id goes through these b-trees, so damage there makes a
    stored session look new (its id is not found) or a new one collide with it.
    `integrity_check`, unlike `quick_check`, also finds an index entry that no longer matches
    its row (a damaged id). Checking only these small tables costs well under a millisecond
    (the events table is not walked).

    Args:
        connection: an open connection to the store.

    Returns:
        SQLite's first complaint, on one line, or None when the tables are intact.
    """
    for table in ("persistence_state", "sessions"):
        try:
            result = connection.execute(f"PRAGMA integrity_check({table})").fetchone()
        except sqlite3.DatabaseError as exc:
            return str(exc)
        text = bytes(result[0]).decode(errors="replace") if result else "no result"
        if text != "ok":
            lines = [line for line in text.splitlines() if not line.startswith("***")]
            return (lines[0] if lines else text)[:200]
    return None


def damaged_database_error(path: Path, what: str, detail: str) -> StoreError:
    """Return the StoreError for a store whose integrity check failed; nothing is written.

    Args:
        path: the database file.
        what: the operation, e.g. `create session "x"`.
        detail: SQLite's complaint (from `sessions_damage`).

    Returns:
        `SQLite store <path>: cannot <what>: the database is damaged (...)` plus what to do.
    """
    return StoreError(
        f"SQLite store {path}: cannot {what}: the database is damaged ({detail}); nothing was "
        f"written. Restore it from a backup, or run `sqlite3 {path} .recover` into a new file"
    )


def check_sessions(connection: sqlite3.Connection, path: Path, what: str) -> None:
    """Refuse `what` when the sessions table, its index or `persistence_state` is damaged.

    Raises:
        StoreError: `damaged_database_error`, when `sessions_damage` finds damage.
    """
    detail = sessions_damage(connection)
    if detail is not None:
        raise damaged_database_error(path, what, detail)


def check_same_file(path: Path, file_id: tuple[int, int], what: str) -> None:
    """Refuse to write once `path` no longer names the database file held open.

    A database deleted (or replaced) while open keeps working through the open descriptor,
    so without this check a turn would "complete" into an unlinked file and be lost (D14).
    It is the JSONL store's rule too, where every append opens the path.

    Args:
        path: the database file.
        file_id: `(st_dev, st_ino)` of the file when the store opened it.
        what: the write, for the message.

    Raises:
        StoreError: if the path is missing or names another file.
    """
    try:
        info = os.stat(path)
    except OSError as exc:
        raise StoreError(
            f"SQLite store {path}: cannot {what}: the database file is gone ({exc}); it was "
            "deleted or moved while this store held it open, and nothing more is written"
        ) from exc
    if (info.st_dev, info.st_ino) != file_id:
        raise StoreError(
            f"SQLite store {path}: cannot {what}: the path now names another file (it was "
            "replaced while this store held the old one open); nothing more is written"
        )
