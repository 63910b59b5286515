"""The persistence contract (docs/cases.md#persistence-contract-cases), run on every backend.

Coordination (seq checks, repair on load, collision check, single writer) lives once in
SessionStore, so the same assertions must hold for MemoryStore, JsonlStore (raw and zstd) and
SqliteStore alike. Cases are `test_case_NN_...`; those of 7.6 with no test here:

- 77 (a pre-aborted signal rejects `list`/`inspect`/`readFrom`): the store API is
  synchronous and takes no abort signal; cancellation belongs to the loop's async callers.
- 84 (a cold load queued behind a live creation re-checks liveness): there is no per-id
  promise chain to queue on. A load in the writer's own store takes the case 83 path; any
  other store (or process) meets the single-writer lock and gets `SessionLockedError`
  (`test_writer_lock_blocks_a_repairing_load`).
- 87 is adapted: dsh's "backend reloaded under a live session" has no counterpart (the
  writer and its backend are one object), and the lock keeps other duraloop writers out. The
  same tail can still appear under an open writer (its own append failed and the rollback
  failed, or a process ignored the lock): the writer's next flush cuts it, with no closers.
- 87 and 88 need a torn tail, which the memory backend cannot hold (its writes are atomic):
  they skip there, saying so.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from duraloop.errors import (
    AppendConflictError,
    CorruptLogError,
    EventRejectedError,
    SessionExistsError,
    SessionForkError,
    SessionLockedError,
    SessionNotFoundError,
    StoreError,
    UsageError,
)
from duraloop.log import Event, Session, SessionHeader, check_pairing
from duraloop.log import vocabulary as v
from duraloop.store import JsonlStore, MemoryStore, SessionStore, SqliteStore
from store._builders import assistant, call_block, ev, meta, one_turn_log, se, ss, te, tool_call, ts
from store._postgres import postgres_store
from store._torn import append_torn_fragment


@pytest.fixture(params=["memory", "jsonl", "jsonl-zstd", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    """Every contract test runs on each backend (and on both JSONL encodings)."""
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "jsonl":
        yield JsonlStore(tmp_path / "sessions")
    elif request.param == "jsonl-zstd":
        yield JsonlStore(tmp_path / "sessions", compression="zstd")
    elif request.param == "sqlite":
        with SqliteStore(tmp_path / "sessions.db") as sqlite_store:
            yield sqlite_store
    else:
        with postgres_store() as pg_store:
            yield pg_store


def test_case_71_round_trip_returns_identical_events_and_header(store: SessionStore) -> None:
    store.backend.materialize(meta("s1", "/work"), one_turn_log())
    loaded = store.load("s1")
    assert loaded.header.version == 0
    assert loaded.header.id == "s1"
    assert loaded.header.cwd == "/work"
    assert loaded.header.created_at == 1000
    assert loaded.events == one_turn_log()
    assert not loaded.repair.repaired


def stored(store: SessionStore, session_id: str) -> list[Event]:
    return store.backend.read(session_id).events


def test_case_73_crash_with_open_turn_and_step_is_closed_durably(store: SessionStore) -> None:
    store.backend.materialize(meta("s"), one_turn_log())
    store.append("s", [ts(6, 2, time=7), ss(7, 2, 1, time=8)])
    inspected = store.inspect("s")
    assert [e.type for e in inspected.events][-4:] == [
        "turn/start",
        "step/start",
        "step/end",
        "turn/end",
    ]
    assert len(stored(store, "s")) == 8, "inspect never writes"
    loaded = store.load("s")
    assert [e.seq for e in loaded.events] == list(range(10))
    assert loaded.events[-1].data == {"turn": 2, "reason": {"kind": "interrupted"}}
    assert loaded.events[-1].time == 8, "closers reuse the last real time"
    assert stored(store, "s") == loaded.events
    store.append("s", [ts(10, 3), te(11, 3)])
    assert [e.seq for e in stored(store, "s")] == list(range(12))


def test_case_74_unstarted_tool_request_gets_tool_not_started(store: SessionStore) -> None:
    store.backend.materialize(meta("s"), one_turn_log())
    store.append("s", [ts(6, 2), ss(7, 2, 1), assistant(8, 2, 1, [call_block("call-x")], "a2")])
    loaded = store.load("s")
    assert [e.type for e in loaded.events[6:]] == [
        "turn/start",
        "step/start",
        "assistant/message",
        "tool/result",
        "step/end",
        "turn/end",
    ]
    result = loaded.events[9].data
    assert result["message"]["source"]["callId"] == "call-x"
    assert result["message"]["content"][0]["isError"] is True
    assert result["error"]["code"] == v.TOOL_NOT_STARTED
    assert loaded.events[9].source_event_seqs is None


def test_case_75_recorded_call_without_result_is_outcome_unknown(store: SessionStore) -> None:
    events = [
        ts(0, 1),
        ss(1, 1, 1),
        assistant(2, 1, 1, [call_block("call-risk", "write")], "a1"),
        tool_call(3, 1, 1, "call-risk", "write"),
    ]
    store.backend.materialize(meta("s"), events)
    loaded = store.load("s")
    result = loaded.events[4]
    assert result.data["error"] == {
        "name": "ToolOutcomeUnknownError",
        "code": "TOOL_OUTCOME_UNKNOWN",
    }
    assert result.source_event_seqs == [3]
    text = result.data["message"]["content"][0]["content"][0]["text"]
    assert "retry only if the operation is read-only or idempotent" in text
    assert "if it may have side effects, first verify external state or ask the user" in text
    session = Session("s", seed=loaded.events, header=loaded.header)
    messages = session.derive_messages()
    check_pairing(messages)
    block = messages[-1]["content"][0]
    assert (block["toolCallId"], block["isError"]) == ("call-risk", True)


def test_case_80_reappending_stored_seqs_is_rejected(store: SessionStore) -> None:
    store.backend.materialize(meta("s"), one_turn_log())
    with pytest.raises(AppendConflictError, match="expected 6 at index 0, got 0"):
        store.append("s", one_turn_log())
    assert stored(store, "s") == one_turn_log()


def test_case_81_mid_batch_seq_gap_is_rejected(store: SessionStore) -> None:
    store.backend.materialize(meta("s"), [ts(0, 1)])
    with pytest.raises(AppendConflictError, match="expected 2 at index 1, got 3"):
        store.append("s", [ss(1, 1, 1), se(3, 1, 1)])
    assert len(stored(store, "s")) == 1


def test_case_82_non_lossless_data_is_rejected_on_append(store: SessionStore) -> None:
    store.backend.materialize(meta("s"), [ts(0, 1)])
    with pytest.raises(EventRejectedError, match="losslessly JSON-serializable"):
        store.append("s", [ev("plugin/x", 1, 1, {"bad": float("inf")})])
    assert len(stored(store, "s")) == 1


def test_case_85_fork_seed_is_persisted_once_with_end_seed(store: SessionStore) -> None:
    session = Session("forked", seed=one_turn_log(), header=meta("forked"))
    with store.open_writer(session) as writer:
        writer.flush()
        writer.flush()
        assert writer.statistics().batches_written == 1
    events = stored(store, "forked")
    assert events[:6] == one_turn_log()
    assert [e.type for e in events[6:]] == [v.END_SEED]


def test_case_86_resume_writes_only_end_seed_then_new_turn(store: SessionStore) -> None:
    store.backend.materialize(meta("s"), one_turn_log())
    loaded = store.load("s")
    session = Session("s", seed=loaded.events, header=loaded.header)
    with store.open_writer(session) as writer:
        writer.flush()
        assert writer.statistics().events_written == 1
        session.append("turn/start", {"turn": 2})
        session.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    events = stored(store, "s")
    assert [e.seq for e in events] == list(range(9))
    assert events[6].type == v.END_SEED
    assert events[:6] == one_turn_log()


def test_case_66_fork_persists_child_with_lineage_header(store: SessionStore) -> None:
    store.backend.materialize(meta("src", "/work"), one_turn_log())
    child = store.fork("src", child_id="kid")
    assert child == "kid"
    loaded = store.load("kid")
    assert loaded.events[:6] == one_turn_log()
    assert loaded.events[6].type == v.END_SEED
    assert (loaded.header.parent_session, loaded.header.seed_length, loaded.header.cwd) == (
        "src",
        6,
        "/work",
    )


def test_fork_errors_name_their_codes(store: SessionStore) -> None:
    store.backend.materialize(meta("src"), [*one_turn_log(), ts(6, 2)])
    with pytest.raises(SessionForkError) as not_found:
        store.fork("nope")
    assert not_found.value.code == "SESSION_NOT_FOUND"
    with pytest.raises(SessionForkError) as exists:
        store.fork("src", child_id="src", boundary=999)
    assert exists.value.code == "SESSION_ALREADY_EXISTS"
    with pytest.raises(SessionForkError) as open_turn:
        store.fork("only-open")
    assert open_turn.value.code == "SESSION_NOT_FOUND"
    store.backend.materialize(meta("only-open"), [ts(0, 1)])
    with pytest.raises(SessionForkError, match="no closed turn to fork yet") as open_turn:
        store.fork("only-open")
    assert open_turn.value.code == "OPEN_TURN"
    minted = store.fork("src", boundary=5)
    assert store.load(minted).header.seed_length == 6


def test_case_89_new_session_reusing_a_persisted_id_is_rejected(store: SessionStore) -> None:
    store.backend.materialize(meta("s"), one_turn_log())
    with pytest.raises(SessionExistsError, match="already has a persisted log"):
        store.open_writer(Session("s", header=meta("s")))
    other_seed = Session("s", seed=[ts(0, 1), te(1, 1)], header=meta("s"))
    with pytest.raises(SessionExistsError):
        store.open_writer(other_seed)
    assert stored(store, "s") == one_turn_log()


def test_writer_materializes_on_first_flush_and_counts_batches(store: SessionStore) -> None:
    session = Session("new", header=meta("new"))
    writer = store.open_writer(session)
    writer.flush()
    assert not store.exists("new"), "materialization is lazy"
    session.append("turn/start", {"turn": 1})
    writer.flush()
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    writer.close()
    stats = writer.statistics()
    assert (stats.batches_written, stats.events_written, stats.pending_events) == (2, 2, 0)
    assert [e.type for e in store.load("new").events] == ["turn/start", "turn/end"]


def test_second_writer_for_the_same_session_is_locked_out(store: SessionStore) -> None:
    session = Session("s", header=meta("s"))
    with store.open_writer(session):
        with pytest.raises(StoreError):
            store.open_writer(Session("s", header=meta("s")))
    with store.open_writer(Session("s", header=meta("s"))):
        pass


def test_case_83_load_of_a_live_open_turn_is_rejected_until_it_closes(store: SessionStore) -> None:
    session = Session("s", header=meta("s"))
    writer = store.open_writer(session)
    session.append("turn/start", {"turn": 1})
    writer.flush()
    with pytest.raises(StoreError, match='cannot load session "s" while its live turn is open'):
        store.load("s")
    session.append("step/start", {"turn": 1, "step": 1})
    with pytest.raises(StoreError, match="while its live turn is open"):
        store.load("s")
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert len(store.load("s").events) == 4, "a closed live turn loads (flushed first)"
    writer.close()
    loaded = store.load("s")
    assert [e.type for e in loaded.events] == [v.TURN_START, v.STEP_START, v.STEP_END, v.TURN_END]
    assert not loaded.repair.repaired


def test_missing_session_is_not_found(store: SessionStore) -> None:
    with pytest.raises(SessionNotFoundError):
        store.load("absent")
    with pytest.raises(SessionNotFoundError):
        store.inspect("absent")
    assert not store.exists("absent")
    with pytest.raises(SessionNotFoundError):
        store.append("absent", [ts(0, 1)])


def test_case_76_list_summarizes_only_materialized_sessions(store: SessionStore) -> None:
    store.backend.materialize(meta("done", "/w"), one_turn_log())
    store.backend.materialize(meta("open"), [ts(0, 1)])
    with store.open_writer(Session("lazy", header=meta("lazy"))):
        pass
    summaries = {s.id: s for s in store.list()}
    assert set(summaries) == {"done", "open"}
    assert (
        summaries["done"].turn_count,
        summaries["done"].last_turn_end,
        summaries["done"].event_count,
    ) == (1, "completed", 6)
    assert summaries["open"].last_turn_end == "open"
    assert summaries["done"].cwd == "/w"


def test_case_68_unknown_type_is_refused_unless_ignorable(store: SessionStore) -> None:
    from duraloop.errors import SessionFormatUnsupportedError

    store.backend.materialize(meta("s"), [ev("future/event", 0, 0, {})])
    with pytest.raises(
        SessionFormatUnsupportedError, match='event type "future/event" \\(seq 0\\)'
    ):
        store.load("s")
    kept = Event("future/event", 0, 0, {}, ignorable=True)
    store.backend.materialize(meta("t"), [kept])
    assert store.load("t").events == [kept]


def test_writer_lock_blocks_a_repairing_load(store: SessionStore) -> None:
    store.backend.materialize(meta("s"), [ts(0, 1)])
    release = store.backend.lock("s", cwd=None)
    try:
        with pytest.raises(SessionLockedError):
            store.load("s")
        assert len(store.inspect("s").events) == 2, "inspect needs no lock"
    finally:
        release()
    assert len(store.load("s").events) == 2


@pytest.mark.parametrize("data", [{"turm": 1}, [], None, {"turn": 0}])
def test_load_refuses_to_repair_a_malformed_open_final_turn_and_writes_nothing(
    store: SessionStore, data: object
) -> None:
    # Regression: a final turn/start without a positive integer turn made load crash with
    # AttributeError or append closers for turn None.
    store.backend.materialize(meta("s"), [*one_turn_log(), ev(v.TURN_START, 6, 7, data)])
    before = store.backend.read("s").events
    for read in (store.load, store.inspect, store.read):
        with pytest.raises(CorruptLogError, match='session "s" is damaged: turn/start at seq 6'):
            read("s")
    assert store.backend.read("s").events == before


@pytest.mark.parametrize("created_at", [1.5, -1, 2**53])
def test_case_72_bad_created_at_is_refused_and_does_not_reserve_the_id(
    store: SessionStore, created_at: float
) -> None:
    with pytest.raises(
        EventRejectedError, match="session metadata createdAt must be a non-negative safe integer"
    ):
        SessionHeader(id="s1", created_at=created_at)  # type: ignore[arg-type]
    assert not store.exists("s1")
    session = Session("s1", header=meta("s1"))
    with store.open_writer(session):
        session.append("turn/start", {"turn": 1})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    loaded = store.load("s1")
    assert loaded.header.created_at == 1000
    assert [e.type for e in loaded.events] == [v.TURN_START, v.TURN_END]


def test_case_78_read_from_serves_the_stored_suffix_without_repair(store: SessionStore) -> None:
    store.backend.materialize(meta("s"), one_turn_log())
    assert store.read_from("s", 0) == one_turn_log()
    assert store.read_from("s", 3) == one_turn_log()[3:]
    assert store.read_from("s", 6) == []
    assert store.read_from("s", 106) == []
    store.append("s", [ts(6, 2)])
    revision = store.revision("s")
    assert store.read_from("s", 6) == [ts(6, 2)], "an open turn is served as stored, no closers"
    assert store.revision("s") == revision, "read_from never writes"
    with pytest.raises(SessionNotFoundError):
        store.read_from("absent", 0)
    for bad in (-1, 1.5, True, 2**53):
        with pytest.raises(UsageError, match="non-negative safe integer"):
            store.read_from("s", bad)  # type: ignore[arg-type]


def test_case_79_revision_is_stable_and_changes_after_an_append_or_a_repair(
    store: SessionStore,
) -> None:
    store.backend.materialize(meta("s"), one_turn_log())
    first = store.revision("s")
    assert store.revision("s") == first
    store.inspect("s")
    store.read_from("s", 0)
    assert not store.load("s").repair.repaired
    assert store.revision("s") == first, "reads and a load that repairs nothing keep it"
    store.append("s", [ts(6, 2), ss(7, 2, 1)])
    appended = store.revision("s")
    assert appended != first
    assert len(store.inspect("s").events) == 10
    assert store.revision("s") == appended, "inspect repairs in memory only"
    assert store.load("s").repair.repaired
    assert store.revision("s") not in (first, appended), "a committed repair changes it"
    with pytest.raises(SessionNotFoundError):
        store.revision("absent")


def test_case_87_writer_flush_cuts_a_torn_tail_without_closers(store: SessionStore) -> None:
    session = Session("s", header=meta("s"))
    with store.open_writer(session) as writer:
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        writer.flush()
        append_torn_fragment(store, "s", seq=2)
        session.append("step/end", {"turn": 1, "step": 1})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        writer.flush()
        assert writer.stored_seq == 4
    after = store.backend.read("s")
    assert after.torn is None
    assert after.events == list(session.events)
    assert [e.type for e in after.events] == [v.TURN_START, v.STEP_START, v.STEP_END, v.TURN_END]
    assert after.events[-1].data["reason"] == {"kind": "completed"}, "no synthetic closers"


def test_case_88_torn_fragment_after_an_open_turn_is_cut_and_the_turn_closed(
    store: SessionStore,
) -> None:
    store.backend.materialize(meta("s"), one_turn_log())
    store.append("s", [ts(6, 2, time=7), ss(7, 2, 1, time=8)])
    append_torn_fragment(store, "s", seq=8)
    assert len(store.read_from("s", 0)) == 8, "a torn tail is never served"
    revision = store.revision("s")
    loaded = store.load("s")
    assert [e.seq for e in loaded.events] == list(range(10))
    assert (loaded.events[8].type, loaded.events[8].data) == (v.STEP_END, {"turn": 2, "step": 1})
    assert (loaded.events[9].type, loaded.events[9].data) == (
        v.TURN_END,
        {"turn": 2, "reason": {"kind": "interrupted"}},
    )
    assert loaded.repair.truncated_bytes > 0
    assert store.revision("s") != revision
    after = store.backend.read("s")
    assert (after.torn, after.events) == (None, loaded.events)
    store.append("s", [ts(10, 3), te(11, 3)])
    assert [e.seq for e in store.read("s")[1]] == list(range(12))


def test_loading_a_missing_session_leaves_nothing_behind(tmp_path: Path) -> None:
    # Regression (user trial): `run --session NEW` tried a resume first, and the lock of the
    # unknown id created `_no-cwd/NEW/session.lock` in the store.
    store = JsonlStore(tmp_path / "root")
    with pytest.raises(SessionNotFoundError):
        store.load("absent")
    assert not (tmp_path / "root").exists() or list((tmp_path / "root").rglob("*")) == []
