"""Snapshots: a session's derived state, bound to the exact log prefix it was taken over.

See docs/store.md#snapshots.

A snapshot file is one JSON header line and the checkpoint (`log.SessionCheckpoint`, as
the newline-separated JSON sections `log.encode_checkpoint` writes). The header binds it to
its log: the number of events covered, the byte length of the log prefix holding them
(header line included), and the XXH3-64 digest of those bytes; a digest of the checkpoint
body guards the file itself. Loading uses a snapshot only when all of that matches the log
as read now; anything else (missing, damaged, stale, another session's, another version) is
ignored with a reason, and the log alone is read, as without a snapshot. The log is the
only source of truth: a snapshot is never written into it, dsh never reads one, and
deleting it loses nothing.

XXH3-64 rather than CRC32 (issue 11): on this project's 2-core machine it digests the 4.4 MB
1000-step log in 0.3 ms against CRC32's 3.7 ms (zlib) — the check runs on every resume.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import msgspec
import xxhash

from duraloop.log import Event, SessionCheckpoint, decode_checkpoint

from ._backend import StoredLog

SNAPSHOT_FORMAT = "duraloop-snapshot"
SNAPSHOT_VERSION = 2
"""2: the checkpoint is newline-separated sections (head, messages, encoded prefixes); a
version-1 snapshot is ignored with its reason (the log alone is read, and the next turn end
writes a version-2 one)."""


class SnapshotHeader(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """The first line of a snapshot file.

    Args:
        format: always `duraloop-snapshot`.
        version: the snapshot format version (`SNAPSHOT_VERSION`).
        session: the session id.
        events: the events the checkpoint covers.
        log_bytes: the byte length of the log prefix that holds them (stored bytes: the
            compressed frames of a zstd log). SQLite: the rowid of the row holding the last
            covered event (`store/_sqlite/_snapshots.py`).
        log_digest: XXH3-64 of those bytes, 16 hex digits (SQLite: of the binding).
        body_digest: XXH3-64 of the checkpoint body as stored, 16 hex digits.
        compression: `"none"`, or `"zstd"` (the body is one Zstandard frame; a zstd store
            writes its snapshots so).
        messages_bytes: the byte length of the body's last section, the derived messages
            (0 for a compressed body): a reader may leave it on disk until it is decoded.
        messages_digest: XXH3-64 of that section ("" when `messages_bytes` is 0), which
            such a reader checks when it reads the section.
    """

    format: str
    version: int
    session: str
    events: int
    log_bytes: int
    log_digest: str
    body_digest: str
    compression: str = "none"
    messages_bytes: int = 0
    messages_digest: str = ""


_header_encoder = msgspec.json.Encoder()
_header_decoder = msgspec.json.Decoder(SnapshotHeader)


def digest(data: bytes | memoryview) -> str:
    """Return the XXH3-64 digest of `data` as 16 hex digits."""
    return xxhash.xxh3_64_hexdigest(data)


def encode_snapshot(
    session_id: str,
    body: bytes,
    *,
    events: int,
    log_bytes: int,
    log_digest: str,
    compression: str = "none",
) -> bytes:
    """Return the snapshot file: header line plus checkpoint body.

    Args:
        session_id: the session id.
        body: the encoded checkpoint (`log.encode_checkpoint`), compressed if `compression`.
        events: the events it covers.
        log_bytes: the byte length of the log prefix holding them.
        log_digest: `digest()` of those bytes.
        compression: how `body` is stored (`"none"` or `"zstd"`).
    """
    messages_bytes, messages_digest = 0, ""
    if compression == "none":
        last = memoryview(body)[body.rfind(b"\n") + 1 :]  # the messages section
        messages_bytes, messages_digest = len(last), digest(last)
    header = SnapshotHeader(
        format=SNAPSHOT_FORMAT,
        version=SNAPSHOT_VERSION,
        session=session_id,
        events=events,
        log_bytes=log_bytes,
        log_digest=log_digest,
        body_digest=digest(body),
        compression=compression,
        messages_bytes=messages_bytes,
        messages_digest=messages_digest,
    )
    return _header_encoder.encode(header) + b"\n" + body


class SnapshotIgnoredError(Exception):
    """A snapshot that cannot be used; the message says why (the load reads the log alone)."""


def decode_snapshot(
    blob: bytes,
    session_id: str,
    *,
    decompress: Callable[[bytes], bytes] | None = None,
) -> tuple[SnapshotHeader, SessionCheckpoint]:
    """Decode a snapshot file and check it is whole and this session's.

    Args:
        blob: the snapshot file.
        session_id: the session it must be of.
        decompress: decodes a `"zstd"` body (None: such a snapshot is ignored).

    Raises:
        SnapshotIgnoredError: if it is damaged, of another format or version, another
            session's, or its header and checkpoint disagree.
    """
    end = blob.find(b"\n")
    header = decode_snapshot_header(blob[:end] if end >= 0 else None, session_id)
    body = memoryview(blob)[end + 1 :]
    if digest(body) != header.body_digest:
        raise SnapshotIgnoredError("the snapshot body does not match its digest (damaged)")
    raw, start = blob, end + 1
    if header.compression == "zstd" and decompress is not None:
        raw, start = decompress(bytes(body)), 0
    elif header.compression != "none":
        raise SnapshotIgnoredError(f"the snapshot body is {header.compression}-compressed")
    return header, decode_snapshot_body(header, raw, start)


def decode_snapshot_header(line: bytes | None, session_id: str) -> SnapshotHeader:
    """Decode a snapshot's header line and check it is of this format, version and session.

    Args:
        line: the first line of the file, without its newline (None: the file has none).
        session_id: the session it must be of.

    Raises:
        SnapshotIgnoredError: if it is missing, unreadable, of another format or version,
            or another session's.
    """
    if line is None:
        raise SnapshotIgnoredError("the snapshot file has no header line")
    try:
        header = _header_decoder.decode(line)
    except msgspec.MsgspecError as exc:
        raise SnapshotIgnoredError(f"the snapshot header is unreadable ({exc})") from None
    if header.format != SNAPSHOT_FORMAT or header.version != SNAPSHOT_VERSION:
        raise SnapshotIgnoredError(
            f"the snapshot is {header.format} version {header.version}, not "
            f"{SNAPSHOT_FORMAT} version {SNAPSHOT_VERSION}"
        )
    if header.session != session_id:
        raise SnapshotIgnoredError(f"the snapshot is of session {header.session!r}")
    return header


def decode_snapshot_body(
    header: SnapshotHeader,
    raw: bytes,
    start: int,
    *,
    messages: Callable[[], bytes] | None = None,
) -> SessionCheckpoint:
    """Decode a snapshot's (digest-checked, uncompressed) body and check it fits its header.

    Args:
        header: the checked header.
        raw: holds the body from `start` on (without its messages section when `messages`).
        start: where the body begins in `raw`.
        messages: reads the messages section a reader left on disk.

    Raises:
        SnapshotIgnoredError: if it is not a checkpoint, or disagrees with the header.
    """
    try:
        checkpoint = decode_checkpoint(raw, start, messages=messages)
    except (msgspec.MsgspecError, ValueError) as exc:
        raise SnapshotIgnoredError(f"the snapshot body is not a checkpoint ({exc})") from None
    if checkpoint.count != header.events:
        raise SnapshotIgnoredError("the snapshot header and body disagree on the events covered")
    return checkpoint


def check_binding(header: SnapshotHeader, data: bytes) -> None:
    """Check that the log `data` (as read now) begins with the prefix the snapshot covers.

    Raises:
        SnapshotIgnoredError: if the log is shorter than the prefix, or its first
            `log_bytes` bytes are not the ones digested (stale: the log was cut or changed).
    """
    if len(data) < header.log_bytes:
        raise SnapshotIgnoredError(
            f"the log is {len(data)} bytes, shorter than the {header.log_bytes} the snapshot "
            "covers (stale)"
        )
    if digest(memoryview(data)[: header.log_bytes]) != header.log_digest:
        raise SnapshotIgnoredError("the log prefix the snapshot covers has changed (stale)")


@dataclass(frozen=True, slots=True)
class SnapshotRead:
    """What a backend read of a session with a usable snapshot returned.

    Args:
        checkpoint: the verified checkpoint.
        stored: the log after the covered prefix: `events` holds the tail only (seq
            `checkpoint.count` on), torn marker and counts as `StorageBackend.read`.
        load_prefix: decodes the covered prefix's events as stored (checked against the
            binding again), for a reader that needs them.
        covered_bytes: the byte length of the covered log prefix.
        log_size_bytes: the byte length of the whole log as read (JSONL; 0 for a backend
            whose log is no file).
    """

    checkpoint: SessionCheckpoint
    stored: StoredLog
    load_prefix: Callable[[], list[Event]]
    covered_bytes: int
    log_size_bytes: int = 0
