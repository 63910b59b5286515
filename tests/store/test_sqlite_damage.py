"""A SQLite store with damaged pages (issue 9 items 3/13): typed errors, nothing written.

Two sessions are stored through the store, the file is checkpointed, and 64 bytes of one
page are flipped at offset 8 of the page (past its header's first fields), the way the
new-user trial damaged it. A damaged events page makes only its session unreadable: `list`
shows it as damaged and the other session still reads and writes. A damaged sessions table
or index makes the store refuse to list or write in one typed error naming the file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from duraloop.errors import CorruptLogError, StoreError
from duraloop.log import Event
from duraloop.store import SqliteStore
from duraloop.store._sqlite._file import sessions_damage

from ._builders import meta, te, ts, user


def _log(turns: int, marker: str) -> list[Event]:
    events: list[Event] = []
    for turn in range(1, turns + 1):
        seq = len(events)
        events += [
            ts(seq, turn),
            user(seq + 1, f"{marker} {turn} " + "x" * 300, f"{marker}-{turn}"),
            te(seq + 2, turn),
        ]
    return events


def _two_sessions(db: Path) -> None:
    with SqliteStore(db) as store:
        store.backend.materialize(meta("Q1"), _log(30, "first-session"))
        store.backend.materialize(meta("Q1c"), _log(2, "other-session"))
    with sqlite3.connect(db) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _root_page(db: Path, name: str) -> int:
    with sqlite3.connect(db) as connection:
        return int(
            connection.execute(
                "SELECT rootpage FROM sqlite_schema WHERE name = ?", (name,)
            ).fetchone()[0]
        )


def _page_holding(db: Path, marker: bytes) -> int:
    """The 1-based number of the page that holds `marker` (found by scanning the file)."""
    with sqlite3.connect(db) as connection:
        size = int(connection.execute("PRAGMA page_size").fetchone()[0])
    return db.read_bytes().index(marker) // size + 1


def _damage(db: Path, page: int) -> bytes:
    with sqlite3.connect(db) as connection:
        size = int(connection.execute("PRAGMA page_size").fetchone()[0])
    data = bytearray(db.read_bytes())
    start = (page - 1) * size + 8
    data[start : start + 64] = bytes(byte ^ 0xA5 for byte in data[start : start + 64])
    db.write_bytes(bytes(data))
    return bytes(data)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "store" / "db.sqlite"
    _two_sessions(path)
    return path


def test_a_damaged_events_page_lists_its_session_damaged_and_the_other_reads_and_writes(
    db: Path,
) -> None:
    _damage(db, _page_holding(db, b"first-session 15 "))
    with SqliteStore(db, create_on_open=False) as store:
        listed = {summary.id: summary for summary in store.list()}
        assert listed["Q1c"].damaged is None and listed["Q1c"].turn_count == 2
        assert listed["Q1"].damaged is not None and "malformed" in listed["Q1"].damaged
        with pytest.raises(
            CorruptLogError, match=r'session "Q1": its events rows cannot be read.*\.recover'
        ) as caught:
            store.load("Q1")
        assert str(db) in str(caught.value)
        assert len(store.load("Q1c").events) == 6
        store.append("Q1c", [ts(6, 3), te(7, 3)])
        assert len(store.load("Q1c").events) == 8


@pytest.mark.parametrize("tree", ["sessions", "sqlite_autoindex_sessions_1"])
def test_a_damaged_sessions_table_or_index_is_a_store_error_and_nothing_is_written(
    db: Path, tree: str
) -> None:
    damaged = _damage(db, _root_page(db, tree))
    with SqliteStore(db, create_on_open=False) as store:
        attempts: list[Callable[[], object]] = [
            store.list,
            lambda: store.load("Q1c"),
            lambda: store.backend.materialize(meta("new"), _log(1, "new")),
            lambda: store.backend.materialize(meta("Q1c"), _log(1, "again")),
        ]
        for attempt in attempts:
            with pytest.raises(StoreError, match=r"damaged|malformed") as caught:
                attempt()
            assert str(db) in str(caught.value) and "recover" in str(caught.value)
        try:  # a stored session must never look new: it exists, or the lookup fails
            assert store.exists("Q1c")
        except StoreError as exc:
            assert "damaged" in str(exc)
    assert db.read_bytes() == damaged, "nothing is written into a damaged database"
    wal = db.with_name(db.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def test_the_write_check_walks_only_the_small_tables_and_passes_an_intact_store(db: Path) -> None:
    with sqlite3.connect(db) as connection:
        connection.text_factory = bytes
        assert sessions_damage(connection) is None
    _damage(db, _page_holding(db, b"first-session 15 "))
    with sqlite3.connect(db) as connection:
        connection.text_factory = bytes
        assert sessions_damage(connection) is None, (
            "events damage is found by the read of its session"
        )


def _flip_id_bytes(db: Path, page: int, session_id: bytes) -> None:
    """XOR the bytes of `session_id` where it stands on `page` (an index key or a row's id)."""
    with sqlite3.connect(db) as connection:
        size = int(connection.execute("PRAGMA page_size").fetchone()[0])
    data = bytearray(db.read_bytes())
    start = data.index(session_id, (page - 1) * size, page * size)
    data[start : start + len(session_id)] = bytes(byte ^ 0x20 for byte in session_id)
    db.write_bytes(bytes(data))


@pytest.mark.parametrize("where", ["sqlite_autoindex_sessions_1", "sessions"])
def test_a_damaged_id_in_the_sessions_index_or_row_is_a_store_error_never_a_new_or_valid_session(
    db: Path, where: str
) -> None:
    # quick_check passes both (only integrity_check matches index keys with rows): the
    # index case made Q1 look new, the row case read as valid and took writes.
    _flip_id_bytes(db, _root_page(db, where), b"Q1c")
    before = db.read_bytes()
    with SqliteStore(db, create_on_open=False) as store:
        for attempt in (
            store.list,
            lambda: store.load("Q1c"),
            lambda: store.read("Q1c"),
            lambda: store.append("Q1c", [ts(6, 3)]),
        ):
            with pytest.raises(StoreError, match=r"the database is damaged.*\.recover"):
                attempt()
    assert db.read_bytes() == before
