"""The listing of a JSONL root: each log's header read alone, or why the log is damaged.

See docs/store.md#jsonl-layout.

A listing reads only the header record of every `<project>/<session>/` directory: the
first line of a raw log, the first frame of a zstd one. Logs are published whole, so a log
whose header is missing, incomplete or unreadable, whose header does not map to its
directory, or whose id is stored twice is a `DamagedLog` entry, and the other logs are
still listed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from duraloop.errors import CorruptLogError, SessionFormatUnsupportedError, StoreError
from duraloop.log import SessionHeader

from .._backend import DamagedLog
from .._codec._records import decode_header
from ._paths import decode_segment, session_dir
from ._scan import header_frame_line
from ._zstd import decompress_complete, scan_frames

_HEADER_READ_BYTES = 64 * 1024


def list_logs(
    root: Path, file_name: str, *, framed: bool, check_encoding: Callable[[Path], None]
) -> list[SessionHeader | DamagedLog]:
    """Read the header record of every log under `root`, in directory order.

    Args:
        root: the store directory (absent: nothing is listed).
        file_name: the log file name this store writes (`session.jsonl` or its zstd form).
        framed: whether the logs are zstd-framed (the header is the first frame).
        check_encoding: called with a session directory that holds no `file_name`; raises
            `StoreError` if it holds a log of the other encoding.

    Returns:
        One entry per session directory holding a log: its header, or a `DamagedLog`
        named by the directory (or by the header's id when that id is stored twice).

    Raises:
        StoreError: if a directory holds a log of the other encoding (`check_encoding`).
    """
    if not root.is_dir():
        return []
    headers: list[SessionHeader | DamagedLog] = []
    seen: dict[str, Path] = {}
    for project in sorted(root.iterdir()):
        if not project.is_dir():
            continue
        for directory in sorted(project.iterdir()):
            path = directory / file_name
            if not path.is_file():
                if directory.is_dir():
                    check_encoding(directory)
                continue
            try:
                header = read_header(path, framed=framed)
            except (CorruptLogError, SessionFormatUnsupportedError, StoreError) as exc:
                reason = str(exc).replace(f" of {path}", "")
                headers.append(DamagedLog(decode_segment(directory.name), reason, str(path)))
            else:
                if session_dir(root, header.id, header.cwd) != directory:
                    reason = (
                        f'its header (id "{header.id}", cwd {header.cwd!r}) '
                        "does not map to this file"
                    )
                    headers.append(DamagedLog(decode_segment(directory.name), reason, str(path)))
                    continue
                headers.append(_unique(header, path, seen))
    return headers


def _unique(header: SessionHeader, path: Path, seen: dict[str, Path]) -> SessionHeader | DamagedLog:
    if header.id in seen:
        return DamagedLog(
            header.id, f"the id is stored twice (also at {seen[header.id]})", str(path)
        )
    seen[header.id] = path
    return header


def read_header(path: Path, *, framed: bool) -> SessionHeader:
    """Read and decode the header record of the log at `path`, alone.

    Args:
        path: the log file.
        framed: whether the log is zstd-framed.

    Returns:
        The decoded header.

    Raises:
        CorruptLogError: if the file is empty, has no complete header record, or the
            record is not a valid header.
        SessionFormatUnsupportedError: for a newer/older format.
        StoreError: if the file cannot be read.
    """
    first = _header_line(path, framed=framed)
    if first is None:
        if path.stat().st_size == 0:
            raise CorruptLogError("the log file is empty (no header)")
        raise CorruptLogError("the log has no complete header record")
    return decode_header(first, path=str(path))


def _header_line(path: Path, *, framed: bool) -> bytes | None:
    """Return the header line without its newline, or None if it is not complete yet."""
    try:
        with path.open("rb") as handle:
            if not framed:
                first = handle.readline()
                return first[:-1] if first.endswith(b"\n") else None
            data = handle.read(_HEADER_READ_BYTES)
            scan = scan_frames(data, path=str(path), max_frames=1)
            if not scan.frames and len(data) == _HEADER_READ_BYTES:
                data += handle.read()
                scan = scan_frames(data, path=str(path), max_frames=1)
    except OSError as exc:
        raise StoreError(f"cannot read the header of {path}: {exc}") from exc
    if not scan.frames:
        return None
    start, end = scan.frames[0]
    text = decompress_complete(data[start:end], path=str(path), offset=start)
    return header_frame_line(text, path=str(path))
