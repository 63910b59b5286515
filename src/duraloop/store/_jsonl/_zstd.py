"""Zstandard framing of a JSONL log (docs/store.md#zstd-framing).

A `session.jsonl.zstd` file is a concatenation of independent standard Zstandard frames,
each with a content checksum: frame 1 holds exactly the header line, then one frame per
durable batch. No dictionary, the default level. Frames are found by a structural scan of
their headers and block headers (no decompression): invalid structure is corruption, and
end of file inside a frame makes that frame torn (it starts the torn tail).

`zstandard` is imported on first use, so a raw store never pays for its import.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from types import ModuleType

from duraloop.errors import CorruptLogError

ZSTD_LEVEL = 3
"""The Zstandard library's default level (docs/store.md#jsonl-records: "default level")."""

_MAGIC = b"\x28\xb5\x2f\xfd"  # 0xFD2FB528, little-endian
_RESERVED_DESCRIPTOR_BITS = 0x18
_DICT_ID_BYTES = (0, 1, 2, 4)
_RESERVED_BLOCK = 3
_RLE_BLOCK = 1
_CHECKSUM_BYTES = 4
_WRITE_BYTES = 1 << 20  # decompression output chunk: fewer, larger appends


@functools.cache
def _zstandard() -> ModuleType:
    import zstandard  # deferred: ~15 ms of import that a raw store never needs

    return zstandard


@dataclass(frozen=True, slots=True)
class FrameScan:
    """Where the frames of a zstd log are.

    Args:
        frames: `(start, end)` byte spans of the complete frames, in order.
        torn_start: the start of a final frame cut by end of file, or None.
    """

    frames: list[tuple[int, int]]
    torn_start: int | None


class FrameCodec:
    """Compress batches into checksummed frames and decompress scanned frames.

    One codec per backend: the compression context is reused, so a codec is not for
    concurrent use from several threads (neither is the backend that owns it).
    """

    def __init__(self) -> None:
        zstandard = _zstandard()
        self._compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True)

    def compress(self, plaintext: bytes) -> bytes:
        """Return one complete frame (content size and checksum included) of `plaintext`."""
        frame: bytes = self._compressor.compress(plaintext)
        return frame


def decompress_complete(data: bytes, *, path: str | None, offset: int) -> bytes:
    """Decompress complete frames, verifying every content checksum.

    Args:
        data: the bytes of one or more complete frames (as `scan_frames` found them).
        path: the file, for messages.
        offset: where `data` starts in the file, for messages.

    Returns:
        The concatenated plaintext.

    Raises:
        CorruptLogError: if a frame does not decode or fails its checksum.
    """
    zstandard = _zstandard()
    decompressor = zstandard.ZstdDecompressor()
    try:
        reader = decompressor.decompressobj(write_size=_WRITE_BYTES, read_across_frames=True)
        plaintext: bytes = reader.decompress(data)
    except zstandard.ZstdError as exc:
        raise CorruptLogError(
            f"zstd frame in bytes {offset}..{offset + len(data)} does not decode ({exc})", path=path
        ) from exc
    return plaintext


def decompress_torn(data: bytes) -> bytes:
    """Return what a torn final frame yields when flushed; no checksum, b"" if it fails."""
    zstandard = _zstandard()
    try:
        plaintext: bytes = zstandard.ZstdDecompressor().decompressobj().decompress(data)
    except zstandard.ZstdError:
        return b""
    return plaintext


def scan_frames(data: bytes, *, path: str | None, max_frames: int | None = None) -> FrameScan:
    """Find the complete frames of a zstd log and the start of a torn final frame.

    Args:
        data: the file (or, with `max_frames`, a prefix of it).
        path: the file, for messages.
        max_frames: stop after this many complete frames (listing reads only frame 1).

    Returns:
        The complete frames' spans and the torn frame's start (or None).

    Raises:
        CorruptLogError: if a frame's magic, descriptor or block structure is invalid.
    """
    frames: list[tuple[int, int]] = []
    start = 0
    size = len(data)
    while start < size and (max_frames is None or len(frames) < max_frames):
        end = _frame_end(data, start, path=path)
        if end is None:
            return FrameScan(frames, start)
        frames.append((start, end))
        start = end
    return FrameScan(frames, None)


def _frame_end(data: bytes, start: int, *, path: str | None) -> int | None:
    """Return the end of the frame at `start`, or None if the file ends inside it."""
    size = len(data)

    def bad(detail: str) -> CorruptLogError:
        return CorruptLogError(f"invalid zstd frame at byte {start}: {detail}", path=path)

    if size - start < len(_MAGIC) + 1:
        if not _MAGIC.startswith(data[start : start + len(_MAGIC)]):
            raise bad("bad magic number")
        return None
    if data[start : start + len(_MAGIC)] != _MAGIC:
        raise bad("bad magic number")
    descriptor = data[start + 4]
    if descriptor & _RESERVED_DESCRIPTOR_BITS:
        raise bad(f"reserved frame-header bits set (descriptor 0x{descriptor:02x})")
    single_segment = bool(descriptor & 0x20)
    content_size_flag = descriptor >> 6
    content_size_bytes = (1 if single_segment else 0, 2, 4, 8)[content_size_flag]
    position = (
        start
        + 5
        + (0 if single_segment else 1)
        + _DICT_ID_BYTES[descriptor & 0x03]
        + content_size_bytes
    )
    while True:
        if position + 3 > size:
            return None
        block_header = int.from_bytes(data[position : position + 3], "little")
        last, block_type, block_size = block_header & 1, (block_header >> 1) & 3, block_header >> 3
        if block_type == _RESERVED_BLOCK:
            raise bad(f"reserved block type at byte {position}")
        position += 3 + (1 if block_type == _RLE_BLOCK else block_size)
        if position > size:
            return None
        if last:
            break
    if descriptor & 0x04:
        position += _CHECKSUM_BYTES
    return position if position <= size else None


def later_complete_frame(data: bytes, torn_start: int, *, path: str | None) -> int | None:
    """Return where a complete, checksum-valid frame starts after the torn frame, or None.

    A torn frame is the last batch, cut by a crash before its fsync; the next batch is written
    only after that fsync. A complete frame inside what the structural scan took for the torn
    frame (a damaged block size can make a frame seem to run past the end of the file) was
    therefore written after an fsync that covered the "torn" frame: damage, not a crash (D12).

    Args:
        data: the whole file.
        torn_start: where the torn frame starts.
        path: the file, for messages.

    Returns:
        The byte offset of the first such frame, or None.
    """
    position = data.find(_MAGIC, torn_start + 1)
    while position >= 0:
        if _is_complete_frame(data, position, path=path):
            return position
        position = data.find(_MAGIC, position + 1)
    return None


def _is_complete_frame(data: bytes, start: int, *, path: str | None) -> bool:
    try:
        end = _frame_end(data, start, path=path)
        if end is None:
            return False
        decompress_complete(data[start:end], path=path, offset=start)
    except CorruptLogError:
        return False  # the magic bytes are compressed data, not a frame start
    return True
