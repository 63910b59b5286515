"""A crash tears only what no fsync covered (D12): damage before proof of an fsync is corruption.

Two techniques. The rule itself (`fsync_evidence`) on the smallest logs: one damaged line
between a readable prefix and the later events that do or do not prove it was durable. Then
real logs: a loop writes a session through each store (8 parallel tool calls, then a second
step), the final turn is left open as a crash leaves it, and one byte is damaged: inside the
last batch the damage is a torn tail (cut, kept beside the log, reported); before a later
`tool/result` or a later step's response it is `CorruptLogError` and the file is unchanged.
"""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import anyio
import pytest

from conformance._builders import CH, SE, SS, TC, TE, TR, TS, A, Spec, U, build, call, txt
from duraloop.errors import CorruptLogError
from duraloop.llm import ScriptedModel
from duraloop.log import Event, Session, check_pairing, encode_event
from duraloop.loop import LoopConfig, SessionSetup, start_session
from duraloop.store import JsonlStore, SessionStore, SqliteStore
from duraloop.store._codec._records import encode_header
from duraloop.store._jsonl._scan import scan_log
from duraloop.store._jsonl._zstd import scan_frames
from duraloop.store._tail import fsync_evidence
from loop._support import call as tool_call
from loop._support import recorder_tool, tools_step

from ._builders import meta

HEADER = encode_header(meta("s"))
DAMAGE = b'{"type":"\x00'


def _prefix_damage_later(prefix: list[Spec], later: list[Spec]) -> tuple[list[Event], list[Event]]:
    events = build(*prefix, RAW_PLACEHOLDER, *later)
    return events[: len(prefix)], events[len(prefix) + 1 :]


RAW_PLACEHOLDER = TS(99)  # stands for the damaged line; its seq is skipped


STEP = [TS(1), U("go"), SS(1, 1), A(1, 1, txt("a"), call("c1"), call("c2"))]


@pytest.mark.parametrize(
    ("prefix", "later", "proof"),
    [
        # the damaged line is c1's tool/call: c1's result ran its body after that was fsynced
        (STEP, [TC(1, 1, "c2"), TR(1, 1, "c1"), TR(1, 1, "c2")], "tool/result for call c1"),
        # the damaged line follows both tool/calls: results prove nothing about it
        ([*STEP, TC(1, 1, "c1"), TC(1, 1, "c2")], [TR(1, 1, "c1"), TR(1, 1, "c2")], None),
        # recovery results are written without any fsync
        (
            STEP,
            [
                TR(1, 1, "c1", is_error=True, error={"code": "TOOL_OUTCOME_UNKNOWN"}),
                TR(1, 1, "c2", is_error=True, error={"code": "TOOL_NOT_STARTED"}),
            ],
            None,
        ),
        # a later step's response was requested after a flush covering its step/start
        (STEP[:3], [A(1, 1, txt("a")), SE(1, 1), SS(1, 2), CH(1, 2)], "assistant/chunk at seq"),
        # the damaged line is the step/start of the response that follows
        ([TS(1), U("go")], [A(1, 1, txt("a"))], "its step/start (turn 1, step 1)"),
        # the damaged line may be a chunk of the same response: a crash can leave that
        (STEP[:3], [CH(1, 1), CH(1, 1), A(1, 1, txt("a"))], None),
    ],
    ids=[
        "call-before-result",
        "results-after-calls",
        "recovery-results",
        "later-step",
        "own-step-start",
        "same-response",
    ],
)
def test_fsync_evidence_names_the_later_event_that_proves_the_damage_was_durable(
    prefix: list[Spec], later: list[Spec], proof: str | None
) -> None:
    before, after = _prefix_damage_later(prefix, later)
    evidence = fsync_evidence(before, after)
    if proof is None:
        assert evidence is None
    else:
        assert evidence is not None and proof in evidence


def _raw(events: list[Event], damaged_at: int) -> bytes:
    lines = [encode_event(event) for event in events]
    lines[damaged_at] = DAMAGE
    return HEADER + b"\n".join(lines) + b"\n"


def test_a_damaged_tool_call_before_its_result_is_corruption_not_a_torn_tail() -> None:
    # D12, smallest: one NUL in c1's tool/call line; c1's result (its body ran, so its
    # tool/call was fsynced first) and everything after it were cut as a torn tail.
    events = build(*STEP, TC(1, 1, "c1"), TC(1, 1, "c2"), TR(1, 1, "c1"), TR(1, 1, "c2"))
    with pytest.raises(
        CorruptLogError, match="tool/result for call c1 .* not a torn tail"
    ) as caught:
        scan_log(_raw(events, 4), path="p")
    assert caught.value.line == 6


def test_a_damaged_line_in_the_last_batch_is_a_torn_tail_that_says_what_it_held() -> None:
    events = build(*STEP, TC(1, 1, "c1"), TC(1, 1, "c2"), TR(1, 1, "c1"), TR(1, 1, "c2"))
    scanned = scan_log(_raw(events, 6), path="p")
    assert [e.seq for e in scanned.events] == list(range(6))
    assert scanned.cut is not None
    assert scanned.cut.event_counts == {"tool/result": 1} and scanned.cut.unreadable_count == 1
    assert "unparsable committed event" in scanned.cut.reason


# --- real logs written by the loop, damaged after a crash -----------------------------------------

CALLS = 8


def _write_open_turn(store: SessionStore, cwd: Path) -> None:
    """A loop runs step 1 (8 parallel calls) and step 2's response; the turn is left open."""
    ran: list[str] = []
    script = [
        tools_step(*(tool_call(f"c{n}") for n in range(CALLS)), text="eight"),
        {"text": "done"},
    ]
    loop = start_session(
        SessionSetup(
            store=store,
            model=ScriptedModel(script),
            tools=[recorder_tool("p", ran)],
            cwd=cwd,
            # One frame per batch, as written: no snapshot, so no frame merge at close.
            config=LoopConfig(snapshot_every=None),
        ),
        session_id="s",
    )

    async def turn() -> None:
        await loop.run_turn("go")

    anyio.run(turn)
    loop.close()
    assert len(ran) == 2 * CALLS


def _open_turn_lines(path: Path) -> list[bytes]:
    """The raw log's lines, without the final step/end and turn/end (a crash before them)."""
    lines = path.read_bytes().split(b"\n")[:-1]
    assert b'"turn/end"' in lines[-1] and b'"step/end"' in lines[-2]
    return lines[:-2]


def _index(lines: list[bytes], marker: bytes, *, last: bool = False) -> int:
    found = [i for i, line in enumerate(lines) if marker in line]
    return found[-1] if last else found[0]


@pytest.fixture
def raw_log(tmp_path: Path) -> tuple[JsonlStore, Path, list[bytes]]:
    store = JsonlStore(tmp_path / "store")
    _write_open_turn(store, tmp_path)
    path = Path(str(store.locate("s")))
    lines = _open_turn_lines(path)
    return JsonlStore(tmp_path / "store"), path, lines


def _nul_into(line: bytes) -> bytes:
    return line[:20] + b"\x00" + line[21:]


def test_one_nul_in_a_tool_call_of_an_open_turn_is_corruption_and_nothing_is_written(
    raw_log: tuple[JsonlStore, Path, list[bytes]],
) -> None:
    # D12, as found: the damaged line and the intact lines after it (tool/calls of calls that
    # ran, their results, the next step) were dropped as "a torn tail of 13455 bytes".
    store, path, lines = raw_log
    lines[_index(lines, b'"tool/call"')] = _nul_into(lines[_index(lines, b'"tool/call"')])
    damaged = b"\n".join(lines) + b"\n"
    path.write_bytes(damaged)
    with pytest.raises(CorruptLogError, match="not a torn tail"):
        store.load("s")
    with pytest.raises(CorruptLogError):
        store.inspect("s")
    assert path.read_bytes() == damaged, "a corrupt log is never repaired"
    assert not list(path.parent.glob("*.torn-*"))


def test_damage_in_the_last_batch_of_an_open_turn_is_cut_kept_and_reported(
    raw_log: tuple[JsonlStore, Path, list[bytes]],
) -> None:
    # The last batch is step 2's response (written after the request's flush): a crash may
    # leave a NUL page there with intact bytes after it.
    store, path, lines = raw_log
    first = _index(lines, b'"assistant/message"', last=True) - 1  # step 2's chunk row
    assert b"chunk" in lines[first]
    lines[first] = _nul_into(lines[first])
    cut_bytes = b"\n".join(lines[first:]) + b"\n"
    path.write_bytes(b"\n".join(lines) + b"\n")
    loaded = store.load("s")
    report = loaded.repair
    assert report.truncated_bytes == len(cut_bytes)
    assert report.cut is not None and report.cut.event_counts == {"assistant/message": 1}
    assert report.cut.unreadable_count == 1 and report.cut.dropped_call_ids == ()
    assert report.torn_copy is not None and Path(report.torn_copy).read_bytes() == cut_bytes
    assert stat.S_IMODE(Path(report.torn_copy).stat().st_mode) == 0o600
    assert "it held 1 assistant/message, 1 unreadable; kept in" in report.cut_text
    check_pairing(Session("s", seed=loaded.events).derive_messages())


def test_a_torn_tail_with_tool_calls_reports_their_call_ids(
    raw_log: tuple[JsonlStore, Path, list[bytes]],
) -> None:
    # A crash during the flush before the bodies: step 1's response and its 8 tool/calls are
    # one unfsynced batch; a NUL page in its first line leaves the tool/calls intact after it.
    store, path, lines = raw_log
    calls = [i for i, line in enumerate(lines) if b'"tool/call"' in line]
    first = _index(lines, b"chunk")
    lines = lines[: calls[-1] + 1]
    lines[first] = _nul_into(lines[first])
    path.write_bytes(b"\n".join(lines) + b"\n")
    report = store.inspect("s").repair
    assert report.cut is not None
    assert report.cut.dropped_call_ids == tuple(f"c{n}" for n in range(CALLS))
    assert report.cut.event_counts["tool/call"] == CALLS
    assert report.cut.event_counts["assistant/message"] == 1
    assert report.torn_copy is None, "inspect writes nothing"
    assert "dropped tool/call ids: c0, c1," in report.cut.describe()


def test_a_zstd_frame_cut_short_before_a_complete_later_frame_is_corruption(tmp_path: Path) -> None:
    # D12: a damaged block size made a middle frame "run past the end of the file", so every
    # later frame was cut as part of a torn tail.
    store = JsonlStore(tmp_path / "store", compression="zstd")
    _write_open_turn(store, tmp_path)
    path = Path(str(store.locate("s")))
    data = path.read_bytes()
    start = scan_frames(data, path=None).frames[2][0]
    descriptor = data[start + 4]
    size_bytes = (1 if descriptor & 0x20 else 0, 2, 4, 8)[descriptor >> 6]
    block = start + 5 + (0 if descriptor & 0x20 else 1) + size_bytes
    damaged = data[:block] + bytes([data[block] | 0xF8, 0xFF, 0xFF]) + data[block + 3 :]
    path.write_bytes(damaged)
    with pytest.raises(CorruptLogError, match="complete frame follows"):
        JsonlStore(tmp_path / "store", compression="zstd").load("s")
    assert path.read_bytes() == damaged


def test_sqlite_damage_before_a_dispatched_result_is_corruption(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SqliteStore(db) as store:
        _write_open_turn(store, tmp_path)
    with sqlite3.connect(db, isolation_level=None) as connection:
        last_two = connection.execute("SELECT max(seq) FROM events").fetchone()[0]
        connection.execute("DELETE FROM events WHERE seq >= ?", (last_two - 1,))
        first_call = connection.execute(
            "SELECT min(seq) FROM events WHERE type = 'tool/call'"
        ).fetchone()[0]
        connection.execute("UPDATE events SET data = '{\"turn\": 1,' WHERE seq = ?", (first_call,))
    with SqliteStore(db) as store, pytest.raises(CorruptLogError, match="tool/result for call c0"):
        store.load("s")


def test_sqlite_torn_rows_are_kept_beside_the_database_when_cut(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SqliteStore(db) as store:
        store.backend.materialize(meta("s"), build(TS(1), U("go"), SS(1, 1)))
    with sqlite3.connect(db, isolation_level=None) as connection:
        connection.execute(
            "INSERT INTO events (session_id, seq, type, time, data) VALUES ('s', 3, 'tool/call', "
            "3, '{')"
        )
    with SqliteStore(db) as store:
        report = store.load("s").repair
    assert (
        report.truncated_bytes == 1 and report.cut is not None and report.cut.unreadable_count == 1
    )
    assert report.torn_copy is not None
    kept = Path(report.torn_copy)
    assert kept.name.startswith("s.db.torn-") and b'"seq":3' in kept.read_bytes()
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600


def test_a_turn_end_after_the_last_batch_still_closes_with_the_old_rule() -> None:
    # dsh's rule (docs/store.md#reading-and-torn-tails) is kept: a later turn/end is proof on its
    # own.
    events = build(TS(1), SS(1, 1), SE(1, 1), TE(1))
    with pytest.raises(CorruptLogError, match="unparsable committed event"):
        scan_log(_raw(events, 2), path="p")
