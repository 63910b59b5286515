"""Snapshots of the SQLite store (docs/store.md#snapshots): the law of test_snapshots.py, on SQLite.

A SQLite snapshot is a file in `<db>.snapshots/`, bound to the database's store id, the
session's incarnation and the row holding its last covered event. Loading with it gives
exactly what loading without it gives, whatever a crash, a repair, a later writer that takes
no snapshots (as dsh), a re-created session or a replaced database did; a snapshot that does
not match is ignored and reported, never believed. The database keeps exactly dsh's schema.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from duraloop.errors import UnpairedHistoryError
from duraloop.llm import ScriptedModel
from duraloop.log import LazyEvents, Session
from duraloop.loop import LoopConfig, SessionSetup, resume_session
from duraloop.store import SqliteStore, read_log_file
from duraloop.store._sqlite._schema import SCHEMA_DDL

from .test_snapshots import _run_turns, _state, _without

SNAPSHOTS = "sessions.db.snapshots"
Turns = list[tuple[int, int, bool, bool]]


def _db(root: Path) -> Path:
    return root / "sessions.db"


def _run(root: Path, workspace: Path, turns: Turns, **options: Any) -> str:
    """Run turns on the SQLite store under `root` (closed afterwards, so it can be copied)."""
    with SqliteStore(_db(root)) as store:
        return anyio.run(lambda: _run_turns(store, workspace, turns, **options))


def _load(root: Path, session_id: str, workspace: Path) -> dict[str, Any]:
    with SqliteStore(_db(root)) as store:
        return _state(store, session_id, workspace)


def _copy(root: Path, to: Path, *, snapshot: bool) -> Path:
    shutil.copytree(root, to)
    if not snapshot:
        shutil.rmtree(to / SNAPSHOTS, ignore_errors=True)
    return to


def _snapshot_file(root: Path) -> Path:
    found = list((root / SNAPSHOTS).glob("*.snapshot"))
    assert len(found) == 1
    return found[0]


def _covered(root: Path) -> int:
    """The events the session's snapshot covers (from its header line)."""
    header: dict[str, Any] = json.loads(_snapshot_file(root).read_bytes().split(b"\n", 1)[0])
    return int(header["events"])


def _sql(root: Path, *statements: tuple[str, tuple[Any, ...]]) -> None:
    connection = sqlite3.connect(_db(root), isolation_level=None)
    try:
        for statement, parameters in statements:
            connection.execute(statement, parameters)
    finally:
        connection.close()


def _rows(root: Path) -> list[tuple[Any, ...]]:
    connection = sqlite3.connect(_db(root))
    try:
        return connection.execute(
            "SELECT session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable "
            "FROM events ORDER BY session_id, seq"
        ).fetchall()
    finally:
        connection.close()


def _schema_objects(connection: sqlite3.Connection) -> list[tuple[str, ...]]:
    """What dsh's `validateRequiredSchema` compares: every object but SQLite's own."""
    rows = connection.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE name NOT GLOB 'sqlite_*' "
        "ORDER BY type, name"
    ).fetchall()
    return [
        (kind, name, table, re.sub(r"\s+", " ", sql).strip()) for kind, name, table, sql in rows
    ]


def _assert_dsh_schema(db: Path) -> None:
    reference = sqlite3.connect(":memory:")
    for statement in SCHEMA_DDL:
        reference.execute(statement)
    connection = sqlite3.connect(db)
    try:
        assert _schema_objects(connection) == _schema_objects(reference)
    finally:
        connection.close()
        reference.close()


def _crash(root: Path, keep: float, *, torn: bool) -> None:
    """Lose the rows after a random point (the batches a crash never committed); optionally
    leave the new last row undecodable (a torn tail dsh's reader would also cut)."""
    rows = _rows(root)
    cut = int(len(rows) * (0.25 + 0.75 * keep))
    if cut < len(rows):
        _sql(root, ("DELETE FROM events WHERE seq >= ?", (rows[cut][1],)))
    if torn and cut > 1:
        _sql(
            root,
            (
                "UPDATE events SET data = '{\"torn' WHERE seq = (SELECT max(seq) FROM events) "
                "AND type != 'turn/end'",
                (),
            ),
        )


def test_sqlite_load_through_snapshot_equals_whole_log_load(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    root = tmp_path / "store"
    turns = [(2, 3, False, False), (1, 2, True, False), (0, 0, False, True), (3, 1, False, False)]
    sid = _run(root, workspace, turns, session_id=None, snapshot_every=5, pending=2)
    assert _snapshot_file(root).stat().st_mode & 0o777 == 0o600
    assert (root / SNAPSHOTS).stat().st_mode & 0o777 == 0o700
    with_snapshot = _load(_copy(root, tmp_path / "a", snapshot=True), sid, workspace)
    without = _load(_copy(root, tmp_path / "b", snapshot=False), sid, workspace)
    assert with_snapshot["snapshot"] == "used"
    assert without["snapshot"] == "none"
    assert _without(with_snapshot, "snapshot") == _without(without, "snapshot")
    assert with_snapshot["inbox"][0] and with_snapshot["last_turn"] == 4
    _assert_dsh_schema(_db(root))


def test_sqlite_resume_through_snapshot_reads_only_the_tail(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    root = tmp_path / "store"
    sid = _run(root, workspace, [(3, 3, False, False)], session_id=None, snapshot_every=1)
    with SqliteStore(_db(root)) as store:
        setup = SessionSetup(
            store=store, model=ScriptedModel([{"text": "again"}]), tools=[], cwd=workspace
        )
        loop, _ = resume_session(sid, setup)
        events = loop.session.events
        assert isinstance(events, LazyEvents)
        assert anyio.run(loop.run_turn, "go on").kind == "completed"
        assert not events.materialized
        loop.close()
        # The prefix decodes on demand, checked against the binding again.
        assert [e.seq for e in events.prefix()] == list(range(events.prefix_count))
        _, stored = store.read(sid)
    assert [e.seq for e in stored] == list(range(len(stored)))


def _one_snapshot(tmp_path: Path) -> tuple[Path, Path, str]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    root = tmp_path / "store"
    sid = _run(root, workspace, [(2, 2, False, False)], session_id=None, snapshot_every=1)
    return workspace, root, sid


def _assert_ignored(root: Path, sid: str, workspace: Path, tmp_path: Path, reason: str) -> None:
    """The snapshot is ignored with `reason`, and the load is exactly the whole-log load."""
    with_snapshot = _load(_copy(root, tmp_path / "a", snapshot=True), sid, workspace)
    without = _load(_copy(root, tmp_path / "b", snapshot=False), sid, workspace)
    assert with_snapshot["snapshot"].startswith("ignored: ")
    assert reason in with_snapshot["snapshot"]
    assert _without(with_snapshot, "snapshot") == _without(without, "snapshot")


def test_a_repair_that_cuts_into_the_covered_rows_makes_the_snapshot_stale(
    tmp_path: Path,
) -> None:
    """A repair deletes rows from inside the covered prefix; a later writer without snapshots
    (as dsh) closes the turn and writes on: the rows at the snapshot's end are new ones."""
    workspace, root, sid = _one_snapshot(tmp_path)
    covered = _covered(root)
    _sql(root, ("DELETE FROM events WHERE seq >= ?", (covered - 3,)))
    _run(root, workspace, [(1, 1, False, False)], session_id=sid, snapshot_every=None)
    assert len(_rows(root)) >= covered  # rows exist again at the snapshot's last seq
    _assert_ignored(root, sid, workspace, tmp_path, "changed (stale or another store's)")


def test_a_cut_shorter_than_the_snapshot_makes_it_stale(tmp_path: Path) -> None:
    workspace, root, sid = _one_snapshot(tmp_path)
    _sql(root, ("DELETE FROM events WHERE seq >= ?", (_covered(root) - 2,)))
    _assert_ignored(root, sid, workspace, tmp_path, "(stale)")


@pytest.mark.parametrize(
    ("statement", "reason"),
    [
        ("UPDATE sessions SET incarnation = ?", "changed (stale or another store's)"),
        ("UPDATE persistence_state SET store_id = ?", "changed (stale or another store's)"),
    ],
)
def test_a_recreated_session_or_another_database_makes_the_snapshot_foreign(
    tmp_path: Path, statement: str, reason: str
) -> None:
    workspace, root, sid = _one_snapshot(tmp_path)
    _sql(root, (statement, (str(uuid.uuid4()),)))
    _assert_ignored(root, sid, workspace, tmp_path, reason)


def test_an_edited_last_covered_row_makes_the_snapshot_stale(tmp_path: Path) -> None:
    workspace, root, sid = _one_snapshot(tmp_path)
    _sql(root, ("UPDATE events SET time = time + 1 WHERE seq = ?", (_covered(root) - 1,)))
    _assert_ignored(root, sid, workspace, tmp_path, "changed (stale or another store's)")


def test_a_database_restored_from_an_older_backup_ignores_the_newer_snapshot(
    tmp_path: Path,
) -> None:
    workspace, root, sid = _one_snapshot(tmp_path)
    backup = _db(root).read_bytes()
    _run(root, workspace, [(1, 2, False, False)], session_id=sid, snapshot_every=1)
    _db(root).write_bytes(backup)  # the file replaced by a copy of itself from before
    _assert_ignored(root, sid, workspace, tmp_path, "no stored row ends at seq")


def test_a_snapshot_of_another_session_or_store_is_ignored(tmp_path: Path) -> None:
    workspace, root, sid = _one_snapshot(tmp_path)
    other = _run(root, workspace, [(1, 1, False, False)], session_id=None, snapshot_every=1)
    assert len(list((root / SNAPSHOTS).glob("*.snapshot"))) == 2
    shutil.copy(_snapshot_path(root, sid), _snapshot_path(root, other))
    with SqliteStore(_db(root)) as store:
        assert store.prepare(other)[0].snapshot.startswith("ignored: the snapshot is of session")
    # The same session id in another database (its own store id and incarnation).
    elsewhere = tmp_path / "elsewhere"
    with SqliteStore(_db(root)) as store:
        header, events = store.read(sid)
    with (
        SqliteStore(_db(elsewhere)) as store,
        store.open_writer(Session(sid, seed=events, header=header)),
    ):
        pass
    (elsewhere / SNAPSHOTS).mkdir(mode=0o700)
    shutil.copy(_snapshot_path(root, sid), _snapshot_path(elsewhere, sid))
    with SqliteStore(_db(elsewhere)) as store:
        assert "another store's" in store.prepare(sid)[0].snapshot


def _snapshot_path(root: Path, session_id: str) -> Path:
    from duraloop.store._sqlite._snapshots import snapshot_file

    return snapshot_file(root / SNAPSHOTS, session_id)


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("flip-body", "does not match its digest"),
        ("truncate", "does not match its digest"),
        ("garbage", "no header line"),
    ],
)
def test_a_damaged_sqlite_snapshot_is_ignored_and_reported(
    tmp_path: Path, how: str, reason: str
) -> None:
    workspace, root, sid = _one_snapshot(tmp_path)
    _damage(_snapshot_file(root), how)
    _assert_ignored(root, sid, workspace, tmp_path, reason)


def _damage(path: Path, how: str) -> None:
    blob = bytearray(path.read_bytes())
    if how == "flip-body":
        blob[-10] ^= 0x20
    elif how == "truncate":
        del blob[len(blob) // 2 :]
    elif how == "garbage":
        blob = bytearray(b"not a snapshot")
    path.write_bytes(bytes(blob))


# --------------------------------------------------------------------------- the property

_turns = st.lists(
    st.tuples(st.integers(0, 3), st.integers(1, 3), st.booleans(), st.booleans()),
    min_size=1,
    max_size=3,
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    first=_turns,
    rewind=st.one_of(st.none(), st.integers(1, 12)),
    later=st.lists(
        st.tuples(st.integers(0, 2), st.integers(1, 2), st.booleans(), st.booleans()), max_size=2
    ),
    every=st.sampled_from([1, 7, 1000]),
    pending=st.integers(0, 2),
    crash=st.one_of(st.none(), st.tuples(st.floats(0.0, 1.0), st.booleans())),
    damage=st.sampled_from(
        [None, None, "flip-body", "truncate", "garbage", "edit-last", "incarnation"]
    ),
)
def test_property_sqlite_snapshot_load_equals_whole_log_load(
    tmp_path_factory: pytest.TempPathFactory,
    first: Turns,
    rewind: int | None,
    later: Turns,
    every: int,
    pending: int,
    crash: tuple[float, bool] | None,
    damage: str | None,
) -> None:
    """Random sessions; a repair that may cut into the covered rows (`rewind`); turns by a
    writer without snapshots (as dsh); a crash; random damage to the snapshot or to the
    rows it binds: a load with the snapshot gives exactly the load without it, and the
    same rows and kept torn tails after repair."""
    tmp = tmp_path_factory.mktemp("prop")
    workspace = tmp / "ws"
    workspace.mkdir()
    root = tmp / "store"
    sid = _run(root, workspace, first, session_id=None, snapshot_every=every, pending=pending)
    has_snapshot = (root / SNAPSHOTS).is_dir() and any((root / SNAPSHOTS).iterdir())
    if rewind is not None:
        _sql(root, ("DELETE FROM events WHERE seq >= (SELECT max(seq) FROM events) - ?", (rewind,)))
    if later:
        try:
            _run(root, workspace, later, session_id=sid, snapshot_every=None)
        except UnpairedHistoryError:
            pass  # the rewind left closed history unanswered: nothing could continue it
    if crash is not None:
        _crash(root, crash[0], torn=crash[1])
    if damage in ("flip-body", "truncate", "garbage") and has_snapshot:
        _damage(_snapshot_file(root), damage)
    elif damage == "edit-last" and has_snapshot:
        _sql(root, ("UPDATE events SET time = time + 1 WHERE seq = ?", (_covered(root) - 1,)))
    elif damage == "incarnation":
        _sql(root, ("UPDATE sessions SET incarnation = ?", (str(uuid.uuid4()),)))
    a = _copy(root, tmp / "a", snapshot=True)
    b = _copy(root, tmp / "b", snapshot=False)
    try:
        with_snapshot = _load(a, sid, workspace)
    except Exception as exc:  # the same refusal must come without a snapshot
        event(f"refused {type(exc).__name__}")
        with pytest.raises(type(exc)):
            _load(b, sid, workspace)
        return
    without = _load(b, sid, workspace)
    event("snapshot " + re.sub(r"\d+", "N", with_snapshot["snapshot"])[:48])
    assert _without(with_snapshot, "snapshot") == _without(without, "snapshot")
    assert without["snapshot"] == "none"
    if damage is not None and has_snapshot:
        assert with_snapshot["snapshot"] != "used"
    assert _rows(a) == _rows(b)
    assert sorted(p.read_bytes() for p in a.glob("*.torn-*")) == sorted(
        p.read_bytes() for p in b.glob("*.torn-*")
    )
    _assert_dsh_schema(_db(a))


# --------------------------------------------------------------------------- dsh's layout

_FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "dsh-sessions"


def test_dsh_sessions_continued_on_sqlite_with_snapshots_keep_dsh_s_layout(
    tmp_path: Path,
) -> None:
    """dsh's sessions stored in a SQLite store and continued by duraloop with snapshots: the
    database holds exactly dsh's schema objects (what dsh's `validateRequiredSchema` checks),
    the snapshots are files beside it, and the rows alone read back as the snapshot load."""
    fixtures = sorted(_FIXTURES.glob("*/session.jsonl")) if _FIXTURES.is_dir() else []
    if not fixtures:
        pytest.skip(f"dsh fixtures not found at {_FIXTURES}")
    continued = 0
    for fixture in fixtures:
        header, events = read_log_file(fixture)
        workspace = tmp_path / "ws" / fixture.parent.name
        workspace.mkdir(parents=True)
        header = msgspec.structs.replace(header, cwd=str(workspace))
        root = tmp_path / fixture.parent.name  # the fixtures share one session id
        with SqliteStore(_db(root)) as store:
            with store.open_writer(Session(header.id, seed=events, header=header)):
                pass  # the dsh log as dsh left it (plus the end-seed a seeded session appends)
            setup = SessionSetup(
                store=store,
                model=ScriptedModel([{"text": "continued by duraloop"}]),
                cwd=workspace,
                config=LoopConfig(snapshot_every=1),
            )
            try:
                loop, _ = resume_session(header.id, setup)
            except UnpairedHistoryError:
                continue  # a fixture that cannot be continued (its rescue is a fork)
            with loop:
                assert anyio.run(loop.run_turn, "go on").kind == "completed"
        continued += 1
        _assert_dsh_schema(_db(root))
        assert {p.name for p in root.iterdir()} <= {
            "sessions.db",
            "sessions.db-wal",
            "sessions.db-shm",
            "sessions.db.locks",
            SNAPSHOTS,
        }
        assert len(list((root / SNAPSHOTS).glob("*.snapshot"))) == 1
        with SqliteStore(_db(root)) as store:
            stored = store.backend.read(header.id).events  # the rows alone, as dsh reads them
        with_snapshot = _load(
            _copy(root, tmp_path / "a" / fixture.parent.name, snapshot=True), header.id, workspace
        )
        without = _load(
            _copy(root, tmp_path / "b" / fixture.parent.name, snapshot=False), header.id, workspace
        )
        assert with_snapshot["snapshot"] == "used"
        assert with_snapshot["loaded"] == stored
        assert _without(with_snapshot, "snapshot") == _without(without, "snapshot")
    assert continued >= 5
