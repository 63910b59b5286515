"""Real dsh logs (docs/store.md#projected-fixtures): every fixture loads, validates, derives and
round-trips.

The fixtures are projected snapshots recorded by the reference implementation, so they are
the best evidence that duraloop reads dsh logs: `read_log_file` restores seq/time by
position and substitutes placeholders, then a strict Session (invariants on) must accept
the log, its derived messages must pass the provider pairing check, and storage encoding
must round-trip losslessly (packed rows re-pack).
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from duraloop.errors import CorruptLogError
from duraloop.log import Session, check_pairing, interrupted_turn_closers
from duraloop.log import vocabulary as v
from duraloop.store import JsonlStore, read_log_file
from duraloop.store._codec._records import decode_record, encode_batch, encode_header
from duraloop.store._jsonl._scan import scan_log
from duraloop.store._loose_file import FIXTURE_CWD, FIXTURE_SESSION_ID

from ._builders import FIXTURES, meta, one_turn_log

FIXTURE_FILES: list[Path | None] = (
    [*sorted(FIXTURES.glob("*/session*.jsonl"))] if FIXTURES.is_dir() else []
)


def fixture_ids() -> list[str]:
    return [path.parent.name for path in FIXTURE_FILES if path is not None]


@pytest.fixture(params=FIXTURE_FILES or [None], ids=fixture_ids() or ["absent"])
def fixture_path(request: pytest.FixtureRequest) -> Path:
    if request.param is None:
        pytest.skip(f"dsh fixtures not found at {FIXTURES}")
    path: Path = request.param
    return path


def test_fixture_loads_into_a_strict_session_with_paired_messages(fixture_path: Path) -> None:
    header, events = read_log_file(fixture_path)
    assert [event.seq for event in events] == list(range(len(events)))
    assert header.cwd is None or header.cwd.startswith("/")
    session = Session(header.id, seed=events, header=header)
    check_pairing(session.derive_messages())
    assert session.events[-1].type == v.END_SEED


def test_fixture_reserializes_losslessly(fixture_path: Path) -> None:
    header, events = read_log_file(fixture_path)
    data = encode_batch(events, pack_chunks=True)
    again = [event for line in data.splitlines() for event in decode_record(line)]
    assert again == events
    original_rows = sum(
        1
        for line in fixture_path.read_bytes().splitlines()[1:]
        if msgspec.json.decode(line).get("type", "").endswith("-chunks")
    )
    repacked_rows = sum(
        1 for line in data.splitlines() if msgspec.json.decode(line)["type"].endswith("-chunks")
    )
    assert repacked_rows == original_rows
    stored = scan_log(encode_header(header) + data, path=None)
    assert (stored.header, stored.events) == (header, events)


def test_fixture_imports_into_a_jsonl_store_and_resumes(fixture_path: Path, tmp_path: Path) -> None:
    header, events = read_log_file(fixture_path)
    store = JsonlStore(tmp_path)
    store.backend.materialize(header, events)
    loaded = store.load(header.id)
    assert loaded.events[: len(events)] == events
    resumed = Session(header.id, seed=loaded.events, header=loaded.header)
    with store.open_writer(resumed) as writer:
        writer.flush()
    assert store.inspect(header.id).events == list(resumed.events)


def test_tool_outcome_unknown_fixture_matches_case_15() -> None:
    path = FIXTURES / "tool-outcome-unknown" / "session.expected.jsonl"
    if not path.is_file():
        pytest.skip(f"fixture not found at {path}")
    header, events = read_log_file(path)
    closer = events[5]
    assert closer.data["message"]["id"] == "interrupted-tool-result-unknown-outcome-call-5"
    assert closer.source_event_seqs == [4]
    assert [events[6].type, events[7].type, events[8].type] == ["step/end", "turn/end", v.END_SEED]


def test_repair_writes_the_closers_of_dsh_byte_for_byte() -> None:
    # The recovery result is built with `tool_result_message`; its key order is dsh's repair's.
    path = FIXTURES / "tool-outcome-unknown" / "session.expected.jsonl"
    if not path.is_file():
        pytest.skip(f"fixture not found at {path}")
    _, events = read_log_file(path)
    closers = interrupted_turn_closers(events[:5])
    lines = path.read_bytes().splitlines()[6:9]  # line 0 is the header; closers are seqs 5-7
    assert [closer.type for closer in closers] == [
        msgspec.json.decode(line)["type"] for line in lines
    ]
    for closer, line in zip(closers, lines, strict=True):
        dsh = msgspec.json.encode(json.loads(line)["data"])  # json keeps dsh's key order
        assert msgspec.json.encode(closer.data) == dsh


def test_projected_records_and_placeholders_are_restored(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text(
        '{"type":"session","version":0,"id":"{{sessionId}}","createdAt":0,"cwd":"{{cwd}}",'
        '"delegationDepth":0}\n'
        '{"type":"turn/start","data":{"turn":1}}\n'
        '{"type":"text-chunks","data":{"turn":1,"step":1,"index":0,"dt":[2,3],"texts":["a","b",'
        '"c"]}}\n'
    )
    header, events = read_log_file(path)
    assert (header.id, header.cwd) == (FIXTURE_SESSION_ID, FIXTURE_CWD)
    assert [(e.seq, e.time) for e in events] == [(0, 0), (1, 0), (2, 2), (3, 5)]


def test_read_log_file_reads_a_real_store_log_and_refuses_damage(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    store.backend.materialize(meta("s"), one_turn_log())
    path = next(tmp_path.rglob("session.jsonl"))
    assert read_log_file(path)[1] == one_turn_log()
    path.write_bytes(path.read_bytes().replace(b'"seq":2', b'"seq":7'))
    with pytest.raises(CorruptLogError, match="seq gap"):
        read_log_file(path)


def test_a_zstd_log_file_is_read_by_its_suffix(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path, compression="zstd")
    store.backend.materialize(meta("z"), one_turn_log())
    header, events = read_log_file(str(store.locate("z")))
    assert (header.id, events) == ("z", one_turn_log())
