"""Reading a JSONL session's snapshot file, its messages section left on disk.

See docs/store.md#snapshots.

An uncompressed snapshot's body ends with the derived messages, by far its largest section
(about 1 MB of the 1000-step benchmark session's 1.6 MB), which a resume does not read
(`log.LazyMessages`). The file is read through one small reused buffer: the header line and
the sections before the messages are kept, the messages section only digested (the body
digest still covers every byte), and the messages are read back, checked against the
header's `messagesDigest`, only when something decodes them. A zstd body is one frame: it is
read and decompressed whole, as before; so is a file of at most 256 KiB (one read).
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Final

import xxhash

from duraloop.errors import CorruptLogError
from duraloop.log import SessionCheckpoint

from .._snapshot import (
    SnapshotHeader,
    SnapshotIgnoredError,
    decode_snapshot,
    decode_snapshot_body,
    decode_snapshot_header,
    digest,
)
from ._zstd import decompress_complete

_CHUNK_BYTES: Final = 1 << 18
_HEADER_BYTES: Final = 1 << 14
SMALL_SNAPSHOT_BYTES = 1 << 18
"""A snapshot file of at most this many bytes is read whole, in one read (256 KiB)."""


def read_snapshot(
    path: Path, session_id: str, *, zstd: bool
) -> tuple[SnapshotHeader, SessionCheckpoint] | None:
    """Read and check the snapshot file at `path`, or return None if there is none.

    Args:
        path: the snapshot file.
        session_id: the session it must be of.
        zstd: whether the store is zstd-compressed (its snapshot bodies are).

    Raises:
        SnapshotIgnoredError: if it cannot be read, is damaged, another's, or another
            version (the load then reads the whole log).
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SnapshotIgnoredError(f"the snapshot cannot be read ({exc})") from None
    try:
        with io.FileIO(fd, "rb") as handle:
            return _read(handle, path, session_id, zstd=zstd)
    except OSError as exc:
        raise SnapshotIgnoredError(f"the snapshot cannot be read ({exc})") from None


def _read(
    handle: io.FileIO, path: Path, session_id: str, *, zstd: bool
) -> tuple[SnapshotHeader, SessionCheckpoint]:
    size = os.fstat(handle.fileno()).st_size
    if size <= SMALL_SNAPSHOT_BYTES:  # one read, all kept
        blob = handle.read()
        return decode_snapshot(blob, session_id, decompress=_decompress if zstd else None)
    first = handle.read(min(size, _HEADER_BYTES))
    end = first.find(b"\n")
    header = decode_snapshot_header(first[:end] if end >= 0 else None, session_id)
    body_start = end + 1
    messages_bytes = header.messages_bytes
    kept_bytes = size - body_start - messages_bytes - 1  # the sections before the messages
    if header.compression != "none" or messages_bytes <= 0 or kept_bytes <= 0:
        blob = first + handle.read()
        return decode_snapshot(blob, session_id, decompress=_decompress if zstd else None)
    kept = bytearray(first[body_start:])
    if len(kept) > kept_bytes + 1:
        del kept[kept_bytes + 1 :]
    else:
        kept += handle.read(kept_bytes + 1 - len(kept))
    body = xxhash.xxh3_64(kept)
    section = xxhash.xxh3_64()
    handle.seek(body_start + kept_bytes + 1)
    buffer = bytearray(min(_CHUNK_BYTES, messages_bytes))
    view = memoryview(buffer)
    left = messages_bytes
    while left > 0:
        count = handle.readinto(view[: min(len(buffer), left)])
        if not count:
            break
        body.update(view[:count])
        section.update(view[:count])
        left -= count
    if left or handle.read(1) or body.hexdigest() != header.body_digest:
        raise SnapshotIgnoredError("the snapshot body does not match its digest (damaged)")
    if section.hexdigest() != header.messages_digest or kept[-1:] != b"\n":
        raise SnapshotIgnoredError("the snapshot's messages section is not its header's")
    offset = body_start + kept_bytes + 1

    def messages() -> bytes:
        return _read_messages(path, offset, header)

    return header, decode_snapshot_body(header, bytes(kept[:-1]), 0, messages=messages)


def _read_messages(path: Path, offset: int, header: SnapshotHeader) -> bytes:
    """Read a snapshot's messages section back, checking it is the one digested."""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            data = handle.read(header.messages_bytes)
    except OSError as exc:
        raise CorruptLogError(
            f"the messages of the snapshot {path} cannot be read back ({exc}); load the "
            "session again"
        ) from exc
    if len(data) != header.messages_bytes or digest(data) != header.messages_digest:
        raise CorruptLogError(
            f"the snapshot {path} changed since the session was loaded from it; load the "
            "session again"
        )
    return data


def _decompress(body: bytes) -> bytes:
    try:
        return decompress_complete(body, path=None, offset=0)
    except CorruptLogError as exc:
        raise SnapshotIgnoredError(f"the snapshot body does not decompress ({exc})") from None
