r"""Scan a JSONL session log: header, committed prefix, torn tail.

See docs/store.md#reading-and-torn-tails.

The raw rule, exactly: the final segment without `\n` is a torn fragment. Complete lines are
decoded in order while they stay contiguous. At the first unparsable line or seq gap the
scan records an issue and stops accepting; the file may then be truncated there only if no
later decodable line contains a `turn/end` (a gapped line that itself holds a `turn/end`
is fatal at once). Anything else is corruption of the committed region. A zstd log applies
the same line scanner to the plaintext of its frames (see `scan_zstd_log`).

Speed (README.md#performance, the resume scenario): the committed region is one pass with the cyclic
garbage collector paused (every decoded value is acyclic JSON, so collecting during the
decode only walks the new objects again and again). A verbatim event line costs one msgspec
decode and two integer comparisons; a packed row one typed msgspec decode and the building
of its members. Only the line where an issue starts, and the lines after it, take the
general (slower, message-building) path.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from duraloop.errors import CorruptLogError
from duraloop.log import Event, LazyEvents, SessionHeader
from duraloop.log import vocabulary as v

from .._codec._packing import decode_row_line
from .._codec._records import (
    EVENT_DECODER,
    MAX_LINE_DEPTH,
    ROW_LINE_PREFIXES,
    RecordError,
    decode_header,
    decode_record,
    too_deep,
)
from .._files import collector_paused
from .._tail import TornTail, fsync_evidence
from ._zstd import decompress_complete, decompress_torn, later_complete_frame, scan_frames

_MAX_SAFE = 2**53 - 1
_FRAGMENT = "a torn final line (no newline)"
_DEPTH_CHECK_BYTES = 2 * MAX_LINE_DEPTH  # a shorter line cannot nest deeper than the limit


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
        cut: what the torn tail holds (None when the file ends cleanly).
    """

    header: SessionHeader
    events: list[Event]
    committed_bytes: int
    size_bytes: int
    recovered_events: int = 0
    cut: TornTail | None = None

    @property
    def torn_offset(self) -> int | None:
        """The byte offset to truncate to, or None when the file ends cleanly."""
        return self.committed_bytes if self.committed_bytes < self.size_bytes else None


@dataclass(frozen=True, slots=True)
class _Issue:
    """Where the contiguous prefix stopped: the message and whether it is fatal at once."""

    text: str
    fatal: bool


def scan_log(data: bytes, *, path: str | None, projected: bool = False) -> ScanResult:
    """Scan raw JSONL bytes per docs/store.md#reading-and-torn-tails.

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
    accepted_to, cut = _scan_lines(lines, events, path=path, projected=projected)
    fragment = 1 if lines[-1] else 0
    if cut is None:
        if not fragment:
            return ScanResult(header, events, len(data), len(data))
        torn = TornTail.of(len(lines[-1]), _FRAGMENT, [], unreadable_count=1)
        return ScanResult(header, events, len(data) - len(lines[-1]), len(data), cut=torn)
    committed = sum(map(len, lines[:accepted_to])) + accepted_to
    reason = f"{cut.reason} at line {accepted_to + 1}"
    torn = TornTail.of(
        len(data) - committed, reason, cut.events, unreadable_count=cut.unreadable_count + fragment
    )
    return ScanResult(header, events, committed, len(data), cut=torn)


def scan_zstd_log(data: bytes, *, path: str | None) -> ScanResult:
    """Scan a zstd-framed JSONL log per docs/store.md#reading-and-torn-tails ("Zstd scanning").

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
        raise CorruptLogError(
            "session log is empty or header-less (no complete zstd frame)", path=path, line=1
        )
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
        raise CorruptLogError(
            f"{issue.text} inside a complete zstd frame", path=path, line=accepted_to + 1
        )
    if lines[-1]:
        raise CorruptLogError(
            "complete zstd frame contains a torn JSONL record", path=path, line=len(lines)
        )
    if scan.torn_start is None:
        return ScanResult(header, events, len(data), len(data))
    later = later_complete_frame(data, scan.torn_start, path=path)
    if later is not None:
        raise CorruptLogError(
            f"the zstd frame at byte {scan.torn_start} is cut short, but a complete frame follows "
            f"at byte {later}: each frame is fsynced before the next one is written, so this is "
            "damage inside the durable log, not a torn tail",
            path=path,
        )
    complete = len(events)
    tail = decompress_torn(data[scan.torn_start :])
    tail_lines = [b"", *tail.split(b"\n")]
    _, cut = _scan_lines(tail_lines, events, path=path, projected=False, line_base=len(lines) - 1)
    reason = f"a torn zstd frame at byte {scan.torn_start}" + (f" ({cut.reason})" if cut else "")
    unreadable = (cut.unreadable_count if cut else 0) + (1 if tail_lines[-1] else 0)
    torn = TornTail.of(
        len(data) - scan.torn_start, reason, cut.events if cut else [], unreadable_count=unreadable
    )
    return ScanResult(header, events, scan.torn_start, len(data), len(events) - complete, torn)


def read_header(data: bytes, *, zstd: bool, path: str | None) -> SessionHeader:
    """Decode only the header of a log (its first line, or its first zstd frame).

    Raises:
        CorruptLogError: if the header is missing, incomplete or invalid.
        SessionFormatUnsupportedError: if the header's version is not 0.
    """
    if not zstd:
        end = data.find(b"\n")
        if end < 0:
            raise CorruptLogError("session log is empty or header-less", path=path, line=1)
        return decode_header(data[:end], path=path)
    scan = scan_frames(data, path=path, max_frames=1)
    if not scan.frames:
        raise CorruptLogError(
            "session log is empty or header-less (no complete zstd frame)", path=path, line=1
        )
    start, end = scan.frames[0]
    text = decompress_complete(data[start:end], path=path, offset=start)
    return decode_header(header_frame_line(text, path=path), path=path)


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
    events: list[Event] | LazyEvents,
    *,
    path: str | None,
    projected: bool,
    line_base: int = 0,
) -> tuple[int, _Cut | None]:
    """Accept `lines[1:-1]` into `events` by the raw rules; return where acceptance stopped.

    Returns:
        The index of the first line not accepted (`len(lines) - 1` when all were), and what
        the lines from there on hold (None when all were accepted).

    Raises:
        CorruptLogError: if the issue that stopped acceptance is fatal, a later line decodes
            to a `turn/end`, or a later event proves the damaged line was fsynced (D12,
            `fsync_evidence`); line numbers are `line_base + index + 1`.
    """
    stop = len(lines) - 1
    with collector_paused():
        accepted_to, issue = _accept(lines, stop, events, projected=projected)
    if issue is None:
        return accepted_to, None
    line = line_base + accepted_to + 1
    if issue.fatal:
        raise CorruptLogError(issue.text, path=path, line=line)
    restore_seq = len(events) if projected else None
    cut: list[Event] = []
    later: list[Event] = []
    unreadable = 0
    for index in range(accepted_to, stop):
        try:
            decoded = decode_record(lines[index], restore_seq=restore_seq)
        except RecordError:
            unreadable += 1
            continue
        if index > accepted_to:
            if _has_turn_end(decoded):
                raise CorruptLogError(issue.text, path=path, line=line)
            later += decoded
        cut += decoded
    evidence = fsync_evidence(events, later)
    if evidence is not None:
        raise CorruptLogError(
            f"{issue.text}, and {evidence}: a crash tears only what no fsync covered, so this is "
            "damage inside the durable log, not a torn tail",
            path=path,
            line=line,
        )
    return accepted_to, _Cut(issue.text, cut, unreadable)


@dataclass(frozen=True, slots=True)
class _Cut:
    """The complete lines from the first one not accepted on: why, and what decodes there."""

    reason: str
    events: list[Event]
    unreadable_count: int


def _accept(
    lines: list[bytes], stop: int, events: list[Event] | LazyEvents, *, projected: bool
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
        if len(line) > _DEPTH_CHECK_BYTES and too_deep(line):
            pass  # the general path reports it (D13: never handed to a decoder)
        elif not line.startswith(ROW_LINE_PREFIXES):
            try:
                event: Event | None = decode(line)
            except msgspec.DecodeError:
                event = None
            if (
                event is not None
                and event.seq == len(events)
                and -_MAX_SAFE <= event.time <= _MAX_SAFE
            ):
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


def _has_turn_end(events: list[Event]) -> bool:
    return any(event.type == v.TURN_END for event in events)
