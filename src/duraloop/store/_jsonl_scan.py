r"""Scan a JSONL session log: header, committed prefix, torn tail (session-spec 6.6).

The raw rule, exactly: the final segment without `\n` is a torn fragment. Complete lines are
decoded in order while they stay contiguous. At the first unparsable line or seq gap the
scan records an issue and stops accepting; the file may then be truncated there only if no
later decodable line contains a `turn/end` (a gapped line that itself holds a `turn/end`
is fatal at once). Anything else is corruption of the committed region. A zstd log applies
the same line scanner to the plaintext of its frames (see `scan_zstd_log`).

Speed (PERFORMANCE.md, scenario R): the committed region is one pass with the cyclic
garbage collector paused (every decoded value is acyclic JSON, so collecting during the
decode only walks the new objects again and again). A verbatim event line costs one msgspec
decode and two integer comparisons; a packed row one typed msgspec decode and the building
of its members. Only the line where an issue starts, and the lines after it, take the
general (slower, message-building) path.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from dataclasses import dataclass

import msgspec

from duraloop.errors import CorruptLogError
from duraloop.log import Event, SessionHeader
from duraloop.log import vocabulary as v

from ._packing import decode_row_line
from ._records import (
    EVENT_DECODER,
    ROW_LINE_PREFIXES,
    RecordError,
    decode_header,
    decode_record,
)
from ._zstd import decompress_complete, decompress_torn, scan_frames

_TURN_END_BYTES = f'"{v.TURN_END}"'.encode()
_MAX_SAFE = 2**53 - 1


@dataclass(frozen=True, slots=True)
class ScanResult:
    """The readable part of a JSONL log.

    Args:
        header: the decoded header record.
        events: the contiguous committed events, seq 0..n-1.
        committed_bytes: the byte length of header plus accepted lines.
        size_bytes: the scanned length; a torn tail exists iff `committed_bytes < size_bytes`.
        recovered_events: how many of the final `events` were decoded from a torn zstd frame
            (cutting the torn tail removes them from the file; 0 for raw logs).
    """

    header: SessionHeader
    events: list[Event]
    committed_bytes: int
    size_bytes: int
    recovered_events: int = 0

    @property
    def torn_offset(self) -> int | None:
        """The byte offset to truncate to, or None when the file ends cleanly."""
        return self.committed_bytes if self.committed_bytes < self.size_bytes else None


@dataclass(frozen=True, slots=True)
class _Issue:
    """Where the contiguous prefix stopped: the message and whether it is fatal at once."""

    text: str
    fatal: bool


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for a bulk decode of acyclic values.

    On exit the objects allocated meanwhile are promoted straight to the oldest generation
    (`gc.freeze()` then `gc.unfreeze()`: two list splices, no traversal) instead of being
    walked by a young collection and then again by the middle one; they are looked at with
    the next full collection, like any long-lived object. That promotion is skipped when
    the process has frozen objects of its own (`gc.get_freeze_count()`), which it must not
    unfreeze. A collector that was already disabled stays disabled and untouched.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()


def scan_log(data: bytes, *, path: str | None, projected: bool = False) -> ScanResult:
    """Scan raw JSONL bytes per session-spec 6.6.

    Args:
        data: the whole file.
        path: the file path, for error messages.
        projected: restore missing `seq`/`time` by position (dsh projected fixtures).

    Returns:
        The header, the committed events and the committed byte length.

    Raises:
        CorruptLogError: a missing or invalid header, or damage inside the committed region
            (naming the 1-based line).
        SessionFormatUnsupportedError: if the header's version is not 0.
    """
    header_end = data.find(b"\n")
    if header_end < 0:
        raise CorruptLogError("session log is empty or header-less", path=path, line=1)
    header = decode_header(data[:header_end], path=path)
    # lines[0] is the header, lines[-1] the torn fragment (b"" when the file ends cleanly).
    lines = data.split(b"\n")
    events: list[Event] = []
    accepted_to = _scan_lines(lines, events, path=path, projected=projected)
    if accepted_to == len(lines) - 1:
        return ScanResult(header, events, len(data) - len(lines[-1]), len(data))
    committed = sum(map(len, lines[:accepted_to])) + accepted_to
    return ScanResult(header, events, committed, len(data))


def scan_zstd_log(data: bytes, *, path: str | None) -> ScanResult:
    """Scan a zstd-framed JSONL log per session-spec 6.6 ("Zstd scanning").

    Complete frames are decompressed with checksum verification and must hold complete,
    contiguous lines: any bad line or gap there is corruption. Only a torn final frame is
    recoverable: what it yields is scanned with the raw rules, and its events are returned as
    recovered (they are cut with the frame, so the store writes them again).

    Args:
        data: the whole file.
        path: the file path, for error messages.

    Returns:
        The header and events; `committed_bytes` is the torn frame's start (or the size) and
        `recovered_events` counts the events decoded from the torn frame.

    Raises:
        CorruptLogError: no complete frame, a header frame that is not exactly one line, an
            invalid or checksum-failing frame, or damage inside the complete frames.
        SessionFormatUnsupportedError: if the header's version is not 0.
    """
    scan = scan_frames(data, path=path)
    if not scan.frames:
        raise CorruptLogError("session log is empty or header-less (no complete zstd frame)", path=path, line=1)
    header_start, header_end = scan.frames[0]
    header_text = decompress_complete(data[header_start:header_end], path=path, offset=header_start)
    header = decode_header(header_frame_line(header_text, path=path), path=path)
    complete_end = scan.frames[-1][1]
    body = b""
    if complete_end > header_end:
        body = decompress_complete(data[header_end:complete_end], path=path, offset=header_end)
    lines = [b"", *body.split(b"\n")]  # a stand-in for the header keeps line numbers 1-based
    events: list[Event] = []
    with collector_paused():
        accepted_to, issue = _accept(lines, len(lines) - 1, events, projected=False)
    if issue is not None:
        raise CorruptLogError(f"{issue.text} inside a complete zstd frame", path=path, line=accepted_to + 1)
    if lines[-1]:
        raise CorruptLogError(
            "complete zstd frame contains a torn JSONL record", path=path, line=len(lines)
        )
    if scan.torn_start is None:
        return ScanResult(header, events, len(data), len(data))
    complete = len(events)
    tail = decompress_torn(data[scan.torn_start :])
    tail_lines = [b"", *tail.split(b"\n")]
    _scan_lines(tail_lines, events, path=path, projected=False, line_base=len(lines) - 1)
    return ScanResult(header, events, scan.torn_start, len(data), len(events) - complete)


def header_frame_line(plaintext: bytes, *, path: str | None) -> bytes:
    r"""Return the header line (without `\n`) that a zstd log's first frame must hold alone.

    Raises:
        CorruptLogError: "header-less" if the frame is not exactly one `\n`-terminated line.
    """
    if not plaintext.endswith(b"\n") or plaintext.find(b"\n") != len(plaintext) - 1:
        raise CorruptLogError(
            "session log is empty or header-less (the first zstd frame must hold exactly the "
            "header line)",
            path=path,
            line=1,
        )
    return plaintext[:-1]


def _scan_lines(
    lines: list[bytes],
    events: list[Event],
    *,
    path: str | None,
    projected: bool,
    line_base: int = 0,
) -> int:
    """Accept `lines[1:-1]` into `events` by the raw rules; return where acceptance stopped.

    Returns:
        The index of the first line not accepted (`len(lines) - 1` when all were).

    Raises:
        CorruptLogError: if the issue that stopped acceptance is fatal, or a later line
            decodes to a `turn/end` (line numbers are `line_base + index + 1`).
    """
    stop = len(lines) - 1
    with collector_paused():
        accepted_to, issue = _accept(lines, stop, events, projected=projected)
    if issue is None:
        return accepted_to
    line = line_base + accepted_to + 1
    if issue.fatal:
        raise CorruptLogError(issue.text, path=path, line=line)
    restore_seq = len(events) if projected else None
    for index in range(accepted_to + 1, stop):
        if _decodes_turn_end(lines[index], restore_seq):
            raise CorruptLogError(issue.text, path=path, line=line)
    return accepted_to


def _accept(
    lines: list[bytes], stop: int, events: list[Event], *, projected: bool
) -> tuple[int, _Issue | None]:
    """Append the events of lines 1..stop-1 to `events` while they decode contiguously.

    Returns:
        The index of the first line not accepted (`stop` when all were), and the issue
        found there (None when all were accepted).
    """
    append = events.append
    decode = EVENT_DECODER.decode
    for index in range(1, stop):
        line = lines[index]
        if not line.startswith(ROW_LINE_PREFIXES):
            try:
                event: Event | None = decode(line)
            except msgspec.DecodeError:
                event = None
            if event is not None and event.seq == len(events) and -_MAX_SAFE <= event.time <= _MAX_SAFE:
                append(event)
                continue
        elif not projected:
            members = decode_row_line(line)
            if members is not None and members[0].seq == len(events):
                events.extend(members)
                continue
        outcome = _decode_contiguous(line, len(events), projected=projected)
        if isinstance(outcome, _Issue):
            return index, outcome
        events.extend(outcome)
    return stop, None


def _decode_contiguous(line: bytes, expected: int, *, projected: bool) -> list[Event] | _Issue:
    """Decode one line on the general path; return its events, or the issue it starts."""
    try:
        decoded = decode_record(line, restore_seq=expected if projected else None)
    except RecordError as exc:
        return _Issue(f"unparsable committed event ({exc})", fatal=False)
    for offset, event in enumerate(decoded):
        if event.seq != expected + offset:
            text = f"seq gap in committed region (expected {expected + offset}, got {event.seq})"
            return _Issue(text, fatal=_has_turn_end(decoded))
    return decoded


def _decodes_turn_end(line: bytes, restore_seq: int | None) -> bool:
    """Return whether a line after an issue decodes and holds a `turn/end`.

    A line without the literal `"turn/end"` and without any escape cannot decode to one, so
    it is skipped without decoding; an undecodable line holds nothing.
    """
    if _TURN_END_BYTES not in line and b"\\" not in line:
        return False
    try:
        later = decode_record(line, restore_seq=restore_seq)
    except RecordError:
        return False
    return _has_turn_end(later)


def _has_turn_end(events: list[Event]) -> bool:
    return any(event.type == v.TURN_END for event in events)
