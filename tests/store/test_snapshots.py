"""Snapshots (docs/store.md#snapshots): a resume reads the snapshot and the tail, never trusts it.

The law pinned here: loading a session with its snapshot gives exactly the state loading it
without one gives (events, repair, derived messages, surface, the loop's fold), whatever
happened to the log or the snapshot; a snapshot that does not match its log is ignored and
reported, never believed.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from duraloop.errors import ConfigError, LlmError, ToolError, UnpairedHistoryError
from duraloop.llm import ScriptedModel
from duraloop.log import LazyEvents, Session
from duraloop.loop import AgentLoop, LoopConfig, SessionSetup, resume_session, start_session
from duraloop.store import JsonlStore, SessionStore, read_log_file
from duraloop.tools import Tool, ToolContext

SNAPSHOT = "session.snapshot"


@pytest.fixture(autouse=True)
def _both_snapshot_reads(snapshot_read: str) -> None:
    """Every test here runs with the snapshot read streamed and read whole."""


def _tool(name: str) -> Tool:
    async def body(arguments: Any, context: ToolContext) -> str:
        if arguments.get("fail"):
            raise ToolError("the tool failed on purpose", code="TEST_FAILURE")
        return f"{name} ok {arguments.get('i')}"

    return Tool(
        name=name,
        description=f"The {name} tool.",
        parameters={"type": "object", "properties": {"i": {"type": "integer"}}},
        validator=lambda arguments: arguments,
        body=body,
        parallel=True,
    )


TOOLS = [_tool("alpha"), _tool("beta")]


def _turn_script(turn: int, steps: int, calls: int, *, fail_tool: bool, error: bool) -> list[Any]:
    script: list[Any] = []
    for step in range(steps):
        script.append(
            {
                "text": f"turn {turn} step {step}",
                "tool_calls": [
                    {
                        "name": TOOLS[k % 2].name,
                        "arguments": {"i": k, "fail": fail_tool and k == 0},
                    }
                    for k in range(calls)
                ],
            }
        )
    if error:
        script.append({"error": {"code": "AUTH", "message": "bad key"}})
    else:
        script.append({"text": f"turn {turn} done"})
    return script


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace (created) and a store root under `tmp_path`."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace, tmp_path / "store"


def _store(root: Path, compression: str) -> JsonlStore:
    return JsonlStore(root, compression="zstd" if compression == "zstd" else "none")


async def _run_turns(
    store: SessionStore,
    workspace: Path,
    turns: list[tuple[int, int, bool, bool]],
    *,
    session_id: str | None,
    snapshot_every: int | None,
    pending: int = 0,
) -> str:
    """Run `turns` (steps, calls, fail a tool, end in a model error) and queue `pending` ones."""
    script = [
        r
        for n, (steps, calls, fail_tool, error) in enumerate(turns)
        for r in _turn_script(n, steps, calls, fail_tool=fail_tool, error=error)
    ]
    setup = SessionSetup(
        store=store,
        model=ScriptedModel(script),
        tools=TOOLS,
        cwd=workspace,
        config=LoopConfig(max_steps=10, snapshot_every=snapshot_every, retry=None),
    )
    loop = start_session(setup) if session_id is None else resume_session(session_id, setup)[0]
    with loop:
        for n in range(len(turns)):
            try:
                await loop.run_turn(f"prompt {n}")
            except LlmError:
                pass
        for n in range(pending):
            loop.followup(f"queued {n}")
        if pending:
            loop.steer("steer later")
    return loop.session.id


def _state(store: SessionStore, session_id: str, workspace: Path) -> dict[str, Any]:
    loaded, session = store.prepare(session_id)
    loop = AgentLoop(session, model=ScriptedModel([]), tools=TOOLS, cwd=workspace)
    return {
        "snapshot": loaded.snapshot,
        "loaded": list(loaded.events),
        "repair": (
            loaded.repair.truncated_bytes,
            loaded.repair.closers,
            None if loaded.repair.cut is None else loaded.repair.cut.describe(),
        ),
        # The end-seed of this lifecycle is new: its time is the clock's.
        "events": [*session.events[:-1], session.events[-1].type],
        "messages": session.derive_messages(),
        "nodes": list(session.surface.nodes),
        "generation": session.surface.replace_generation,
        "last_turn": loop.last_turn,
        "request": (loop._state.request.header, loop._state.request.context),
        "inbox": (loop.inbox.next_turn, loop.inbox.next_step),
        "first_live_seq": session.first_live_seq,
        "usage": loop.usage,  # through the snapshot's usage fold, or the whole log's
    }


def _without(state: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in state.items() if k not in keys}


def _log_file(root: Path) -> Path:
    found = [*root.rglob("session.jsonl"), *root.rglob("session.jsonl.zstd")]
    assert len(found) == 1
    return found[0]


def _log_dir(root: Path) -> Path:
    return _log_file(root).parent


def _copy(root: Path, to: Path, *, snapshot: bool) -> Path:
    shutil.copytree(root, to)
    if not snapshot:
        for path in to.rglob(SNAPSHOT):
            path.unlink()
    return to


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_load_through_snapshot_equals_whole_log_load(tmp_path: Path, compression: str) -> None:
    workspace, root = _dirs(tmp_path)
    sid = anyio.run(
        lambda: _run_turns(
            _store(root, compression),
            workspace,
            [(2, 3, False, False), (1, 2, True, False), (0, 0, False, True), (3, 1, False, False)],
            session_id=None,
            snapshot_every=5,
            pending=2,
        )
    )
    assert (_log_dir(root) / SNAPSHOT).is_file()
    with_snapshot = _state(
        _store(_copy(root, tmp_path / "a", snapshot=True), compression), sid, workspace
    )
    without = _state(
        _store(_copy(root, tmp_path / "b", snapshot=False), compression), sid, workspace
    )
    assert with_snapshot["snapshot"] == "used"
    assert without["snapshot"] == "none"
    assert _without(with_snapshot, "snapshot") == _without(without, "snapshot")
    assert with_snapshot["inbox"][0]  # the pending follow-ups came from the snapshot's fold
    assert with_snapshot["last_turn"] == 4


def test_resume_through_snapshot_runs_a_turn_without_decoding_the_prefix(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    store_root = tmp_path / "store"
    sid = anyio.run(
        lambda: _run_turns(
            JsonlStore(store_root),
            workspace,
            [(3, 3, False, False)],
            session_id=None,
            snapshot_every=1000,
        )
    )
    setup = SessionSetup(
        store=JsonlStore(store_root),
        model=ScriptedModel(_turn_script(9, 1, 2, fail_tool=False, error=False)),
        tools=TOOLS,
        cwd=workspace,
    )
    loop, repair = resume_session(sid, setup)
    assert not repair.repaired
    events = loop.session.events
    assert isinstance(events, LazyEvents)
    result = anyio.run(loop.run_turn, "again")
    assert result.kind == "completed"
    assert not events.materialized  # resume, the request, the tools and the writer: tail only
    loop.close()
    _, stored = JsonlStore(store_root).read(sid)
    assert [e.seq for e in stored] == list(range(len(stored)))
    assert stored[-1].type == "turn/end"


def _damage_snapshot(directory: Path, how: str) -> None:
    path = directory / SNAPSHOT
    blob = bytearray(path.read_bytes())
    if how == "flip-body":
        blob[-10] ^= 0x20
    elif how == "truncate":
        del blob[len(blob) // 2 :]
    elif how == "garbage":
        blob = bytearray(b"not a snapshot")
    path.write_bytes(bytes(blob))


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("flip-body", "does not match its digest"),
        ("truncate", "does not match its digest"),
        ("garbage", "no header line"),
    ],
)
def test_damaged_snapshot_is_ignored_and_reported(
    tmp_path: Path, how: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    workspace, root = _dirs(tmp_path)
    sid = anyio.run(
        lambda: _run_turns(
            JsonlStore(root), workspace, [(1, 2, False, False)], session_id=None, snapshot_every=1
        )
    )
    _damage_snapshot(_log_dir(root), how)
    damaged = _state(JsonlStore(_copy(root, tmp_path / "a", snapshot=True)), sid, workspace)
    clean = _state(JsonlStore(_copy(root, tmp_path / "b", snapshot=False)), sid, workspace)
    assert damaged["snapshot"].startswith("ignored: ")
    assert reason in damaged["snapshot"]
    assert "snapshot ignored" in caplog.text
    assert _without(damaged, "snapshot") == _without(clean, "snapshot")


def test_stale_snapshot_of_a_changed_prefix_is_never_believed(tmp_path: Path) -> None:
    workspace, root = _dirs(tmp_path)
    sid = anyio.run(
        lambda: _run_turns(
            JsonlStore(root), workspace, [(1, 1, False, False)], session_id=None, snapshot_every=1
        )
    )
    log = _log_dir(root) / "session.jsonl"
    data = log.read_bytes()
    # Same length, still valid JSON, but another text: the snapshot's messages would lie.
    changed = data.replace(b"turn 0 done", b"TURN 0 DONE")
    assert changed != data
    log.write_bytes(changed)
    state = _state(JsonlStore(root), sid, workspace)
    assert state["snapshot"] == "ignored: the log prefix the snapshot covers has changed (stale)"
    texts = [b.get("text") for m in state["messages"] for b in m["content"]]
    assert "TURN 0 DONE" in texts and "turn 0 done" not in texts


def test_snapshot_of_another_session_is_ignored(tmp_path: Path) -> None:
    workspace, root = _dirs(tmp_path)
    first = anyio.run(
        lambda: _run_turns(
            JsonlStore(root), workspace, [(1, 1, False, False)], session_id=None, snapshot_every=1
        )
    )
    second = anyio.run(
        lambda: _run_turns(
            JsonlStore(root), workspace, [(2, 1, False, False)], session_id=None, snapshot_every=1
        )
    )
    dirs = {p.parent.name: p.parent for p in root.rglob("session.jsonl")}
    store = JsonlStore(root)
    first_dir = Path(str(store.locate(first))).parent
    second_dir = Path(str(store.locate(second))).parent
    assert len(dirs) == 2
    shutil.copy(first_dir / SNAPSHOT, second_dir / SNAPSHOT)
    loaded, _ = JsonlStore(root).prepare(second)
    assert loaded.snapshot.startswith("ignored: the snapshot is of session")


def test_snapshot_is_not_taken_inside_a_turn_or_with_events_pending(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "store")
    session = Session("s1")
    session.append("turn/start", {"turn": 1})
    assert session.checkpoint() is None  # a turn is open
    with store.open_writer(session) as writer:
        assert not writer.write_snapshot({})  # events are pending (not flushed)
        writer.flush()
        assert not writer.write_snapshot({})  # flushed, but the turn is open
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        writer.flush()
        assert writer.write_snapshot({"lastTurn": 1})
    assert (Path(str(store.locate("s1"))).parent / SNAPSHOT).is_file()


def test_snapshot_every_must_be_a_positive_integer_or_none() -> None:
    with pytest.raises(ConfigError, match="snapshot_every"):
        LoopConfig(snapshot_every=0)
    assert LoopConfig(snapshot_every=None).snapshot_every is None


def test_snapshot_every_none_writes_no_snapshot(tmp_path: Path) -> None:
    workspace, root = _dirs(tmp_path)
    anyio.run(
        lambda: _run_turns(
            JsonlStore(root),
            workspace,
            [(1, 1, False, False)],
            session_id=None,
            snapshot_every=None,
        )
    )
    assert not list(root.rglob(SNAPSHOT))


# --------------------------------------------------------------------------- the property


_turns = st.lists(
    st.tuples(st.integers(0, 3), st.integers(1, 3), st.booleans(), st.booleans()),
    min_size=1,
    max_size=4,
)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    first=_turns,
    later=st.lists(
        st.tuples(st.integers(0, 3), st.integers(1, 3), st.booleans(), st.booleans()), max_size=3
    ),
    every=st.sampled_from([1, 7, 1000]),
    pending=st.integers(0, 2),
    cut=st.one_of(st.none(), st.floats(0.0, 1.0)),
    damage=st.sampled_from([None, None, "flip-body", "truncate", "garbage", "flip-log"]),
    compression=st.sampled_from(["none", "zstd"]),
)
def test_property_snapshot_load_equals_whole_log_load(
    tmp_path_factory: pytest.TempPathFactory,
    first: list[tuple[int, int, bool, bool]],
    later: list[tuple[int, int, bool, bool]],
    every: int,
    pending: int,
    cut: float | None,
    damage: str | None,
    compression: str,
) -> None:
    """Random sessions, crashes (cuts) at random points and random snapshot damage: a load
    with the snapshot gives exactly what the load without it gives, and the repaired logs
    are byte-for-byte the same."""
    tmp = tmp_path_factory.mktemp("prop")
    workspace = tmp / "ws"
    workspace.mkdir()
    root = tmp / "store"
    sid = anyio.run(
        lambda: _run_turns(
            _store(root, compression),
            workspace,
            first,
            session_id=None,
            snapshot_every=every,
            pending=pending,
        )
    )
    if later:  # more turns after the last snapshot (a longer tail)
        anyio.run(
            lambda: _run_turns(
                _store(root, compression), workspace, later, session_id=sid, snapshot_every=None
            )
        )
    directory = _log_dir(root)
    log = _log_file(root)
    if cut is not None:  # a crash: the log ends at a random byte (a torn tail, an open turn)
        data = log.read_bytes()
        log.write_bytes(data[: int(len(data) * (0.25 + 0.75 * cut))])
    if damage == "flip-log":  # the prefix changed under the snapshot: a valid, different log
        data = log.read_bytes()
        if compression == "none" and b"turn 0 step" in data:
            log.write_bytes(data.replace(b"turn 0 step", b"TURN 0 STEP", 1))
    elif damage is not None and (directory / SNAPSHOT).exists():
        _damage_snapshot(directory, damage)
    a = _copy(root, tmp / "a", snapshot=True)
    b = _copy(root, tmp / "b", snapshot=False)
    try:
        with_snapshot = _state(_store(a, compression), sid, workspace)
    except Exception as exc:  # the same refusal must come without a snapshot
        with pytest.raises(type(exc)):
            _state(_store(b, compression), sid, workspace)
        return
    without = _state(_store(b, compression), sid, workspace)
    assert _without(with_snapshot, "snapshot") == _without(without, "snapshot")
    assert without["snapshot"] == "none"
    if damage in ("flip-body", "truncate", "garbage"):
        assert with_snapshot["snapshot"] != "used"
    # The same repair was written, and the same torn tail kept.
    assert _log_file(a).read_bytes() == _log_file(b).read_bytes()
    assert sorted(p.read_bytes() for p in a.rglob("*.torn-*")) == sorted(
        p.read_bytes() for p in b.rglob("*.torn-*")
    )


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_crash_after_snapshot_repairs_the_tail_through_the_snapshot(
    tmp_path: Path, compression: str
) -> None:
    workspace, root = _dirs(tmp_path)
    turns = [(2, 2, False, False), (1, 3, False, False)]
    sid = anyio.run(
        lambda: _run_turns(
            _store(root, compression), workspace, turns, session_id=None, snapshot_every=1
        )
    )
    anyio.run(
        lambda: _run_turns(
            _store(root, compression),
            workspace,
            [(3, 2, False, False)],
            session_id=sid,
            snapshot_every=None,
        )
    )
    log = _log_file(root)
    data = log.read_bytes()
    log.write_bytes(data[: len(data) - 40])  # the last batch torn: an interrupted turn
    with_snapshot = _state(
        _store(_copy(root, tmp_path / "a", snapshot=True), compression), sid, workspace
    )
    without = _state(
        _store(_copy(root, tmp_path / "b", snapshot=False), compression), sid, workspace
    )
    assert with_snapshot["snapshot"] == "used"
    assert with_snapshot["repair"][0] > 0 and with_snapshot["repair"][1]  # cut, then closed
    assert _without(with_snapshot, "snapshot") == _without(without, "snapshot")


_FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "dsh-sessions"


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_dsh_fixture_layout_with_snapshots_reads_as_dsh_reads_it(
    tmp_path: Path, compression: str
) -> None:
    """A dsh log continued by duraloop, with its snapshot beside it: the session directory
    holds dsh's log file under its own name (plus the lock and the snapshot, which dsh's
    reader never opens), and that file alone reads back as the store reads the session."""
    fixtures = sorted(_FIXTURES.glob("*/session.jsonl")) if _FIXTURES.is_dir() else []
    if not fixtures:
        pytest.skip(f"dsh fixtures not found at {_FIXTURES}")
    continued = 0
    for fixture in fixtures:
        header, events = read_log_file(fixture)
        workspace = tmp_path / "ws" / fixture.parent.name
        workspace.mkdir(parents=True)
        header = msgspec.structs.replace(header, cwd=str(workspace))
        root = tmp_path / fixture.parent.name
        with _store(root, compression).open_writer(Session(header.id, seed=events, header=header)):
            pass  # the dsh log, as dsh left it (plus the end-seed a seeded session appends)
        setup = SessionSetup(
            store=_store(root, compression),
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
        log = _log_file(root)
        assert {p.name for p in log.parent.iterdir()} == {log.name, "session.lock", SNAPSHOT}
        _, stored = _store(root, compression).read(header.id)
        _, as_dsh_reads_it = read_log_file(log)  # dsh's file rules: the log file alone
        assert as_dsh_reads_it == stored
        with_snapshot = _state(
            _store(_copy(root, tmp_path / "a" / fixture.parent.name, snapshot=True), compression),
            header.id,
            workspace,
        )
        without = _state(
            _store(_copy(root, tmp_path / "b" / fixture.parent.name, snapshot=False), compression),
            header.id,
            workspace,
        )
        assert with_snapshot["snapshot"] == "used"
        assert _without(with_snapshot, "snapshot") == _without(without, "snapshot")
    assert continued >= 5


def test_zstd_frames_of_a_closed_turn_are_merged_into_one(tmp_path: Path) -> None:
    from duraloop.store._jsonl._zstd import scan_frames

    workspace, root = _dirs(tmp_path)
    turns = [(4, 3, False, False)]
    sid = anyio.run(
        lambda: _run_turns(
            _store(root, "zstd"), workspace, turns, session_id=None, snapshot_every=1
        )
    )
    merged = _log_file(root).read_bytes()
    frames = scan_frames(merged, path=None).frames
    # The header frame, the turn's batches in one frame, and the batch that closed the
    # turn kept as it was (a crash-sized cut of the end tears only that one).
    assert len(frames) == 3
    _, after = _store(root, "zstd").read(sid)
    _, as_dsh_reads_it = read_log_file(_log_file(root))
    assert as_dsh_reads_it == after
    assert after[-1].type == "turn/end"
    loaded, _ = _store(root, "zstd").prepare(sid)
    assert loaded.snapshot == "used"  # the snapshot binds the merged bytes
    # A later process merges only what it wrote after the snapshot it resumed from.
    anyio.run(
        lambda: _run_turns(_store(root, "zstd"), workspace, turns, session_id=sid, snapshot_every=1)
    )
    again = _log_file(root).read_bytes()
    assert again.startswith(merged)
    assert len(scan_frames(again, path=None).frames) == 5
    assert not list(root.rglob("*.merge"))  # no temporary file left


def test_zstd_merge_never_rewrites_frames_of_a_process_that_wrote_no_snapshot(
    tmp_path: Path,
) -> None:
    from duraloop.store._jsonl._zstd import scan_frames

    workspace, root = _dirs(tmp_path)
    turns = [(3, 2, False, False)]
    sid = anyio.run(
        lambda: _run_turns(
            _store(root, "zstd"), workspace, turns, session_id=None, snapshot_every=None
        )
    )
    unmerged = _log_file(root).read_bytes()
    count = len(scan_frames(unmerged, path=None).frames)
    # A stale temporary file of a merge killed before its rename is swept by the next one.
    stale = _log_file(root).with_name("session.jsonl.zstd.0123456789ab.merge")
    stale.write_bytes(unmerged)
    anyio.run(
        lambda: _run_turns(_store(root, "zstd"), workspace, turns, session_id=sid, snapshot_every=1)
    )
    after = _log_file(root).read_bytes()
    assert after.startswith(unmerged)  # the earlier frames are left as they were
    assert len(scan_frames(after, path=None).frames) == count + 2
    assert not stale.exists()


def test_a_cut_of_the_last_few_bytes_tears_only_the_closing_batch(tmp_path: Path) -> None:
    workspace, root = _dirs(tmp_path)
    sid = anyio.run(
        lambda: _run_turns(
            _store(root, "zstd"),
            workspace,
            [(3, 2, False, False)] * 3,
            session_id=None,
            snapshot_every=1,
        )
    )
    _, before = _store(root, "zstd").read(sid)
    log = _log_file(root)
    log.write_bytes(log.read_bytes()[:-5])
    (log.parent / SNAPSHOT).unlink()
    loaded = _store(root, "zstd").load(sid)
    kept = list(loaded.events[: len(loaded.events) - len(loaded.repair.closers)])
    last_step = max(e.seq for e in before if e.type == "step/start")
    # Only the last batch (the final step's response, step/end, turn/end) is torn, as without
    # merging: never the merged frame holding the turns before it.
    assert len(kept) > last_step
    assert kept == before[: len(kept)]
    assert loaded.repair.truncated_bytes > 0


def test_a_snapshot_that_cannot_be_written_is_logged_and_the_turn_still_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from duraloop.errors import StoreError
    from duraloop.store._jsonl._backend import JsonlBackend

    def refuse(self: JsonlBackend, session_id: str, events: int, body: bytes) -> bool:
        raise StoreError("the disk is full")

    monkeypatch.setattr(JsonlBackend, "write_snapshot", refuse)
    workspace, root = _dirs(tmp_path)
    sid = anyio.run(
        lambda: _run_turns(
            JsonlStore(root), workspace, [(1, 1, False, False)], session_id=None, snapshot_every=1
        )
    )
    assert "the snapshot was not written: the disk is full" in caplog.text
    assert not list(root.rglob(SNAPSHOT))
    _, events = JsonlStore(root).read(sid)
    assert events[-1].type == "turn/end"  # the log is whole; only the cache is missing


def test_reading_a_snapshot_file_as_a_log_says_what_it_is(tmp_path: Path) -> None:
    from duraloop.errors import UsageError

    workspace, root = _dirs(tmp_path)
    anyio.run(
        lambda: _run_turns(
            JsonlStore(root), workspace, [(1, 1, False, False)], session_id=None, snapshot_every=1
        )
    )
    with pytest.raises(UsageError, match="is a duraloop snapshot .* not a log; pass the session"):
        read_log_file(_log_dir(root) / SNAPSHOT)
