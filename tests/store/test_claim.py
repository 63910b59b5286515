"""Claiming a stored log for a writer: the remembered-load shortcut equals the full check.

`open_writer` after `load` must not read the log again (README.md#performance, the resume
scenario), yet its
answer must be exactly the full read-and-compare: these tests count backend reads, change
the file between load and claim in the ways a token must notice, and break the seed in the
middle, where a first/last identity check would not look.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from duraloop.errors import SessionExistsError
from duraloop.log import Event, Session, interrupted_turn_closers
from duraloop.log import vocabulary as v
from duraloop.store import JsonlStore, SessionStore, StoredLog
from duraloop.store._claim import MAX_REMEMBERED_LOADS, final_turn_closers

from ._builders import assistant, call_block, meta, one_turn_log, se, ss, te, tool_call, ts


def counting_reads(store: SessionStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    real = store.backend.read

    def read(session_id: str) -> StoredLog:
        reads.append(session_id)
        return real(session_id)

    monkeypatch.setattr(store.backend, "read", read)
    return reads


def stored_types(store: SessionStore, session_id: str) -> list[str]:
    return [event.type for event in store.backend.read(session_id).events]


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_resume_after_load_claims_without_reading_and_writes_only_end_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compression: str
) -> None:
    store = JsonlStore(tmp_path, compression="zstd" if compression == "zstd" else "none")
    store.backend.materialize(meta("s"), [*one_turn_log(), ts(6, 2), ss(7, 2, 1)])
    loaded = store.load("s")
    session = Session("s", seed=loaded.events, header=loaded.header)
    reads = counting_reads(store, monkeypatch)
    with store.open_writer(session) as writer:
        assert writer.stored_seq == 10, "the load's closers are stored, not rewritten"
    assert reads == []
    assert stored_types(store, "s")[8:] == [v.STEP_END, v.TURN_END, v.END_SEED]


def test_memory_store_has_no_token_and_claims_by_full_read(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.backend.materialize(meta("s"), one_turn_log())
    loaded = store.load("s")
    reads = counting_reads(store, monkeypatch)
    with store.open_writer(Session("s", seed=loaded.events, header=loaded.header)):
        pass
    assert len(reads) == (1 if store.backend.revision("s") is None else 0)
    assert stored_types(store, "s")[6:] == [v.END_SEED]


def test_append_between_load_and_claim_falls_back_and_rejects_the_stale_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonlStore(tmp_path)
    store.backend.materialize(meta("s"), one_turn_log())
    loaded = store.load("s")
    store.append("s", [ts(6, 2), te(7, 2)])
    reads = counting_reads(store, monkeypatch)
    with pytest.raises(SessionExistsError, match="already has a persisted log"):
        store.open_writer(Session("s", seed=loaded.events, header=loaded.header))
    assert reads == ["s"], "a changed token means a full read"
    assert len(store.backend.read("s").events) == 8, "nothing was written"


def test_file_replaced_with_equal_bytes_falls_back_and_claims(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonlStore(tmp_path)
    store.backend.materialize(meta("s"), one_turn_log())
    loaded = store.load("s")
    path = Path(str(store.locate("s")))
    copy = path.with_name("copy")
    copy.write_bytes(path.read_bytes())
    os.replace(copy, path)
    reads = counting_reads(store, monkeypatch)
    with store.open_writer(Session("s", seed=loaded.events, header=loaded.header)):
        pass
    assert reads == ["s"]
    assert stored_types(store, "s")[6:] == [v.END_SEED]


def test_seed_of_equal_copies_claims_and_a_changed_middle_event_is_rejected(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    store.backend.materialize(meta("s"), one_turn_log())
    loaded = store.load("s")
    copies = [
        Event(e.type, e.seq, e.time, e.data, e.source_event_seqs, e.surface_op)
        for e in loaded.events
    ]
    with store.open_writer(Session("s", seed=copies, header=loaded.header)):
        pass
    loaded = store.load("s")
    changed = list(loaded.events)
    changed[3] = assistant(
        3, 1, 1, [{"type": "text", "text": "a different answer"}], "one-turn-assistant", time=4
    )
    with pytest.raises(SessionExistsError):
        store.open_writer(Session("s", seed=changed, header=loaded.header))
    assert stored_types(store, "s")[6:] == [v.END_SEED], "only the first resume wrote"


def test_claim_with_another_cwd_is_rejected_on_the_shortcut_too(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    store.backend.materialize(meta("s", "/work"), one_turn_log())
    loaded = store.load("s")
    with pytest.raises(SessionExistsError):
        store.open_writer(Session("s", seed=loaded.events, header=meta("s", "/elsewhere")))


def test_oldest_remembered_load_is_evicted_and_claims_by_full_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonlStore(tmp_path)
    ids = [f"s{k}" for k in range(MAX_REMEMBERED_LOADS + 1)]
    for session_id in ids:
        store.backend.materialize(meta(session_id), one_turn_log())
    loads = {session_id: store.load(session_id) for session_id in ids}
    reads = counting_reads(store, monkeypatch)
    for session_id in ids:
        loaded = loads[session_id]
        with store.open_writer(Session(session_id, seed=loaded.events, header=loaded.header)):
            pass
    assert reads == [ids[0]]
    assert all(stored_types(store, session_id)[6:] == [v.END_SEED] for session_id in ids)


def multi_turn_log() -> list[Event]:
    events = one_turn_log()
    events += [
        ts(6, 2),
        ss(7, 2, 1),
        assistant(8, 2, 1, [call_block("c1"), call_block("c2")], "a2"),
        tool_call(9, 2, 1, "c1"),
    ]
    return events


@pytest.mark.parametrize("length", range(len(multi_turn_log()) + 1))
def test_final_turn_closers_equal_closers_of_the_whole_log(length: int) -> None:
    events = multi_turn_log()[:length]
    assert final_turn_closers(events) == interrupted_turn_closers(events)


def test_final_turn_closers_ignore_an_unanswered_call_of_a_closed_turn() -> None:
    events = [
        ts(0, 1),
        ss(1, 1, 1),
        assistant(2, 1, 1, [call_block("c")], "a"),
        se(3, 1, 1),
        te(4, 1),
        ts(5, 2),
    ]
    assert final_turn_closers(events) == interrupted_turn_closers(events)
    assert [event.type for event in final_turn_closers(events)] == [v.TURN_END]


def test_a_fresh_session_over_a_stored_log_is_told_to_use_resume_session_or_open_session(
    tmp_path: Path,
) -> None:
    store = JsonlStore(tmp_path)
    store.backend.materialize(meta("s"), one_turn_log())
    with pytest.raises(SessionExistsError) as raised:
        store.open_writer(Session("s", header=meta("s")))
    message = str(raised.value)
    assert 'resume_session("s", ...) or open_session("s", ...) from duraloop.loop' in message
    assert "seed a Session" not in message
