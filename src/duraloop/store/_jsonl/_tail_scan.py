r"""Scan only the part of a JSONL log after a snapshot's covered prefix.

See docs/store.md#snapshots.

The same rules as `_scan.py` (`scan_log`, `scan_zstd_log`), applied from the byte offset where
the covered prefix ends, into a `LazyEvents` that already counts the prefix's events (so
every seq check is the full scan's). A raw tail is split into lines after the offset; a zstd
tail is the frames after it. A tail scan that meets damage raises as the full scan would; the
store then reads the whole log again without the snapshot, so every error message is the
full scan's.
"""

from __future__ import annotations

from collections.abc import Callable

from duraloop.errors import CorruptLogError
from duraloop.log import LazyEvents

from .._files import collector_paused
from .._tail import TornTail
from ._scan import _FRAGMENT, _accept, _scan_lines
from ._zstd import decompress_complete, decompress_torn, later_complete_frame, scan_frames


def scan_raw_tail(
    tail: bytes,
    offset: int,
    events: LazyEvents,
    *,
    path: str | None,
    prefix_lines: Callable[[], int],
) -> tuple[int, TornTail | None]:
    """Accept the raw lines after byte `offset` into `events`.

    Args:
        tail: the file's bytes from `offset` to its end.
        offset: where the covered prefix ends (just after a newline).
        events: the prefix's events (lazy); the tail's are appended.
        path: the file, for messages.
        prefix_lines: counts the lines of the covered prefix (only for a torn tail's line
            number).

    Returns:
        The committed byte length of the whole file, and the torn tail (None when clean).

    Raises:
        CorruptLogError: as `scan_log` for damage inside the committed region.
    """
    size = offset + len(tail)
    lines = [b"", *tail.split(b"\n")]
    with collector_paused():
        accepted_to, issue = _accept(lines, len(lines) - 1, events, projected=False)
    line_base = 0
    cut = None
    if issue is not None:
        # The slow path, with line numbers: count the prefix's lines, scan the tail again.
        del events.tail[:]
        line_base = prefix_lines() - 1
        accepted_to, cut = _scan_lines(
            lines, events, path=path, projected=False, line_base=line_base
        )
    fragment = 1 if lines[-1] else 0
    if cut is None:
        if not fragment:
            return size, None
        torn = TornTail.of(len(lines[-1]), _FRAGMENT, [], unreadable_count=1)
        return size - len(lines[-1]), torn
    committed = offset + sum(map(len, lines[1:accepted_to])) + accepted_to - 1
    reason = f"{cut.reason} at line {line_base + accepted_to + 1}"
    torn = TornTail.of(
        size - committed, reason, cut.events, unreadable_count=cut.unreadable_count + fragment
    )
    return committed, torn


def scan_zstd_tail(
    tail: bytes, offset: int, events: LazyEvents, *, path: str | None
) -> tuple[int, TornTail | None, int]:
    """Accept the zstd frames after byte `offset` into `events`.

    Args:
        tail: the file's bytes from `offset` to its end.
        offset: where the covered prefix ends (a frame boundary).
        events: the prefix's events (lazy); the tail's are appended.
        path: the file, for messages.

    Returns:
        The committed byte length, the torn tail (None when clean), and how many of the
        appended events came from a torn final frame (`StoredLog.recovered_events`).

    Raises:
        CorruptLogError: as `scan_zstd_log` for damage inside the complete frames.
    """
    size = offset + len(tail)
    scan = scan_frames(tail, path=path)
    body = b""
    if scan.frames:
        start, end = scan.frames[0][0], scan.frames[-1][1]
        body = decompress_complete(tail[start:end], path=path, offset=offset + start)
    lines = [b"", *body.split(b"\n")]
    with collector_paused():
        accepted_to, issue = _accept(lines, len(lines) - 1, events, projected=False)
    if issue is not None or lines[-1]:
        raise CorruptLogError(
            "damage inside a complete zstd frame after the snapshot's prefix", path=path
        )
    if scan.torn_start is None:
        return size, None, 0
    torn_start = offset + scan.torn_start
    later = later_complete_frame(tail, scan.torn_start, path=path)
    if later is not None:
        raise CorruptLogError(
            f"the zstd frame at byte {torn_start} is cut short, but a complete frame follows",
            path=path,
        )
    complete = len(events)
    tail_lines = [b"", *decompress_torn(tail[scan.torn_start :]).split(b"\n")]
    _, cut = _scan_lines(tail_lines, events, path=path, projected=False)
    reason = f"a torn zstd frame at byte {torn_start}" + (f" ({cut.reason})" if cut else "")
    unreadable = (cut.unreadable_count if cut else 0) + (1 if tail_lines[-1] else 0)
    torn = TornTail.of(
        size - torn_start, reason, cut.events if cut else [], unreadable_count=unreadable
    )
    return torn_start, torn, len(events) - complete
