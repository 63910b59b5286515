"""Merging a zstd log's batch frames into one frame after a turn (docs/store.md#zstd-framing).

Every durable batch is its own frame, and small independent frames compress poorly (the
1000-step benchmark session: 2,002 frames, 0.99 MB). Once a turn has closed, the frames
written since the last merge hold nothing a crash could tear, so they are replaced by one
frame of the same plaintext (0.41 MB for that session at the same default level): the new
file is the untouched prefix plus the merged frame, written beside the log, fsynced, checked
to decompress to exactly the old plaintext, then renamed over the log and the directory
fsynced. A crash at any point leaves the old file or the new one, both complete. Readers
(duraloop's and dsh's) read frames layout-blind, each holding whole lines.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from duraloop.errors import StoreError

from .._files import fsync_dir, read_written, write_all
from ._zstd import FrameCodec, decompress_complete, scan_frames

_FILE_MODE = 0o600


def merge_frames(path: Path, start: int, end: int, codec: FrameCodec) -> tuple[int, int]:
    """Replace the complete frames from byte `start` to the last one by one frame.

    The last frame (the batch that closed the turn) is kept as it is, so a crash-sized cut
    of the file's end tears only that small frame, as without merging, never the merged
    one. A temporary file of an earlier merge that was killed before its rename is removed
    first (the writer's lock is held, so no merge of another process is running).

    Args:
        path: the zstd log (its writer's lock is held; `end` is its size).
        start: where the frames to merge begin (a frame boundary this backend wrote or a
            snapshot recorded).
        end: the log's size.
        codec: the backend's frame codec.

    Returns:
        The new size of the log, and where the next merge starts (the kept last frame).
        Both are `end` when there was nothing to merge (fewer than three frames).

    Raises:
        StoreError: if the log cannot be read or the new file cannot be written; the log
            is unchanged.
    """
    for stale in path.parent.glob(f"{path.name}.*.merge"):
        with contextlib.suppress(OSError):
            stale.unlink()
    data = read_written(path, end, purpose="to merge its frames")
    scan = scan_frames(data[start:], path=str(path))
    if scan.torn_start is not None or len(scan.frames) < 3:
        return end, start
    last = start + scan.frames[-1][0]
    plaintext = decompress_complete(data[start:last], path=str(path), offset=start)
    merged = codec.compress(plaintext)
    if decompress_complete(merged, path=str(path), offset=start) != plaintext:
        raise StoreError(f"merging the frames of {path} did not round-trip; nothing was merged")
    tmp = path.with_name(f"{path.name}.{secrets.token_hex(6)}.merge")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _FILE_MODE)
        try:
            write_all(fd, data[:start])
            write_all(fd, merged)
            write_all(fd, data[last:])
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise StoreError(f"cannot merge the frames of {path}: {exc}") from exc
    kept = start + len(merged)
    return kept + (end - last), kept
