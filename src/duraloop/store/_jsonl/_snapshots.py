"""Snapshot files of the JSONL backend: `session.snapshot` beside the log.

See docs/store.md#snapshots.

The file is a cache: written with a temporary file and a rename (never fsynced: a lost or
torn snapshot is ignored and costs one full read), mode 0600, in the session directory. dsh
reads only `session.jsonl[.zstd]` there, as it ignores `session.lock`. The digest of the log
prefix is kept running as the backend writes (`PrefixDigests`), so taking a snapshot never
reads the log back.
"""

from __future__ import annotations

from pathlib import Path

import xxhash

from duraloop.errors import CorruptLogError
from duraloop.log import Event, LazyEvents, SessionCheckpoint

from .._backend import StoredLog
from .._files import read_written, replace_private_file
from .._snapshot import SnapshotHeader, SnapshotIgnoredError, SnapshotRead, check_binding
from ._covered_read import read_covered
from ._scan import read_header, scan_log, scan_zstd_log
from ._tail_scan import scan_raw_tail, scan_zstd_tail

SNAPSHOT_FILE_NAME = "session.snapshot"


class PrefixDigests:
    """The running XXH3-64 digest of each session log's bytes, as far as this backend knows them."""

    def __init__(self) -> None:
        self._states: dict[str, tuple[int, xxhash.xxh3_64]] = {}

    def reset(self, session_id: str, data: bytes | memoryview) -> None:
        """Digest a log's bytes afresh (after a read, or a materialization)."""
        self._states[session_id] = (len(data), xxhash.xxh3_64(data))

    def adopt(self, session_id: str, size: int, state: xxhash.xxh3_64) -> None:
        """Keep `state`, the digest of the log's first `size` bytes."""
        self._states[session_id] = (size, state)

    def extend(self, session_id: str, previous_size: int, payload: bytes) -> None:
        """Add an append of `payload` at `previous_size`; forget a digest of another size."""
        entry = self._states.get(session_id)
        if entry is None or entry[0] != previous_size:
            self._states.pop(session_id, None)
            return
        entry[1].update(payload)
        self._states[session_id] = (previous_size + len(payload), entry[1])

    def forget(self, session_id: str) -> None:
        """Drop a digest (the log was truncated)."""
        self._states.pop(session_id, None)

    def of(self, session_id: str, path: Path, size: int) -> str:
        """Return the digest of the log's first `size` bytes, reading them if not known.

        Raises:
            StoreError: if the log cannot be read.
        """
        entry = self._states.get(session_id)
        if entry is not None and entry[0] == size:
            return entry[1].hexdigest()
        self.reset(session_id, read_written(path, size, purpose="to take a snapshot"))
        return self._states[session_id][1].hexdigest()


def snapshot_path(log_path: Path) -> Path:
    """Return where the snapshot of the log at `log_path` lives."""
    return log_path.parent / SNAPSHOT_FILE_NAME


def read_with_snapshot(
    path: Path,
    snapshot: tuple[SnapshotHeader, SessionCheckpoint],
    *,
    zstd: bool,
    digests: PrefixDigests,
) -> SnapshotRead:
    """Verify a snapshot against the log as read now and scan only the tail after its prefix.

    The covered prefix is digested as it is read, not kept (`read_covered`).

    Args:
        path: the log file.
        snapshot: the checked snapshot header and checkpoint (`read_snapshot`).
        zstd: whether the log is zstd-framed.
        digests: the backend's running digests; a clean log's is set to the bytes read.

    Returns:
        The read: the checkpoint, the log's header (the caller checks its identity), the
        tail with its torn marker, the prefix loader.

    Raises:
        SnapshotIgnoredError: if the snapshot is damaged, another's, or stale.
        CorruptLogError: if the header or the tail is damaged (the caller reads the whole
            log again).
        SessionFormatUnsupportedError: if the header is of another format version.
        StoreError: if the log cannot be read.
    """
    snap, checkpoint = snapshot
    covered = read_covered(path, snap.log_bytes)
    header = read_header(covered.head, zstd=zstd, path=str(path))
    if covered.prefix_bytes < snap.log_bytes:
        raise SnapshotIgnoredError(
            f"the log is {covered.size} bytes, shorter than the {snap.log_bytes} the snapshot "
            "covers (stale)"
        )
    state = covered.state
    if state.hexdigest() != snap.log_digest:
        raise SnapshotIgnoredError("the log prefix the snapshot covers has changed (stale)")

    def load_prefix() -> list[Event]:
        return read_prefix(path, snap, zstd=zstd)

    def prefix_lines() -> int:
        return read_written(path, snap.log_bytes, purpose="to number its lines").count(b"\n")

    count = checkpoint.count
    events = LazyEvents(count, load_prefix, {count - 1: checkpoint.last_event})
    recovered = 0
    tail, size = covered.tail, covered.size
    if zstd:
        committed, cut, recovered = scan_zstd_tail(tail, snap.log_bytes, events, path=str(path))
    else:
        committed, cut = scan_raw_tail(
            tail, snap.log_bytes, events, path=str(path), prefix_lines=prefix_lines
        )
    torn = committed if committed < size else None
    if torn is None:
        state.update(tail)
        digests.adopt(header.id, size, state)
    stored = StoredLog(header, events.tail, torn, str(path), size - committed, recovered, cut)
    return SnapshotRead(checkpoint, stored, load_prefix, snap.log_bytes, size)


def read_prefix(path: Path, snap: SnapshotHeader, *, zstd: bool) -> list[Event]:
    """Decode the log prefix a snapshot covers, checking it is still the one digested.

    Raises:
        CorruptLogError: if the prefix changed or does not decode to exactly the covered
            events without a torn tail.
    """
    try:
        with path.open("rb") as handle:
            data = handle.read(snap.log_bytes)
        check_binding(snap, data)
    except (OSError, SnapshotIgnoredError) as exc:
        raise CorruptLogError(
            f"the log prefix a snapshot covers cannot be read back ({exc}); load the session again",
            path=str(path),
        ) from exc
    result = scan_zstd_log(data, path=str(path)) if zstd else scan_log(data, path=str(path))
    if result.torn_offset is not None or len(result.events) != snap.events:
        raise CorruptLogError(
            "the log prefix a snapshot covers does not decode to its events", path=str(path)
        )
    return result.events


def write_snapshot_file(log_path: Path, blob: bytes) -> None:
    """Replace the snapshot beside `log_path` with `blob` (temporary file, then rename).

    Raises:
        StoreError: if it cannot be written (nothing of the log is touched).
    """
    replace_private_file(snapshot_path(log_path), blob, what="the snapshot")
