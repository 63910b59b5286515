"""Scan a raw JSONL session log: header, committed prefix, torn tail (session-spec 6.6).

The rule, exactly: the final segment without `\\n` is a torn fragment. Complete lines are
decoded in order while they stay contiguous. At the first unparsable line or seq gap the
scan records an issue and stops accepting; the file may then be truncated there only if no
later decodable line contains a `turn/end` (a gapped line that itself holds a `turn/end`
is fatal at once). Anything else is corruption of the committed region.
"""

from __future__ import annotations

from dataclasses import dataclass

from duraloop.errors import CorruptLogError
from duraloop.log import Event, SessionHeader
from duraloop.log import vocabulary as v

from ._records import RecordError, decode_header, decode_record

_TURN_END_BYTES = f'"{v.TURN_END}"'.encode()


@dataclass(frozen=True, slots=True)
class ScanResult:
    """The readable part of a JSONL log.

    Args:
        header: the decoded header record.
        events: the contiguous committed events, seq 0..n-1.
        committed_bytes: the byte length of header plus accepted lines.
        size_bytes: the scanned length; a torn tail exists iff `committed_bytes < size_bytes`.
    """

    header: SessionHeader
    events: list[Event]
    committed_bytes: int
    size_bytes: int

    @property
    def torn_offset(self) -> int | None:
        """The byte offset to truncate to, or None when the file ends cleanly."""
        return self.committed_bytes if self.committed_bytes < self.size_bytes else None


def _has_turn_end(events: list[Event]) -> bool:
    return any(event.type == v.TURN_END for event in events)


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
    events: list[Event] = []
    committed = header_end + 1
    issue: str | None = None
    issue_line = 0
    position = committed
    line_no = 1
    size = len(data)
    while True:
        newline = data.find(b"\n", position)
        if newline < 0:
            break
        line_no += 1
        line = data[position:newline]
        position = newline + 1
        if issue is not None:
            if _TURN_END_BYTES not in line:
                continue
            try:
                later = decode_record(line, restore_seq=len(events) if projected else None)
            except RecordError:
                continue
            if _has_turn_end(later):
                raise CorruptLogError(issue, path=path, line=issue_line)
            continue
        try:
            decoded = decode_record(line, restore_seq=len(events) if projected else None)
        except RecordError as exc:
            issue, issue_line = f"unparsable committed event ({exc})", line_no
            continue
        expected = len(events)
        for offset, event in enumerate(decoded):
            if event.seq != expected + offset:
                issue = (
                    f"seq gap in committed region (expected {expected + offset}, got {event.seq})"
                )
                issue_line = line_no
                break
        if issue is not None:
            if _has_turn_end(decoded):
                raise CorruptLogError(issue, path=path, line=line_no)
            continue
        events.extend(decoded)
        committed = position
    return ScanResult(header, events, committed, size)
