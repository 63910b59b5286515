"""The JSONL backend: one `session.jsonl` (or `session.jsonl.zstd`) per session.

See docs/store.md#jsonl-layout, #reading-and-torn-tails.

Writes are durable before they return: materialization publishes header plus first batch
with `link` (never overwrites) and fsyncs the directory; an append is one write and one
fsync, rolled back to the previous size on any failure. The backend remembers where it left
each file (after its own read, write or repair); an append that finds the file another size
refuses with `AppendConflictError` instead of writing after bytes it did not write (a torn
tail would glue onto the batch's first line). The single-writer lock is an
`fcntl.flock` on `session.lock` held through an open descriptor, so the kernel releases it
when the holding process dies and a stale lock never blocks.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from duraloop.errors import (
    AppendConflictError,
    ConfigError,
    CorruptLogError,
    SessionExistsError,
    SessionNotFoundError,
    StoreError,
)
from duraloop.log import Event, SessionHeader

from .._backend import DamagedLog, StoredLog, WriteReceipt
from .._codec._records import encode_batch, encode_header
from .._files import (
    file_revision,
    fsync_dir,
    lock_directory,
    read_stable,
    truncate_keeping_tail,
    write_all,
)
from .._snapshot import SnapshotRead, encode_snapshot
from ._consolidate import merge_frames
from ._listing import list_logs
from ._paths import (
    LOCK_FILE_NAME,
    LOG_FILE_NAME,
    ZSTD_LOG_FILE_NAME,
    check_identity,
    check_session_id,
    encode_segment,
    session_dir,
)
from ._scan import scan_log, scan_zstd_log
from ._snapshot_read import read_snapshot
from ._snapshots import PrefixDigests, read_with_snapshot, snapshot_path, write_snapshot_file
from ._zstd import FrameCodec

logger = logging.getLogger(__name__)
_DIR_MODE = 0o700
_FILE_MODE = 0o600
Compression = Literal["none", "zstd"]
"""How a JSONL store encodes its files (docs/store.md#jsonl-layout)."""


class JsonlBackend:
    """JSONL storage under one root directory, raw or zstd-framed.

    See docs/store.md#jsonl-layout, #reading-and-torn-tails.

    Args:
        root: the store directory; created on first write.
        pack_chunks: store runs of >= 3 chunk events as packed rows (docs/store.md#jsonl-records).
        compression: `"none"` writes `session.jsonl`; `"zstd"` writes `session.jsonl.zstd`,
            one checksummed Zstandard frame for the header and one per durable batch. One
            root holds one encoding: a log of the other kind is refused, never converted.

    Raises:
        ConfigError: if `compression` is not `"none"` or `"zstd"`.
    """

    def __init__(
        self, root: Path | str, *, pack_chunks: bool = True, compression: Compression = "none"
    ) -> None:
        if compression not in ("none", "zstd"):
            raise ConfigError(f'store compression must be "none" or "zstd", got {compression!r}')
        self.root = Path(root).absolute()
        self.pack_chunks = pack_chunks
        self.compression: Compression = compression
        self._file_name = ZSTD_LOG_FILE_NAME if compression == "zstd" else LOG_FILE_NAME
        self._other_file_name = LOG_FILE_NAME if compression == "zstd" else ZSTD_LOG_FILE_NAME
        self._codec = FrameCodec() if compression == "zstd" else None
        self._read_paths: dict[str, Path] = {}
        self._ends: dict[str, int] = {}
        self._digests = PrefixDigests()
        self._merged: dict[str, int] = {}

    def _frame(self, plaintext: bytes) -> bytes:
        """Return `plaintext` as stored: itself (raw), or one checksummed frame (zstd)."""
        return plaintext if self._codec is None else self._codec.compress(plaintext)

    def _check_encoding(self, directory: Path) -> None:
        other = directory / self._other_file_name
        if other.exists():
            raise StoreError(
                f"{other} is a {'zstd' if self.compression == 'none' else 'raw'} log, but this "
                f'store writes compression="{self.compression}"; one root holds one encoding — '
                "open it with the matching `compression=` (the `duraloop` CLI opens a root in the "
                "encoding its logs use; keep raw and zstd sessions under separate `--store` roots)"
            )

    def locate(self, session_id: str) -> Path | None:
        """Return the log path of a stored session, or None.

        Raises:
            CorruptLogError: if the id is stored under two project directories.
            StoreError: if the id's log has the other encoding (`compression=`).
            UsageError: if the id is not a valid session id (`check_session_id`).
        """
        check_session_id(session_id)  # refuses an id no file could be named for
        segment = encode_segment(session_id)
        if not self.root.is_dir():
            return None
        projects = sorted(self.root.iterdir())
        found = [
            path for project in projects if (path := project / segment / self._file_name).is_file()
        ]
        if not found:
            for project in projects:
                self._check_encoding(project / segment)
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
        data = read_stable(path)
        if self.compression == "zstd":
            result = scan_zstd_log(data, path=str(path))
        else:
            result = scan_log(data, path=str(path))
        check_identity(self.root, result.header, session_id, path)
        self._read_paths[session_id] = path
        if result.torn_offset is None:
            self._ends[session_id] = result.size_bytes
            self._digests.reset(session_id, data)
            self._merged.setdefault(session_id, result.size_bytes)
        torn_bytes = result.size_bytes - result.committed_bytes
        return StoredLog(
            result.header,
            result.events,
            result.torn_offset,
            str(path),
            torn_bytes,
            result.recovered_events,
            result.cut,
        )

    def read_snapshot(self, session_id: str) -> SnapshotRead | None:
        """Read a session through its snapshot; see `StorageBackend.read_snapshot`."""
        path = self._require(session_id)
        zstd = self.compression == "zstd"
        snapshot = read_snapshot(snapshot_path(path), session_id, zstd=zstd)
        if snapshot is None:
            return None
        read = read_with_snapshot(path, snapshot, zstd=zstd, digests=self._digests)
        stored = read.stored
        check_identity(self.root, stored.header, session_id, path)
        self._read_paths[session_id] = path
        self._merged[session_id] = read.covered_bytes  # merged when the snapshot was written
        if stored.torn is None:
            self._ends[session_id] = read.log_size_bytes
        return read

    def merge_frames(self, session_id: str) -> int:
        """Merge the frames since the last merge into one (see `StorageBackend`; 0 if raw).

        It starts where the last merge stopped, never at a frame an earlier process wrote
        unless a snapshot says it was merged (docs/store.md#zstd-framing).
        """
        end = self._ends.get(session_id)
        path = self._read_paths.get(session_id)
        if self._codec is None or end is None or path is None:
            return 0
        start = self._merged.setdefault(session_id, end)
        size, self._merged[session_id] = merge_frames(path, start, end, self._codec)
        if size != end:
            self._ends[session_id] = size
            self._digests.forget(session_id)
        return end - size

    def write_snapshot(self, session_id: str, events: int, body: bytes) -> bool:
        """Write a snapshot over what this backend wrote; see `StorageBackend.write_snapshot`."""
        end = self._ends.get(session_id)
        path = self._read_paths.get(session_id)
        if end is None or path is None:
            return False
        log_digest = self._digests.of(session_id, path, end)
        codec = self._codec
        blob = encode_snapshot(
            session_id,
            body if codec is None else codec.compress(body),
            events=events,
            log_bytes=end,
            log_digest=log_digest,
            compression="none" if codec is None else "zstd",
        )
        write_snapshot_file(path, blob)
        return True

    def revision(self, session_id: str) -> str | None:
        """Stat the id's log file; see `StorageBackend.revision`."""
        path = self._read_paths.get(session_id)
        if path is None or not path.is_file():
            path = self.locate(session_id)
            if path is None:
                return None
            self._read_paths[session_id] = path
        try:
            return "jsonl:" + ":".join(map(str, file_revision(os.stat(path))))
        except OSError:
            return None

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
            fsync_dir(path.parent)

    def materialize(self, header: SessionHeader, batch: Sequence[Event]) -> WriteReceipt:
        """Publish header plus first batch atomically; see `StorageBackend.materialize`."""
        if self.locate(header.id) is not None:
            raise SessionExistsError(
                f'session "{header.id}" already has a persisted log; resume it instead'
            )
        directory = session_dir(self.root, header.id, header.cwd)
        final = directory / self._file_name
        tmp = directory / f"{self._file_name}.{secrets.token_hex(6)}.tmp"
        lines = encode_batch(batch, pack_chunks=self.pack_chunks)
        header_frame = self._frame(encode_header(header))
        payload = header_frame + (self._frame(lines) if lines else b"")
        try:
            self._mkdirs(directory)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _FILE_MODE)
            try:
                write_all(fd, payload)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.link(tmp, final)
            fsync_dir(directory)
            self._ends[header.id] = len(payload)
            self._read_paths[header.id] = final
            self._digests.reset(header.id, payload)
            self._merged[header.id] = len(header_frame)
        except FileExistsError as exc:
            raise SessionExistsError(
                f'session "{header.id}" already has a persisted log; resume it instead'
            ) from exc
        except OSError as exc:
            raise StoreError(
                f'cannot create the log of session "{header.id}" at {final}: {exc}'
            ) from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        return WriteReceipt(len(payload), 2)

    def append(self, session_id: str, batch: Sequence[Event]) -> WriteReceipt:
        """Append one batch with one write and one fsync; see `StorageBackend.append`.

        Raises:
            AppendConflictError: if the file is not the size this backend left it at.
            StoreError: if the write fails; it is rolled back.
        """
        return self._append(self._require(session_id), session_id, batch)

    def _append(self, path: Path, session_id: str, batch: Sequence[Event]) -> WriteReceipt:
        lines = encode_batch(batch, pack_chunks=self.pack_chunks)
        if not lines:
            return WriteReceipt(0, 0)
        payload = self._frame(lines)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            raise StoreError(f"cannot open {path} for append: {exc}") from exc
        try:
            size = os.fstat(fd).st_size
            expected = self._ends.get(session_id, size)
            if size != expected:
                raise AppendConflictError(
                    f"{path} is {size} bytes but this store left it at {expected}: a failed "
                    "append or a process ignoring the session lock changed it; nothing was written"
                )
            try:
                write_all(fd, payload)
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
        self._ends[session_id] = size + len(payload)
        self._digests.extend(session_id, size, payload)
        return WriteReceipt(len(payload), 1)

    def repair(self, session_id: str, torn: int | None, events: Sequence[Event]) -> WriteReceipt:
        """Keep the torn tail, truncate at byte `torn` and fsync, then append `events`.

        See `StorageBackend.repair`: the bytes from `torn` on are first written, fsynced, to
        `<log>.torn-<UTC time>` (mode 0600) beside the log: three fsyncs (copy, its directory,
        the truncated log), then one for the appended events.
        """
        path = self._require(session_id)
        fsync_count = 0
        copy: str | None = None
        if torn is not None:
            copy = self._truncate(path, session_id, torn)
            fsync_count = 3
        receipt = self._append(path, session_id, events)
        return WriteReceipt(receipt.bytes_written, receipt.fsync_count + fsync_count, copy)

    def _truncate(self, path: Path, session_id: str, torn: int) -> str:
        """Keep the bytes from `torn` on beside the log, then truncate there; return the copy."""
        copy, size = truncate_keeping_tail(path, torn)
        self._ends[session_id] = torn
        self._digests.forget(session_id)
        self._merged[session_id] = min(self._merged.get(session_id, torn), torn)
        logger.warning(
            "session %s: truncated torn tail at byte %d (%d bytes, kept in %s)",
            session_id,
            torn,
            size - torn,
            copy,
        )
        return copy

    def list_headers(self) -> list[SessionHeader | DamagedLog]:
        """Read the header record of every stored log; see `StorageBackend.list_headers`.

        Logs are published whole (write to a temp file, then link), so a log whose header
        line (raw) or first frame (zstd) is missing, incomplete or unreadable is damaged: it
        is a `DamagedLog` entry named by its directory, and the other logs are still listed.
        """
        return list_logs(
            self.root,
            self._file_name,
            framed=self._codec is not None,
            check_encoding=self._check_encoding,
        )

    def lock(self, session_id: str, *, cwd: str | None) -> Callable[[], None]:
        """Take an exclusive `flock` on `session.lock`; see `StorageBackend.lock`.

        The lock of a session that has no log when it is released (a run that failed before
        its first write, an append to an unknown id) is removed again, with the directories
        it created, so a failed command leaves no orphan `session.lock` behind (D14).
        """
        existing = self.locate(session_id)
        directory = (
            existing.parent if existing is not None else session_dir(self.root, session_id, cwd)
        )

        def stored() -> bool:
            return (directory / self._file_name).exists() or (
                directory / self._other_file_name
            ).exists()

        return lock_directory(
            directory / LOCK_FILE_NAME, session_id, mkdirs=self._mkdirs, stored=stored
        )
