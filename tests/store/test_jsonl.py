"""The JSONL backend on disk: layout, crash recovery, fsync rollback, locks (cases 63-67), zstd.

These tests write real files under `tmp_path`, corrupt them the way a crash would, and use
a second OS process for the lock, because `flock` semantics are per open file description.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from random import Random

import pytest
import zstandard

from duraloop.errors import (
    AppendConflictError,
    ConfigError,
    CorruptLogError,
    SessionLockedError,
    SessionNotFoundError,
    StoreError,
)
from duraloop.log import Event, Session, SessionHeader, encode_events_lines
from duraloop.store import JsonlStore, MemoryStore
from duraloop.store._backend import DamagedLog
from duraloop.store._codec._records import encode_header
from duraloop.store._jsonl._zstd import scan_frames

from ._builders import meta, one_turn_log, se, ss, te, text_chunk, ts


def log_path(root: Path, session_id: str, cwd: str | None = None) -> Path:
    project = "_no-cwd" if cwd is None else "--" + cwd.strip("/").replace("/", "-") + "--"
    return root / project / session_id / "session.jsonl"


def test_layout_modes_and_header_line(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    store.backend.materialize(meta("s1", "/home/user/proj"), one_turn_log())
    path = log_path(tmp_path, "s1", "/home/user/proj")
    assert path.is_file()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.read_bytes().startswith(
        b'{"type":"session","version":0,"id":"s1","createdAt":1000,"cwd":"/home/user/proj",'
        b'"delegationDepth":0}\n'
    )
    assert not list(path.parent.glob("*.tmp"))


def test_case_63_crash_with_torn_line_truncates_and_closes_the_turn(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    store.backend.materialize(meta("s"), one_turn_log())
    store.append("s", [ts(6, 2), ss(7, 2, 1)])
    path = log_path(tmp_path, "s")
    committed = path.read_bytes()
    with path.open("ab") as handle:
        handle.write(b'{"type":"assistant/chunk","seq":8,"ti')
    loaded = store.load("s")
    assert [e.seq for e in loaded.events] == list(range(10))
    assert [e.type for e in loaded.events[8:]] == ["step/end", "turn/end"]
    assert loaded.events[9].data["reason"] == {"kind": "interrupted"}
    assert loaded.repair.truncated_bytes == len(b'{"type":"assistant/chunk","seq":8,"ti')
    assert path.read_bytes().startswith(committed), "the committed prefix is unchanged"
    store.append("s", [ts(10, 3), te(11, 3)])
    assert [e.seq for e in store.load("s").events] == list(range(12))


def test_case_64_failed_fsync_rolls_the_append_back_and_retry_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonlStore(tmp_path)
    session = Session("s", seed=one_turn_log(), header=meta("s"), check_invariants=False)
    writer = store.open_writer(session)
    writer.flush()
    path = log_path(tmp_path, "s")
    size = path.stat().st_size
    real_fsync = os.fsync
    calls = {"n": 0}

    def failing_fsync(fd: int) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(5, "simulated EIO")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    session.append("turn/start", {"turn": 2})
    with pytest.raises(StoreError, match="rolled back") as info:
        writer.flush()
    assert isinstance(info.value.__cause__, OSError)
    assert path.stat().st_size == size
    assert writer.statistics().pending_events == 1
    writer.flush()
    writer.close()
    assert [e.seq for e in store.backend.read("s").events] == list(range(8))


def test_writer_flush_is_one_fsync_per_batch_and_noop_when_idle(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    session = Session("s", header=meta("s"))
    with store.open_writer(session) as writer:
        session.append("turn/start", {"turn": 1})
        writer.flush()
        first = writer.statistics()
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        writer.flush()
        writer.flush()
        stats = writer.statistics()
    assert first.fsync_count == 2, "materialize: file + directory"
    assert stats.fsync_count == 3
    assert stats.bytes_written == log_path(tmp_path, "s").stat().st_size


def test_writer_packs_chunk_runs_per_batch(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    events = [ts(0, 1), ss(1, 1, 1), *[text_chunk(2 + k, 2 + k, "x") for k in range(4)]]
    store.backend.materialize(meta("s"), events)
    lines = log_path(tmp_path, "s").read_bytes().splitlines()
    assert len(lines) == 4 and b'"text-chunks"' in lines[3]
    assert store.inspect("s").events[: len(events)] == events


def test_case_67_header_id_mismatch_rejects_and_changes_nothing(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    store.backend.materialize(meta("a"), [ts(0, 1)])
    store.backend.materialize(meta("b"), [ts(0, 1)])
    path = log_path(tmp_path, "a")
    path.write_bytes(path.read_bytes().replace(b'"id":"a"', b'"id":"b"'))
    before = path.read_bytes()
    with pytest.raises(CorruptLogError, match='requested id "a" does not match header id "b"'):
        store.load("a")
    assert path.read_bytes() == before


def test_corrupt_committed_line_raises_with_path_and_line(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    store.backend.materialize(meta("s"), one_turn_log())
    path = log_path(tmp_path, "s")
    lines = path.read_bytes().split(b"\n")
    lines[3] = lines[3][:-5]
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(CorruptLogError) as info:
        store.load("s")
    assert info.value.line == 4
    assert info.value.path == str(path)


def test_duplicate_id_under_two_projects_is_corruption(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    store.backend.materialize(meta("s", "/a"), [ts(0, 1)])
    other = log_path(tmp_path, "s", "/b")
    other.parent.mkdir(parents=True)
    other.write_bytes(log_path(tmp_path, "s", "/a").read_bytes())
    with pytest.raises(CorruptLogError, match='duplicate JSONL session id "s"'):
        store.load("s")


HOLD_LOCK = textwrap.dedent(
    """
    import sys, time
    from duraloop.store import JsonlStore
    release = JsonlStore(sys.argv[1]).backend.lock("s", cwd=None)
    print("locked", flush=True)
    sys.stdin.readline()
    """
)


def test_second_writer_in_another_process_gets_session_locked(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    store.backend.materialize(meta("s"), [ts(0, 1)])
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(SessionLockedError, match="being written by another process"):
            store.load("s")
        with pytest.raises(SessionLockedError):
            store.open_writer(Session("s", seed=[ts(0, 1)], header=meta("s")))
    finally:
        holder.kill()
        holder.wait()
        if holder.stdin is not None:
            holder.stdin.close()
        if holder.stdout is not None:
            holder.stdout.close()
    loaded = store.load("s")
    assert [e.type for e in loaded.events] == ["turn/start", "turn/end"], (
        "a dead holder's lock does not block"
    )


def test_memory_and_jsonl_store_agree_on_a_written_session(tmp_path: Path) -> None:
    results = []
    for store in (MemoryStore(), JsonlStore(tmp_path)):
        session = Session("s", header=meta("s"), clock=lambda: 5)
        with store.open_writer(session):
            session.append("turn/start", {"turn": 1})
            session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        results.append(store.load("s").events)
    assert results[0] == results[1]


# --------------------------------------------------------------------------- zstd encoding


def zstd_path(root: Path, session_id: str) -> Path:
    return root / "_no-cwd" / session_id / "session.jsonl.zstd"


def noisy_chunks(first_seq: int, count: int) -> list[Event]:
    """Chunk events of incompressible text: one batch of them spans several zstd blocks."""
    random = Random(first_seq)
    return [
        text_chunk(
            first_seq + k,
            0,
            "".join(random.choice("0123456789abcdef") for _ in range(200)),
            index=k,
        )
        for k in range(count)
    ]


def test_zstd_layout_is_one_checksummed_frame_for_the_header_and_one_per_batch(
    tmp_path: Path,
) -> None:
    store = JsonlStore(tmp_path, compression="zstd")
    session = Session("s", header=meta("s"))
    with store.open_writer(session) as writer:
        session.append("turn/start", {"turn": 1})
        writer.flush()
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    data = zstd_path(tmp_path, "s").read_bytes()
    scan = scan_frames(data, path=None)
    assert len(scan.frames) == 3 and scan.torn_start is None
    texts = [zstandard.ZstdDecompressor().decompress(data[a:b]) for a, b in scan.frames]
    assert texts[0] == encode_header(meta("s"))
    assert [text.count(b"\n") for text in texts] == [1, 1, 1]
    assert all(zstandard.get_frame_parameters(data[a:b]).has_checksum for a, b in scan.frames)
    assert not log_path(tmp_path, "s").exists()
    assert writer.statistics().bytes_written == len(data)


def test_zstd_torn_frame_load_rewrites_recovered_events_and_closers_as_one_frame(
    tmp_path: Path,
) -> None:
    store = JsonlStore(tmp_path, compression="zstd")
    store.backend.materialize(meta("s"), [ts(0, 1), ss(1, 1, 1)])
    path = zstd_path(tmp_path, "s")
    committed = path.read_bytes()
    store.append("s", noisy_chunks(2, 2000))
    torn_size = path.stat().st_size - 10
    path.write_bytes(path.read_bytes()[:torn_size])
    loaded = store.load("s")
    recovered = len(loaded.events) - 2 - 2
    assert 0 < recovered < 2000
    assert [e.type for e in loaded.events[-2:]] == ["step/end", "turn/end"]
    assert loaded.repair.truncated_bytes == torn_size - len(committed), (
        "cut at the torn frame's start"
    )
    data = path.read_bytes()
    assert data.startswith(committed)
    scan = scan_frames(data, path=None)
    assert scan.torn_start is None and len(scan.frames) == 3, (
        "recovered events + closers: one frame"
    )
    assert store.inspect("s").events == loaded.events
    store.append("s", [ts(len(loaded.events), 2)])
    assert len(store.backend.read("s").events) == len(loaded.events) + 1


def test_zstd_writer_adopting_a_torn_frame_rewrites_recovered_events_without_closers(
    tmp_path: Path,
) -> None:
    store = JsonlStore(tmp_path, compression="zstd")
    seed = [ts(0, 1), ss(1, 1, 1), *noisy_chunks(2, 2000)]
    store.backend.materialize(meta("s"), seed[:2])
    store.append("s", seed[2:])
    path = zstd_path(tmp_path, "s")
    path.write_bytes(path.read_bytes()[:-10])
    recovered = store.backend.read("s").recovered_events
    assert 0 < recovered < 2000
    session = Session("s", seed=seed[: 2 + recovered], header=meta("s"), check_invariants=False)
    with store.open_writer(session) as writer:
        assert writer.stored_seq == 2
        session.append("step/end", {"turn": 1, "step": 1})
    events = store.backend.read("s").events
    assert events == list(session.events)
    assert [e.type for e in events[-2:]] == ["session/end-seed", "step/end"]


def test_zstd_append_after_a_torn_frame_rewrites_the_recovered_events(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path, compression="zstd")
    store.backend.materialize(meta("s"), [ts(0, 1), ss(1, 1, 1)])
    store.append("s", noisy_chunks(2, 2000))
    path = zstd_path(tmp_path, "s")
    path.write_bytes(path.read_bytes()[:-10])
    count = len(store.backend.read("s").events)
    store.append("s", [se(count, 1, 1), te(count + 1, 1)])
    stored = store.backend.read("s")
    assert stored.torn is None
    assert [e.seq for e in stored.events] == list(range(count + 2))


def test_one_root_holds_one_encoding(tmp_path: Path) -> None:
    JsonlStore(tmp_path).backend.materialize(meta("raw"), [ts(0, 1)])
    JsonlStore(tmp_path, compression="zstd").backend.materialize(meta("packed"), [ts(0, 1)])
    with pytest.raises(StoreError, match='is a raw log, but this store writes compression="zstd"'):
        JsonlStore(tmp_path, compression="zstd").load("raw")
    with pytest.raises(StoreError, match='is a zstd log, but this store writes compression="none"'):
        JsonlStore(tmp_path).list()
    with pytest.raises(StoreError, match="one root holds one encoding"):
        JsonlStore(tmp_path).open_writer(Session("packed", header=meta("packed")))


def test_unknown_compression_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match='store compression must be "none" or "zstd", got \'gzip\''
    ):
        JsonlStore(tmp_path, compression="gzip")  # type: ignore[arg-type]


def test_zstd_list_reads_header_frames_and_reports_a_log_without_one_as_damaged(
    tmp_path: Path,
) -> None:
    # Logs are published whole (temp file, then link), so a cut header frame is damage.
    store = JsonlStore(tmp_path, compression="zstd")
    store.backend.materialize(meta("a"), one_turn_log())
    store.backend.materialize(meta("b"), [ts(0, 1)])
    path = zstd_path(tmp_path, "b")
    path.write_bytes(path.read_bytes()[:5])
    rows = {summary.id: summary for summary in store.list()}
    assert rows["a"].damaged is None
    assert rows["b"].damaged == "the log has no complete header record"
    entries = store.backend.list_headers()
    assert [entry.id for entry in entries if isinstance(entry, SessionHeader)] == ["a"]
    assert [entry.session_id for entry in entries if isinstance(entry, DamagedLog)] == ["b"]


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (
            lambda data: data.split(b"\n", 1)[1],
            'invalid session header: type must be "session" at line 1',
        ),
        (lambda data: b"", "the log file is empty (no header)"),
        (
            lambda data: data.replace(b'"type":"turn/start"', b'"type":"turn/start",', 1),
            "at line 2",
        ),
    ],
    ids=["header-deleted", "empty-file", "byte-in-committed-line"],
)
def test_list_reports_a_damaged_log_as_a_row_and_lists_the_others(
    tmp_path: Path, damage: Callable[[bytes], bytes], reason: str
) -> None:
    store = JsonlStore(tmp_path)
    store.backend.materialize(meta("good"), one_turn_log())
    store.backend.materialize(meta("bad"), one_turn_log())
    path = log_path(tmp_path, "bad")
    path.write_bytes(damage(path.read_bytes()))
    good, bad = store.list()
    assert (good.id, good.damaged, good.turn_count) == ("good", None, 1)
    assert bad.id == "bad"
    assert bad.damaged is not None and reason in bad.damaged
    assert bad.status == f"damaged: {bad.damaged}"
    assert str(path) not in bad.damaged


def test_repair_is_truncate_and_fsync_then_one_write_and_fsync(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    store.backend.materialize(meta("s"), [*one_turn_log(), ts(6, 2), ss(7, 2, 1)])
    path = log_path(tmp_path, "s")
    committed = path.read_bytes()
    with path.open("ab") as handle:
        handle.write(b'{"type":"assistant/chunk","seq":8,"ti')
    stored = store.backend.read("s")
    receipt = store.backend.repair("s", stored.torn, [se(8, 2, 1), te(9, 2, "interrupted")])
    assert receipt.fsync_count == 4, "keep the tail (file, dir), truncate, then one write"
    assert receipt.torn_copy is not None
    kept = Path(receipt.torn_copy)
    assert kept.parent == path.parent and kept.name.startswith("session.jsonl.torn-")
    assert kept.read_bytes() == b'{"type":"assistant/chunk","seq":8,"ti'
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert path.read_bytes()[: len(committed)] == committed
    assert len(path.read_bytes()) == len(committed) + receipt.bytes_written
    with pytest.raises(StoreError, match="changed since it was read"):
        store.backend.repair("s", path.stat().st_size + 1, [])


def test_append_refuses_a_file_changed_behind_the_backend(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    store.backend.materialize(meta("s"), [ts(0, 1)])
    path = log_path(tmp_path, "s")
    with path.open("ab") as handle:
        handle.write(b'{"type":"step/st')
    before = path.read_bytes()
    with pytest.raises(AppendConflictError, match="nothing was written"):
        store.backend.append("s", [ss(1, 1, 1)])
    assert path.read_bytes() == before, "no line glued onto the fragment"


def test_an_append_to_an_unknown_session_leaves_no_orphan_lock(tmp_path: Path) -> None:
    # D14: the lock of the unknown id created `_no-cwd/NOPE/session.lock`, left behind.
    store = JsonlStore(tmp_path / "root")
    store.backend.materialize(meta("s"), one_turn_log())
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "root").rglob("*"))
    with pytest.raises(SessionNotFoundError):
        store.append("NOPE", [ts(0, 1)])
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "root").rglob("*")) == before


def test_a_writer_closed_before_its_first_write_removes_its_lock_and_directories(
    tmp_path: Path,
) -> None:
    store = JsonlStore(tmp_path / "root")
    writer = store.open_writer(
        Session("new", header=SessionHeader(id="new", created_at=1, cwd="/w"))
    )
    assert list((tmp_path / "root").rglob("session.lock")), (
        "the lock is held while the writer is open"
    )
    writer.close()
    assert not (tmp_path / "root").exists() or list((tmp_path / "root").rglob("*")) == []


def test_the_lock_file_of_a_stored_session_stays_after_its_writer_closes(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "root")
    store.backend.materialize(meta("s"), one_turn_log())
    store.append("s", [ts(6, 2), te(7, 2)])
    names = sorted(p.name for p in log_path(tmp_path / "root", "s").parent.iterdir())
    assert names == ["session.jsonl", "session.lock"]


def test_memory_writer_counts_the_encoded_bytes_only_when_asked() -> None:
    # The memory backend defers its byte count (`WriteReceipt.measure`) to statistics();
    # the figure is still the JSONL encoding of every stored event, materialize included.
    store = MemoryStore()
    session = Session("s", header=meta("s"))
    with store.open_writer(session) as writer:
        session.append("turn/start", {"turn": 1})
        writer.flush()
        first = len(encode_events_lines(list(session.events[:1])))
        assert writer.statistics().bytes_written == first
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        writer.flush()
        writer.flush()
        stats = writer.statistics()
        assert writer.statistics() == stats, "asking twice counts nothing twice"
    assert stats.fsync_count == 0
    assert stats.bytes_written == len(encode_events_lines(list(session.events)))
