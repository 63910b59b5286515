"""Open workspace paths through directory descriptors, one component at a time.

Every path is walked from an open descriptor of the workspace: each component is opened
with `O_NOFOLLOW` relative to the directory opened before it (`openat`), so what is checked
is what is used; a symlink swapped in between cannot redirect the walk. A symlink met on
the way is read (`readlinkat`) and its target walked the same way: a target inside the
workspace is followed (as a user expects), one that leads outside is refused
(`PATH_OUTSIDE_WORKSPACE`), and more than 40 links in one path is a loop (`PATH_INVALID`).

The last component is opened with `O_NONBLOCK` and judged by `fstat` of the open
descriptor, so a FIFO, socket or device never blocks a tool: it is refused
(`FS_NOT_A_FILE`). A regular file with more than one hard link is refused for reading and
writing (`FS_HARD_LINK`): its other link cannot be told apart by any path and may lie
outside the workspace.

Not covered: a directory that another process renames out of the workspace while a walk
holds it. The file tools guard against model mistakes and swapped links; `bash` is not
confined at all.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final, Literal, NoReturn

from ..errors import ToolError
from ..log.vocabulary import (
    FS_HARD_LINK,
    FS_NOT_A_DIRECTORY,
    FS_NOT_A_FILE,
    FS_NOT_FOUND,
    FS_UNSUPPORTED,
    PATH_INVALID,
    PATH_OUTSIDE_WORKSPACE,
)
from ._workspace import raise_os_error

Want = Literal["read", "write", "edit", "directory", "entry"]
"""What the last component must be: a regular file opened to read, to write (created if
missing, with its parent directories), or to read and write; a directory; or either a
directory or a regular file (`entry`, opened to read)."""

MAX_SYMLINKS: Final = 40
"""The most symlinks one path may pass through (Linux `MAXSYMLINKS`); more is a loop."""

MAX_PATH_BYTES: Final = 4096
"""The longest path accepted, in bytes of its file-system encoding (Linux `PATH_MAX`)."""

_O_DIRECTORY: Final = getattr(os, "O_DIRECTORY", 0)
_O_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK: Final = getattr(os, "O_NONBLOCK", 0)
_O_NOCTTY: Final = getattr(os, "O_NOCTTY", 0)
_O_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
DIR_FLAGS: Final = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC
_FILE_FLAGS: Final = _O_NOFOLLOW | _O_NONBLOCK | _O_NOCTTY | _O_CLOEXEC
OPEN_FLAGS: Final[dict[Want, int]] = {
    "read": os.O_RDONLY | _FILE_FLAGS,
    "write": os.O_WRONLY | os.O_CREAT | _FILE_FLAGS,
    "edit": os.O_RDWR | _FILE_FLAGS,
    "directory": DIR_FLAGS,
    "entry": os.O_RDONLY | _FILE_FLAGS,
}
_SUPPORTED: Final = (
    all(hasattr(os, flag) for flag in ("O_DIRECTORY", "O_NOFOLLOW", "O_NONBLOCK"))
    and {os.open, os.stat, os.mkdir, os.readlink} <= os.supports_dir_fd
    and os.scandir in os.supports_fd
)


@dataclass(frozen=True)
class Opened:
    """An open descriptor of a workspace file or directory; close it with `with`.

    Args:
        fd: the descriptor.
        shown: its path relative to the workspace as the model should see it (`.` for the
            workspace itself), with symlinks inside the workspace resolved.
        status: `fstat` of `fd`, taken when it was judged.
    """

    fd: int
    shown: str
    status: os.stat_result

    def __enter__(self) -> Opened:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        os.close(self.fd)


def open_in_workspace(cwd: Path, path: str, want: Want) -> Opened:
    """Open `path` inside the workspace `cwd` without following any symlink out of it.

    Args:
        cwd: the workspace, absolute and resolved (`ToolContext.cwd`).
        path: a relative or absolute path from the model; `~` is not expanded.
        want: what the path must name (see `Want`).

    Returns:
        The open descriptor; the caller closes it.

    Raises:
        ToolError: `PATH_INVALID` for a NUL byte, an unencodable or over-long path or
            component, or a symlink loop; `PATH_OUTSIDE_WORKSPACE` for a path (or a
            symlink on it) that leads outside `cwd`; `FS_NOT_FOUND`; `FS_NOT_A_FILE` for
            a directory, FIFO, socket or device where a file is wanted;
            `FS_NOT_A_DIRECTORY`; `FS_HARD_LINK` for a regular file with more than one
            link; `FS_UNSUPPORTED` on a platform without `openat`-style calls;
            `FS_PERMISSION_DENIED` or `FS_IO_ERROR` for other failures.
    """
    _check_path_text(path)
    walk = _Walk(cwd, path)
    try:
        return walk.run(want)
    finally:
        walk.close()


def _check_path_text(path: str) -> None:
    if not _SUPPORTED:
        raise ToolError(
            "the file tools need openat-style calls (os.open with dir_fd, O_NOFOLLOW, "
            "O_DIRECTORY), which this platform lacks; run duraloop on Linux",
            code=FS_UNSUPPORTED,
        )
    if "\x00" in path:
        raise ToolError(
            f"path {path!r} contains a NUL byte, which no file name can hold; "
            "use a path without it",
            code=PATH_INVALID,
        )
    try:
        encoded = os.fsencode(path)
    except UnicodeEncodeError as exc:
        raise ToolError(
            f"path {path!r} cannot be encoded as a file name; use a path of valid characters",
            code=PATH_INVALID,
        ) from exc
    if len(encoded) > MAX_PATH_BYTES:
        raise ToolError(
            f"path {path[:60]!r}... is {len(encoded)} bytes long; a path holds at most "
            f"{MAX_PATH_BYTES} bytes",
            code=PATH_INVALID,
        )


class _Walk:
    """One path being walked: the directories held so far and what is left to walk."""

    def __init__(self, cwd: Path, path: str) -> None:
        self.root = str(cwd)
        self.path = path
        self.links = 0
        self.names: list[str] = []
        self.parts: deque[str] = deque()
        try:
            self.fds = [os.open(self.root, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)]
        except OSError as exc:
            raise_os_error(exc, f"the workspace {self.root}")
        if path.startswith("/"):
            self._reroute(path)
        else:
            self.parts.extend(path.split("/"))
            if path.endswith("/"):
                self.parts.append(".")  # a trailing slash: the last name must be a directory

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()

    def run(self, want: Want) -> Opened:
        while True:
            if not self.parts:  # the path ends at a directory already held
                fd = os.dup(self.fds[-1])
                return self._judged(fd, "/".join(self.names) or ".", want)
            part = self.parts.popleft()
            if part in ("", "."):
                continue
            if part == "..":
                self._up()
            elif self.parts:
                self._enter(part, create=want == "write" and self._name_follows())
            else:
                opened = self._open_last(part, want)
                if opened is not None:
                    return opened

    def _name_follows(self) -> bool:
        """Tell whether a file name (not `.`, `..` or a trailing slash) comes next.

        Only then may a missing directory before it be created (`write_file` makes parent
        directories).
        """
        for part in self.parts:
            if part not in ("", "."):
                return part != ".."
        return False

    def _up(self) -> None:
        if len(self.fds) > 1:
            os.close(self.fds.pop())
            self.names.pop()
            return
        self._reroute(os.path.join(self.root, "..", *self.parts))

    def _reroute(self, absolute: str) -> None:
        """Walk on from the workspace root if `absolute` lies inside it; refuse it if not."""
        self._count_link()
        resolved = Path(os.path.realpath(absolute))  # only names a path; the walk checks it
        if not resolved.is_relative_to(self.root):
            raise ToolError(
                f"path {self.path!r} resolves to {resolved}, outside the workspace "
                f"{self.root}; use a path inside the workspace",
                code=PATH_OUTSIDE_WORKSPACE,
            )
        for fd in self.fds[1:]:
            os.close(fd)
        del self.fds[1:]
        self.names.clear()
        self.parts = deque(resolved.relative_to(self.root).parts)

    def _count_link(self) -> None:
        self.links += 1
        if self.links > MAX_SYMLINKS:
            raise ToolError(
                f"path {self.path!r} passes through more than {MAX_SYMLINKS} symlinks "
                "(a symlink loop); use a path without the loop",
                code=PATH_INVALID,
            )

    def _expand(self, part: str) -> bool:
        """Put the target of the symlink `part` in front of what is left; False if no link."""
        try:
            target = os.readlink(part, dir_fd=self.fds[-1])
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.ENOENT):
                return False
            raise_os_error(exc, self.path)
        if target.startswith("/"):
            self._reroute(os.path.join(target, *self.parts))
        else:
            self._count_link()
            self.parts.extendleft(reversed(target.split("/")))
        return True

    def _enter(self, part: str, *, create: bool) -> None:
        """Open the directory `part` and hold it, or queue a symlink's target instead."""
        made = False
        while True:
            try:
                fd = os.open(part, DIR_FLAGS, dir_fd=self.fds[-1])
            except FileNotFoundError as exc:
                if not create or made:
                    raise ToolError(
                        f"{self.path}: no such file or directory", code=FS_NOT_FOUND
                    ) from exc
                self._mkdir(part)
                made = True
                continue
            except NotADirectoryError as exc:
                if self._expand(part):
                    return
                if not self._is_walkable(part):
                    raise ToolError(
                        f"{self.path}: a path component is not a directory",
                        code=FS_NOT_A_DIRECTORY,
                    ) from exc
                self._count_link()  # swapped between the open and the readlink: look again
                continue
            except OSError as exc:
                raise_os_error(exc, self.path)
            self.fds.append(fd)
            self.names.append(part)
            return

    def _is_walkable(self, part: str) -> bool:
        """Tell whether `part` is (now) a directory or a symlink: worth another look."""
        try:
            status = os.stat(part, dir_fd=self.fds[-1], follow_symlinks=False)
        except OSError as exc:
            raise_os_error(exc, self.path)
        return stat.S_ISDIR(status.st_mode) or stat.S_ISLNK(status.st_mode)

    def _mkdir(self, part: str) -> None:
        try:
            os.mkdir(part, dir_fd=self.fds[-1])
        except FileExistsError:
            return  # made meanwhile by someone else: the caller opens it
        except OSError as exc:
            raise_os_error(exc, self.path)

    def _open_last(self, part: str, want: Want) -> Opened | None:
        """Open the last component; None when it was a symlink whose target is now queued."""
        shown = "/".join([*self.names, part])
        try:
            status = os.stat(part, dir_fd=self.fds[-1], follow_symlinks=False)
        except FileNotFoundError as exc:
            if want != "write":
                raise ToolError(
                    f"{self.path}: no such file or directory", code=FS_NOT_FOUND
                ) from exc
        except OSError as exc:
            raise_os_error(exc, self.path)
        else:
            if stat.S_ISLNK(status.st_mode):
                if not self._expand(part):  # it stopped being a link: look again
                    self._count_link()
                    self.parts.appendleft(part)
                return None
            self._judge(status, shown, want)  # refuse special files before opening them
        try:
            fd = os.open(part, OPEN_FLAGS[want], 0o666, dir_fd=self.fds[-1])
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                if not self._expand(part):  # swapped after the stat: look again
                    self._count_link()
                    self.parts.appendleft(part)
                return None  # a symlink swapped in after the stat: walk its target
            if exc.errno == errno.ENXIO:
                self._refuse_special(shown, "a FIFO without a reader, a socket or a device", want)
            raise_os_error(exc, self.path)
        return self._judged(fd, shown, want)

    def _judged(self, fd: int, shown: str, want: Want) -> Opened:
        try:
            status = os.fstat(fd)
            self._judge(status, shown, want)
        except BaseException:
            os.close(fd)
            raise
        return Opened(fd, shown, status)

    def _judge(self, status: os.stat_result, shown: str, want: Want) -> None:
        mode = status.st_mode
        if stat.S_ISDIR(mode):
            if want == "read":
                raise ToolError(f"{self.path} is a directory; use list_dir", code=FS_NOT_A_FILE)
            if want in ("write", "edit"):
                raise ToolError(
                    f"path {self.path!r} names the directory {shown}, not a file; "
                    "give the path of a file",
                    code=FS_NOT_A_FILE,
                )
            return
        if not stat.S_ISREG(mode):
            self._refuse_special(shown, _kind(mode), want)
        if want == "directory":
            raise ToolError(f"{self.path} is not a directory", code=FS_NOT_A_DIRECTORY)
        if status.st_nlink > 1:
            raise ToolError(
                f"{self.path} has {status.st_nlink} hard links; the file tools refuse a file "
                "with more than one link, because another link to it may lie outside the "
                "workspace",
                code=FS_HARD_LINK,
            )

    def _refuse_special(self, shown: str, kind: str, want: Want) -> NoReturn:
        if want == "directory":
            raise ToolError(f"{self.path} is {kind}, not a directory", code=FS_NOT_A_DIRECTORY)
        raise ToolError(
            f"{self.path} is {kind}, not a regular file; the file tools only read and "
            "write regular files",
            code=FS_NOT_A_FILE,
        )


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "a special file"
