"""Read any JSONL session log file: ours (raw or zstd), a dsh raw log, or a projected fixture.

Projected fixtures (docs/store.md#projected-fixtures) have `seq`/`time` (`seq0`/`time0`) removed and
placeholders in place of volatile values; they are restored by position (the n-th decoded
event gets seq n, a missing time is 0) and `{{cwd}}` / `{{sessionId}}` are substituted.
Nothing is repaired or written: this backs `duraloop show PATH` and the fixture tests.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from duraloop.errors import UsageError
from duraloop.log import Event, SessionHeader, readable_events

from ._jsonl._scan import scan_log, scan_zstd_log

logger = logging.getLogger(__name__)

FIXTURE_CWD = "/fixture-cwd"
"""The absolute path substituted for the `{{cwd}}` placeholder."""

FIXTURE_SESSION_ID = "fixture-session"
"""The id substituted for the `{{sessionId}}` placeholder."""

_ZSTD_SUFFIX = ".zstd"
"""A file named `*.zstd` is read as a zstd-framed log (docs/store.md#jsonl-records)."""

_PLACEHOLDERS = (
    (b"{{cwd}}", FIXTURE_CWD.encode()),
    (b"{{sessionId}}", FIXTURE_SESSION_ID.encode()),
)


def read_log_file(path: str | os.PathLike[str]) -> tuple[SessionHeader, list[Event]]:
    """Read a session log file as it is: header and committed events, no repair.

    A torn final line (no trailing newline, or a tolerated bad tail per
    docs/store.md#reading-and-torn-tails) is left out and logged as a warning; damage inside the
    committed region raises. Legacy shapes are imported as every store read imports them
    (docs/store.md#legacy-import).

    Args:
        path: a `session.jsonl` file, or a `session.jsonl.zstd` file (read as zstd frames).

    Returns:
        The header and the events in seq order (an interrupted turn stays open).

    Raises:
        CorruptLogError: if the header or the committed region is damaged, or a legacy
            shape is malformed.
        SessionFormatUnsupportedError: for another format version, an unknown event type,
            or rejected legacy vocabulary.
        UsageError: if the file is a snapshot (`session.snapshot`), not a log.
        OSError: if the file cannot be read.
    """
    file = Path(path)
    data = file.read_bytes()
    if data.startswith(b'{"format":"duraloop-snapshot"'):
        raise UsageError(
            f"{file} is a duraloop snapshot (a cache of a session's derived state beside its "
            "log), not a log; pass the session.jsonl or session.jsonl.zstd beside it"
        )
    if file.name.endswith(_ZSTD_SUFFIX):
        result = scan_zstd_log(data, path=str(file))
    else:
        for placeholder, value in _PLACEHOLDERS:
            data = data.replace(placeholder, value)
        result = scan_log(data, path=str(file), projected=True)
    if result.torn_offset is not None:
        logger.warning(
            "%s: ignoring a torn tail of %d bytes after line-complete events",
            file,
            result.size_bytes - result.committed_bytes,
        )
    events = readable_events(result.events, session_id=result.header.id, path=str(file))
    return result.header, events
