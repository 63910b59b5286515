"""Leave a torn tail on a stored session, as a crash mid-write leaves it, on any store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from duraloop.store import JsonlBackend, SessionStore, SqliteBackend
from duraloop.store._jsonl._zstd import FrameCodec


def append_torn_fragment(store: SessionStore, session_id: str, seq: int) -> None:
    """Append a torn record for `seq` behind the store's back (no lock, no bookkeeping).

    JSONL raw: a line without its newline; zstd: a frame cut before its end; SQLite: an
    undecodable row. The memory backend cannot hold a torn tail (its writes are atomic), so
    a test that needs one is skipped there with that reason.
    """
    fragment = b'{"type":"assistant/chunk","seq":%d,"ti' % seq
    backend = store.backend
    if isinstance(backend, JsonlBackend):
        path = Path(str(store.locate(session_id)))
        if backend.compression == "zstd":
            fragment = FrameCodec().compress(fragment)[:-3]
        with path.open("ab") as handle:
            handle.write(fragment)
    elif isinstance(backend, SqliteBackend):
        with sqlite3.connect(backend.path, isolation_level=None) as connection:
            connection.execute(
                "INSERT INTO events (session_id, seq, type, time, data) VALUES (?, ?, ?, 0, ?)",
                (session_id, seq, "assistant/chunk", '{"turn":2,"ste'),
            )
        connection.close()
    else:
        pytest.skip(
            f"{type(backend).__name__} cannot hold a torn tail: every write is one atomic step"
        )
