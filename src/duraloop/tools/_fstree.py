"""Walk a workspace directory tree through descriptors, never opening what is not a file.

`grep` reads every regular file under a directory. The walk holds a descriptor per level
and opens each child relative to its parent with `O_NOFOLLOW`, so a symlink is never
followed, and it only opens entries the directory listing calls regular files (with
`O_NONBLOCK`, judged again by `fstat`), so a FIFO, socket or device never blocks it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field

from ._fsopen import DIR_FLAGS, OPEN_FLAGS, Opened


@dataclass
class TreeSkips:
    """Counts of files a tree walk did not yield (symlinks are skipped uncounted)."""

    not_regular: int = 0
    hard_linked: int = 0
    unreadable: int = 0


@dataclass
class _Frame:
    fd: int
    prefix: str
    subdirs: list[str] = field(default_factory=list)


def walk_regular_files(
    top: Opened,
    *,
    skipped_dirs: frozenset[str],
    wanted: Callable[[str, str], bool],
    skips: TreeSkips,
) -> Iterator[tuple[str, int]]:
    """Yield `(shown, fd)` for each regular file with one link under the directory `top`.

    Files of a directory come sorted by name, before its subdirectories (also sorted).
    Symlinks are never followed; FIFOs, sockets and devices are never opened. Each `fd`
    is closed when the consumer asks for the next file (or stops).

    Args:
        top: an open directory.
        skipped_dirs: directory names not descended into (`.git`).
        wanted: `(name, shown) -> bool`; a file is only opened when it says True.
        skips: counts what was passed over, updated as the walk goes.

    Yields:
        The file's workspace path and an open read-only descriptor of it.
    """
    stack = [_Frame(os.dup(top.fd), "" if top.shown == "." else f"{top.shown}/")]
    try:
        frame = stack[0]
        frame.subdirs = yield from _scan(frame, skipped_dirs, wanted, skips)
        while stack:
            frame = stack[-1]
            if not frame.subdirs:
                os.close(stack.pop().fd)
                continue
            name = frame.subdirs.pop(0)
            try:
                child_fd = os.open(name, DIR_FLAGS, dir_fd=frame.fd)
            except OSError:  # swapped for a non-directory, or unreadable: counted
                skips.unreadable += 1
                continue
            child = _Frame(child_fd, f"{frame.prefix}{name}/")
            stack.append(child)
            child.subdirs = yield from _scan(child, skipped_dirs, wanted, skips)
    finally:
        for frame in stack:
            os.close(frame.fd)


def _scan(
    frame: _Frame,
    skipped_dirs: frozenset[str],
    wanted: Callable[[str, str], bool],
    skips: TreeSkips,
) -> Generator[tuple[str, int], None, list[str]]:
    try:
        with os.scandir(frame.fd) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError:  # an unreadable directory: counted in the caller's summary
        skips.unreadable += 1
        return []
    subdirs: list[str] = []
    for entry in entries:
        if entry.is_symlink():
            continue
        if entry.is_dir(follow_symlinks=False):
            if entry.name not in skipped_dirs:
                subdirs.append(entry.name)
            continue
        shown = frame.prefix + entry.name
        if not wanted(entry.name, shown):
            continue
        if not entry.is_file(follow_symlinks=False):
            skips.not_regular += 1
            continue
        try:
            fd = os.open(entry.name, OPEN_FLAGS["read"], dir_fd=frame.fd)
        except OSError:  # unreadable, or swapped for a symlink: counted
            skips.unreadable += 1
            continue
        try:
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode):
                skips.not_regular += 1
            elif status.st_nlink > 1:
                skips.hard_linked += 1
            else:
                yield shown, fd
        finally:
            os.close(fd)
    return subdirs
