"""The SQLite store's own rules (docs/store.md#sqlite), checked by reading the database itself.

The shared contract (tests/conformance/test_persistence_contract_cases.py) already runs on
SqliteStore; these tests pin what only a SQLite store has: the schema, pragmas and identity
a dsh store carries, the row encodings (compressed data, packed rows, varint seqs), the
append transaction's stale-writer check, the read scan's split between a torn tail
(repaired on load) and corruption (refused), the file permission checks, the per-session OS
lock across processes, and the revision token. Damage is made with raw SQL on a second
connection, the way a crash or a foreign writer leaves it. Every failure test also asserts
what the database holds afterwards.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from duraloop.errors import (
    AppendConflictError,
    CorruptLogError,
    SessionFormatUnsupportedError,
    SessionLockedError,
    SessionNotFoundError,
    StoreError,
)
from duraloop.llm import ScriptedModel
from duraloop.log import Event, Session
from duraloop.loop import SessionSetup, start_session
from duraloop.store import SqliteBackend, SqliteStore
from duraloop.store._codec._varint import decode_seqs
from duraloop.tools import ToolHooks
from loop._support import call, recorder_tool, tools_step

from ._builders import ev, meta, one_turn_log, se, ss, te, text_chunk, ts


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store" / "sessions.db"


@pytest.fixture
def store(db: Path) -> Iterator[SqliteStore]:
    with SqliteStore(db) as opened:
        yield opened


def raw(db: Path) -> sqlite3.Connection:
    """A plain second connection, as another program would open the file."""
    return sqlite3.connect(db, isolation_level=None)


def rows(db: Path, session_id: str = "s") -> list[tuple[Any, ...]]:
    with raw(db) as connection:
        return connection.execute(
            "SELECT seq, type, typeof(data), ignorable, source_event_seqs, surface_op FROM events "
            "WHERE session_id = ? ORDER BY seq",
            (session_id,),
        ).fetchall()


def test_new_store_has_schema_17_identity_and_strict_tables(store: SqliteStore, db: Path) -> None:
    with raw(db) as connection:
        assert connection.execute("PRAGMA application_id").fetchone()[0] == 0x44534850
        assert connection.execute("PRAGMA user_version").fetchone()[0] == 17
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {
            name: strict
            for _, name, kind, _, _, strict in connection.execute("PRAGMA table_list")
            if kind == "table" and not name.startswith("sqlite_")
        }
        assert tables == {"persistence_state": 1, "sessions": 1, "events": 1}
        columns = [row[1:3] for row in connection.execute("PRAGMA table_info(events)")]
        assert ("data", "ANY") in columns and ("source_event_seqs", "ANY") in columns
        assert connection.execute("SELECT singleton FROM persistence_state").fetchall() == [(1,)]
    assert os.stat(db).st_mode & 0o777 == 0o600


def test_every_connection_sets_the_spec_pragmas(store: SqliteStore) -> None:
    connection = store.sqlite._connection
    assert connection is not None
    values = {
        name: connection.execute(f"PRAGMA {name}").fetchone()[0]
        for name in ("trusted_schema", "mmap_size", "foreign_keys", "synchronous", "busy_timeout")
    }
    assert values == {
        "trusted_schema": 0,
        "mmap_size": 0,
        "foreign_keys": 1,
        "synchronous": 2,
        "busy_timeout": 5000,
    }


def test_reopening_an_initialized_store_keeps_its_store_id(store: SqliteStore, db: Path) -> None:
    store.backend.materialize(meta("s"), one_turn_log())
    with SqliteStore(db) as again:
        assert again.load("s").events == one_turn_log()
        assert again.backend.revision("s") == store.backend.revision("s")


def _make_foreign(db: Path, *statements: str) -> None:
    db.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with raw(db) as connection:
        for statement in statements:
            connection.execute(statement)
    db.chmod(0o600)


@pytest.mark.parametrize(
    ("statements", "message"),
    [
        (["CREATE TABLE notes (x)"], "not a session store"),
        (
            ["PRAGMA application_id=1234", "CREATE TABLE notes (x)"],
            "belongs to another application",
        ),
        (["PRAGMA application_id=1146308688", "PRAGMA user_version=16"], "schema version 16"),
    ],
)
def test_foreign_or_other_version_database_is_refused_unchanged(
    db: Path, statements: list[str], message: str
) -> None:
    _make_foreign(db, *statements)
    before = db.read_bytes()
    with pytest.raises(StoreError, match=message):
        SqliteStore(db)
    assert db.read_bytes() == before
    assert not db.with_name(db.name + "-wal").exists()


def test_a_file_that_is_not_a_database_is_refused_unchanged(db: Path) -> None:
    db.parent.mkdir(mode=0o700)
    db.write_text("not sqlite at all\n" * 100)
    db.chmod(0o600)
    with pytest.raises(StoreError, match="is not a SQLite database"):
        SqliteStore(db)
    assert db.read_text() == "not sqlite at all\n" * 100


def test_a_session_row_of_another_format_version_is_refused_and_listed_damaged(
    store: SqliteStore, db: Path
) -> None:
    store.backend.materialize(meta("s"), one_turn_log())
    store.backend.materialize(meta("ok"), one_turn_log())
    with raw(db) as connection:
        connection.execute("UPDATE sessions SET version = 42 WHERE id = 's'")
    with pytest.raises(SessionFormatUnsupportedError, match='"s" uses log format v42.*upgrade'):
        store.load("s")
    summaries = {summary.id: summary.damaged for summary in store.list()}
    assert summaries["ok"] is None
    assert summaries["s"] is not None and "v42" in summaries["s"]


def test_large_data_is_stored_compressed_and_small_data_as_json_text(
    store: SqliteStore, db: Path
) -> None:
    big = ev("plugin/blob", 1, 1, {"text": "abc " * 2000})
    store.backend.materialize(meta("s"), [ts(0, 1), big])
    assert [row[2] for row in rows(db)] == ["text", "blob"]
    with raw(db) as connection:
        text = connection.execute("SELECT data FROM events WHERE seq = 0").fetchone()[0]
    assert text == '{"turn":1}'
    assert store.backend.read("s").events[1] == big


def test_chunk_runs_are_packed_rows_with_ignorable_zero(store: SqliteStore, db: Path) -> None:
    chunks = [text_chunk(seq, 10 + seq, f"t{seq}") for seq in range(2, 7)]
    events = [ts(0, 1), ss(1, 1, 1), *chunks, se(7, 1, 1), te(8, 1)]
    store.backend.materialize(meta("s"), events)
    stored = rows(db)
    assert [(row[0], row[1], row[3]) for row in stored] == [
        (0, "turn/start", None),
        (1, "step/start", None),
        (2, "text-chunks", 0),
        (7, "step/end", None),
        (8, "turn/end", None),
    ]
    assert stored[2][4:] == (None, None), "a packed row has no surface columns"
    assert store.load("s").events == events


def test_a_long_chunk_run_is_split_into_rows_of_at_most_1024_members(
    store: SqliteStore, db: Path
) -> None:
    chunks = [text_chunk(seq, seq, "x") for seq in range(1, 2501)]
    events = [ts(0, 1), *chunks]
    store.backend.materialize(meta("s"), events)
    packed = [row for row in rows(db) if row[3] == 0]
    members = [b[0] - a[0] for a, b in zip(packed, [*packed[1:], (2501,)], strict=True)]
    assert sum(members) == 2500 and max(members) <= 1024
    assert store.backend.read("s").events == events


def test_source_event_seqs_are_a_varint_blob(store: SqliteStore, db: Path) -> None:
    cited = ev("user/message", 4, 4, {"id": "u"}, op="append", src=[1, 3, 2])
    store.backend.materialize(
        meta("s"), [ts(0, 1), ss(1, 1, 1), ev("x/y", 2, 2, None), ev("x/y", 3, 3, None), cited]
    )
    row = rows(db)[4]
    assert decode_seqs(row[4]) == [1, 3, 2]
    assert row[5] == '"append"'
    assert store.backend.read("s").events[4] == cited


def test_a_stale_writer_is_rejected_and_stores_nothing(db: Path) -> None:
    first, second = SqliteBackend(db), SqliteBackend(db)
    try:
        first.materialize(meta("s"), [ts(0, 1)])
        second.append("s", [ss(1, 1, 1)])
        with pytest.raises(AppendConflictError, match="expected 2 at index 0, got 1"):
            first.append("s", [ss(1, 1, 1, time=99)])
        assert [e.time for e in first.read("s").events] == [0, 1]
    finally:
        first.close()
        second.close()


def _open_turn(store: SqliteStore) -> None:
    store.backend.materialize(meta("s"), one_turn_log())
    store.append("s", [ts(6, 2, time=7), ss(7, 2, 1, time=8)])


def _insert(db: Path, seq: int, data: str, kind: str = "assistant/chunk") -> None:
    with raw(db) as connection:
        connection.execute(
            "INSERT INTO events (session_id, seq, type, time, data) VALUES ('s', ?, ?, 0, ?)",
            (seq, kind, data),
        )


@pytest.mark.parametrize(
    ("seq", "data"), [(8, '{"turn":2,"ste'), (9, '{"turn":2}')], ids=["undecodable", "gapped"]
)
def test_a_torn_row_after_the_last_turn_end_is_deleted_and_the_turn_closed(
    store: SqliteStore, db: Path, seq: int, data: str
) -> None:
    _open_turn(store)
    _insert(db, seq, data)
    revision = store.backend.revision("s")
    assert store.backend.read("s").torn == seq
    loaded = store.load("s")
    assert [e.seq for e in loaded.events] == list(range(10))
    assert loaded.events[-1].data == {"turn": 2, "reason": {"kind": "interrupted"}}
    assert loaded.repair.truncated_bytes == 1, "SQLite reports the rows cut"
    after = store.backend.revision("s")
    assert revision is not None and after is not None
    assert int(after.rsplit(":", 1)[1]) == int(revision.rsplit(":", 1)[1]) + 1, (
        "cut + closers: one transaction"
    )
    assert [row[0] for row in rows(db)] == list(range(10))
    store.append("s", [ts(10, 3), te(11, 3)])
    assert [e.seq for e in store.read("s")[1]] == list(range(12))


def test_repair_refuses_a_torn_tail_that_changed_since_the_read(
    store: SqliteStore, db: Path
) -> None:
    _open_turn(store)
    _insert(db, 8, "{")
    stored = store.backend.read("s")
    with raw(db) as connection:
        connection.execute("UPDATE events SET seq = 9 WHERE seq = 8")
    with pytest.raises(StoreError, match="changed since it was read"):
        store.backend.repair("s", stored.torn, [])
    assert [row[0] for row in rows(db)] == [*range(8), 9]


@pytest.mark.parametrize(
    ("damage", "problem", "seq"),
    [
        ("UPDATE events SET data = '{\"turn\":' WHERE seq = 2", "undecodable row", 2),
        ("UPDATE events SET source_event_seqs = x'8500' WHERE seq = 3", "not canonical", 3),
        ("DELETE FROM events WHERE seq = 2", "seq gap", 3),
    ],
    ids=["bad-json", "non-canonical-varint", "gap"],
)
def test_damage_before_the_last_turn_end_is_corruption_naming_session_seq_and_file(
    store: SqliteStore, db: Path, damage: str, problem: str, seq: int
) -> None:
    store.backend.materialize(meta("s"), one_turn_log())
    with raw(db) as connection:
        connection.execute(damage)
    before = rows(db)
    with pytest.raises(CorruptLogError, match=problem) as caught:
        store.load("s")
    text = str(caught.value)
    assert 'session "s"' in text and f"at seq {seq}," in text and str(db) in text
    assert rows(db) == before, "a corrupt log is never repaired"


def test_insecure_files_are_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared.db"
    with SqliteStore(shared):
        pass
    shared.chmod(0o644)
    with pytest.raises(StoreError, match="group/world permissions"):
        SqliteStore(shared)
    shared.chmod(0o600)
    link = tmp_path / "link.db"
    link.symlink_to(shared)
    with pytest.raises(StoreError, match="is a symlink"):
        SqliteStore(link)
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    with pytest.raises(StoreError, match="group- or world-writable"):
        SqliteStore(open_dir / "sessions.db")
    assert not (open_dir / "sessions.db").exists()


_HOLDER = """
import sys
from duraloop.store import SqliteStore
store = SqliteStore(sys.argv[1])
release = store.backend.lock("s", cwd=None)
print("locked", flush=True)
sys.stdin.read()
release()
store.close()
"""


def test_a_session_locked_by_another_process_is_refused_while_others_write(
    store: SqliteStore, db: Path
) -> None:
    store.backend.materialize(meta("s"), [ts(0, 1)])
    with subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdin is not None and holder.stdout is not None
        try:
            assert holder.stdout.readline() == "locked\n"
            with pytest.raises(
                SessionLockedError, match='session "s" is being written by another process'
            ):
                store.load("s")
            other = Session("b", header=meta("b"))
            with store.open_writer(other):
                other.append("turn/start", {"turn": 1})
        finally:
            holder.stdin.close()
            assert holder.wait(timeout=30) == 0
    assert [e.type for e in store.load("b").events] == ["turn/start", "turn/end"]
    assert len(store.load("s").events) == 2, "the lock died with its process"


def test_revision_token_is_stable_and_changes_after_an_append(store: SqliteStore) -> None:
    assert store.backend.revision("s") is None
    store.backend.materialize(meta("s"), [ts(0, 1)])
    token = store.backend.revision("s")
    assert isinstance(token, str)
    assert token.startswith("file:") and ":store:" in token and ":incarnation:" in token
    assert token.endswith(":revision:1")
    assert store.backend.revision("s") == token
    store.append("s", [te(1, 1)])
    assert store.backend.revision("s") == token.removesuffix("1") + "2"


def test_a_dsh_written_session_loads(store: SqliteStore, db: Path) -> None:
    with raw(db) as connection:
        connection.execute(
            "INSERT INTO sessions (id, version, created_at, cwd, incarnation, revision) "
            "VALUES ('d', 0, 1000, '/w', 'inc', 1)"
        )
        connection.executemany(
            "INSERT INTO events (session_id, seq, type, time, data, ignorable) VALUES ('d', ?, "
            "?, ?, ?, ?)",
            [
                (0, "turn/start", 1, '{"turn":1}', None),
                (1, "step/start", 1, '{"turn":1,"step":1}', None),
                (
                    2,
                    "reasoning-chunks",
                    2,
                    '{"turn":1,"step":1,"index":0,"dt":[1,-1],"texts":["a","b","c"]}',
                    0,
                ),
                (5, "step/end", 3, '{"turn":1,"step":1}', None),
                (6, "turn/end", 3, '{"turn":1,"reason":{"kind":"completed"}}', None),
            ],
        )
    loaded = store.load("d")
    assert loaded.header.cwd == "/w" and loaded.header.delegation_depth == 0
    assert [e.seq for e in loaded.events] == [0, 1, 2, 3, 4, 5, 6]
    assert [e.time for e in loaded.events[2:5]] == [2, 3, 2]
    assert loaded.events[2] == Event(
        "assistant/chunk",
        2,
        2,
        {"turn": 1, "step": 1, "chunk": {"type": "reasoning-delta", "index": 0, "text": "a"}},
    )


# --- issue 9: damaged, foreign, missing and deleted databases (D13, D14, E20) -------------------


def _checkpointed_bytes(db: Path) -> bytes:
    """The database file with its WAL folded in, as a crash-free reader finds it."""
    with raw(db) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return db.read_bytes()


def _at(data: bytes, pattern: bytes, replacement: bytes) -> bytes:
    start = data.index(pattern)
    return data[:start] + replacement + data[start + len(replacement) :]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        # sqlite3.DatabaseError escaped the constructor: the first table's b-tree page header.
        (
            lambda data: data[:4096] + b"\x0d\xff\xff\xff" + data[4100:],
            "database disk image is malformed",
        ),
        # UnicodeDecodeError escaped from `pragma_table_info`: a column name that is not UTF-8.
        (
            lambda data: _at(data, b"surface_op TEXT", b"\xff"),
            "not UTF-8: the database file is damaged",
        ),
    ],
    ids=["malformed-image", "non-utf8-column-name"],
)
def test_a_damaged_database_file_is_a_store_error_naming_it(
    store: SqliteStore, db: Path, damage: Any, message: str
) -> None:
    store.backend.materialize(meta("s"), one_turn_log())
    store.close()
    damaged = damage(_checkpointed_bytes(db))
    db.write_bytes(damaged)
    with pytest.raises(StoreError, match=message) as caught:
        SqliteStore(db)
    assert str(db) in str(caught.value)
    assert db.read_bytes() == damaged, "a damaged store is never changed"


def test_a_text_file_is_refused_as_not_a_database_before_its_permissions(tmp_path: Path) -> None:
    # E20: `--store sqlite:notes.json` on a 0644 JSON file said "run chmod 600" first.
    notes = tmp_path / "notes.json"
    notes.write_text('{"a": 1}\n')
    notes.chmod(0o644)
    with pytest.raises(StoreError, match="is not a SQLite database") as caught:
        SqliteStore(notes)
    assert "chmod" not in str(caught.value)
    assert notes.read_text() == '{"a": 1}\n' and stat_mode(notes) == 0o644


def stat_mode(path: Path) -> int:
    return os.stat(path).st_mode & 0o777


def test_reading_a_missing_database_creates_no_file(tmp_path: Path) -> None:
    # E20: `duraloop ls --store sqlite:NEW` created NEW (the CLI opens with create_on_open=False).
    db = tmp_path / "new" / "sessions.db"
    with SqliteStore(db, create_on_open=False) as store:
        assert store.list() == []
        assert not store.backend.exists("s") and store.backend.revision("s") is None
        with pytest.raises(SessionNotFoundError):
            store.load("s")
        with pytest.raises(SessionNotFoundError):
            store.read("s")
        assert not db.parent.exists(), "reading never creates a store file or its directory"
        store.backend.materialize(meta("s"), one_turn_log())
        assert store.load("s").events == one_turn_log()
    assert stat_mode(db) == 0o600


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_database_deleted_or_replaced_while_open_fails_the_next_write(
    store: SqliteStore, db: Path, how: str
) -> None:
    # D14: the writes went to the unlinked file and succeeded; the session was silently lost.
    store.backend.materialize(meta("s"), [ts(0, 1)])
    for suffix in ("", "-wal", "-shm"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)
    if how == "replaced":
        with SqliteStore(db) as other:
            other.backend.materialize(meta("other"), one_turn_log())
    with pytest.raises(
        StoreError, match="deleted or moved" if how == "deleted" else "another file"
    ):
        store.append("s", [ss(1, 1, 1)])
    if how == "deleted":
        assert not db.exists(), "a failed write never creates the file again"
    else:
        with SqliteStore(db) as other:
            assert [h.id for h in other.list()] == ["other"], "the new file is left untouched"


@pytest.mark.anyio
async def test_a_turn_whose_store_is_deleted_fails_with_store_error_and_runs_no_body(
    db: Path,
) -> None:
    # D14: the turn "completed" and exited 0 with nothing on disk; and the tool/call that
    # never became durable was answered TOOL_OUTCOME_UNKNOWN though its body never ran.
    ran: list[str] = []

    def delete_store(_call: object) -> None:
        os.unlink(db)

    store = SqliteStore(db)
    loop = start_session(
        SessionSetup(
            store=store,
            model=ScriptedModel([tools_step(call("c1")), {"text": "done"}]),
            tools=[recorder_tool("p", ran)],
            cwd=db.parent,
            tool_hooks=ToolHooks(pre_execute=[delete_store]),
        ),
        session_id="s",
    )
    with pytest.raises(StoreError, match="deleted or moved"):
        await loop.run_turn("go")
    assert ran == [], "no body runs without a durable tool/call (Law 5)"
    result = next(e for e in loop.session.events if e.type == "tool/result")
    assert result.data["error"]["code"] == "TOOL_NOT_STARTED"
    with pytest.raises(StoreError, match="deleted or moved"):
        loop.close()
    store.close()
