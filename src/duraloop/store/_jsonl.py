"""The JSONL backend: one raw `session.jsonl` per session (session-spec 6.3-6.6).

Writes are durable before they return: materialization publishes header plus first batch
with `link` (never overwrites) and fsyncs the directory; an append is one write and one
fsync, rolled back to the previous size on any failure. The single-writer lock is an
`fcntl.flock` on `session.lock` held through an open descriptor, so the kernel releases it
when the holding process dies and a stale lock never blocks.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path

from duraloop.errors import (
    CorruptLogError,
    SessionExistsError,
    SessionLockedError,
    SessionNotFoundError,
    StoreError,
)
from duraloop.log import Event, SessionHeader

from ._backend import StoredLog, WriteReceipt
from ._jsonl_scan import scan_log
from ._paths import LOCK_FILE_NAME, LOG_FILE_NAME, encode_segment, session_dir
from ._records import decode_header, encode_batch, encode_header

logger = logging.getLogger(__name__)
_DIR_MODE = 0o700
_FILE_MODE = 0o600


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class JsonlBackend:
    """Raw JSONL storage under one root directory.

    Args:
        root: the store directory; created on first write.
        pack_chunks: store runs of >= 3 chunk events as packed rows (session-spec 6.4).
    """

    def __init__(self, root: Path | str, *, pack_chunks: bool = True) -> None:
        self.root = Path(root).absolute()
        self.pack_chunks = pack_chunks

    def locate(self, session_id: str) -> Path | None:
        """Return the log path of a stored session, or None.

        Raises:
            CorruptLogError: if the id is stored under two project directories.
        """
        if not self.root.is_dir():
            return None
        segment = encode_segment(session_id)
        found = [
            candidate
            for project in sorted(self.root.iterdir())
            if (candidate := project / segment / LOG_FILE_NAME).is_file()
        ]
        if len(found) > 1:
            raise CorruptLogError(
                f'duplicate JSONL session id "{session_id}": ' + ", ".join(map(str, found))
            )
        return found[0] if found else None

    def _require(self, session_id: str) -> Path:
        path = self.locate(session_id)
        if path is None:
            raise SessionNotFoundError(session_id)
        return path

    def read(self, session_id: str) -> StoredLog:
        """Read and scan one session log; see `StorageBackend.read`."""
        path = self._require(session_id)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise StoreError(f"cannot read {path}: {exc}") from exc
        result = scan_log(data, path=str(path))
        header = result.header
        if header.id != session_id:
            raise CorruptLogError(
                f'requested id "{session_id}" does not match header id "{header.id}"', path=str(path), line=1
            )
        if session_dir(self.root, header.id, header.cwd) != path.parent:
            raise CorruptLogError(
                f'header (id "{header.id}", cwd {header.cwd!r}) does not map to this file', path=str(path), line=1
            )
        torn_bytes = result.size_bytes - result.committed_bytes
        return StoredLog(header, result.events, result.torn_offset, str(path), torn_bytes)

    def exists(self, session_id: str) -> bool:
        """Return whether a log file exists for the id."""
        return self.locate(session_id) is not None

    def _mkdirs(self, directory: Path) -> None:
        missing: list[Path] = []
        current = directory
        while not current.exists():
            missing.append(current)
            current = current.parent
        for path in reversed(missing):
            with contextlib.suppress(FileExistsError):
                path.mkdir(mode=_DIR_MODE)
            _fsync_dir(path.parent)

    def materialize(self, header: SessionHeader, batch: Sequence[Event]) -> WriteReceipt:
        """Publish header plus first batch atomically; see `StorageBackend.materialize`."""
        if self.locate(header.id) is not None:
            raise SessionExistsError(f'session "{header.id}" already has a persisted log; resume it instead')
        directory = session_dir(self.root, header.id, header.cwd)
        final = directory / LOG_FILE_NAME
        tmp = directory / f"{LOG_FILE_NAME}.{secrets.token_hex(6)}.tmp"
        payload = encode_header(header) + encode_batch(batch, pack_chunks=self.pack_chunks)
        try:
            self._mkdirs(directory)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _FILE_MODE)
            try:
                _write_all(fd, payload)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.link(tmp, final)
            _fsync_dir(directory)
        except FileExistsError as exc:
            raise SessionExistsError(f'session "{header.id}" already has a persisted log; resume it instead') from exc
        except OSError as exc:
            raise StoreError(f'cannot create the log of session "{header.id}" at {final}: {exc}') from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        return WriteReceipt(len(payload), 2)

    def append(self, session_id: str, batch: Sequence[Event]) -> WriteReceipt:
        """Append one batch with one write and one fsync; see `StorageBackend.append`."""
        path = self._require(session_id)
        payload = encode_batch(batch, pack_chunks=self.pack_chunks)
        if not payload:
            return WriteReceipt(0, 0)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            raise StoreError(f"cannot open {path} for append: {exc}") from exc
        try:
            size = os.fstat(fd).st_size
            try:
                _write_all(fd, payload)
                os.fsync(fd)
            except OSError as exc:
                try:
                    os.ftruncate(fd, size)
                    os.fsync(fd)
                except OSError as rollback_exc:
                    raise StoreError(
                        f"append to {path} failed ({exc}) and rolling back to {size} bytes also "
                        f"failed ({rollback_exc}); the log may end in a torn line, which the next "
                        "load truncates"
                    ) from exc
                raise StoreError(f"append to {path} failed and was rolled back: {exc}") from exc
        finally:
            os.close(fd)
        return WriteReceipt(len(payload), 1)

    def truncate(self, session_id: str, torn: int) -> int:
        """Cut the file at byte `torn` and fsync; see `StorageBackend.truncate`."""
        path = self._require(session_id)
        try:
            fd = os.open(path, os.O_WRONLY)
            try:
                size = os.fstat(fd).st_size
                os.ftruncate(fd, torn)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise StoreError(f"cannot truncate the torn tail of {path}: {exc}") from exc
        logger.warning(
            "session %s: truncated torn tail at byte %d (%d bytes)", session_id, torn, size - torn
        )
        return size - torn

    def list_headers(self) -> list[SessionHeader]:
        """Read the header line of every stored log; see `StorageBackend.list_headers`."""
        if not self.root.is_dir():
            return []
        headers: list[SessionHeader] = []
        seen: dict[str, Path] = {}
        for project in sorted(self.root.iterdir()):
            if not project.is_dir():
                continue
            for directory in sorted(project.iterdir()):
                path = directory / LOG_FILE_NAME
                if not path.is_file():
                    continue
                with path.open("rb") as handle:
                    first = handle.readline()
                if not first.endswith(b"\n"):
                    continue
                header = decode_header(first[:-1], path=str(path))
                if header.id in seen:
                    raise CorruptLogError(f'duplicate JSONL session id "{header.id}": {seen[header.id]}, {path}')
                seen[header.id] = path
                headers.append(header)
        return headers

    def lock(self, session_id: str, *, cwd: str | None) -> Callable[[], None]:
        """Take an exclusive `flock` on `session.lock`; see `StorageBackend.lock`."""
        existing = self.locate(session_id)
        directory = existing.parent if existing is not None else session_dir(self.root, session_id, cwd)
        lock_path = directory / LOCK_FILE_NAME
        try:
            self._mkdirs(directory)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, _FILE_MODE)
        except OSError as exc:
            raise StoreError(f"cannot open the lock file {lock_path}: {exc}") from exc
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
