"""Every dsh fixture, written by duraloop's normal writer path and read back event for event.

Each projected fixture (docs/store.md#projected-fixtures) is restored to raw events with
`read_log_file`, seeded into a `Session`, persisted by `SessionStore.open_writer(...).flush()` into
a `JsonlStore` with packed chunk rows, raw and zstd, and read back: every event equals the original
in type, seq, time, data, surfaceOp, sourceEventSeqs and ignorable. The only addition is the
`session/end-seed` a seeded Session appends (docs/log.md#seeds-and-end-seed).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import msgspec
import pytest
import zstandard

from duraloop.log import Event, Session
from duraloop.log import vocabulary as v
from duraloop.store import JsonlStore, read_log_file
from duraloop.store._jsonl._backend import Compression
from duraloop.store._jsonl._zstd import scan_frames

from ._builders import FIXTURES

FIXTURE_FILES = sorted(FIXTURES.glob("*/session*.jsonl")) if FIXTURES.is_dir() else []
_PACKED_TYPES = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})


_PARAMS: list[Path | None] = [*FIXTURE_FILES] or [None]


@pytest.fixture(params=_PARAMS, ids=[p.parent.name for p in FIXTURE_FILES] or ["absent"])
def fixture_path(request: pytest.FixtureRequest) -> Path:
    if request.param is None:
        pytest.skip(f"dsh fixtures not found at {FIXTURES}")
    path: Path = request.param
    return path


def _fields(event: Event) -> tuple[Any, ...]:
    return (
        event.type,
        event.seq,
        event.time,
        event.data,
        event.surface_op,
        event.source_event_seqs,
        event.ignorable,
    )


def _assert_same_events(read: list[Event], expected: list[Event]) -> None:
    assert len(read) == len(expected)
    for got, want in zip(read, expected, strict=True):
        assert _fields(got) == _fields(want), f"seq {want.seq} ({want.type})"


def _row_types(plaintext: bytes) -> list[str]:
    return [str(msgspec.json.decode(line)["type"]) for line in plaintext.splitlines()[1:]]


def _stored_plaintext(path: Path, compression: Compression) -> bytes:
    data = path.read_bytes()
    if compression == "none":
        return data
    frames = scan_frames(data, path=str(path)).frames
    # the header alone in frame 1, then the batch (docs/store.md#jsonl-records)
    assert len(frames) >= 2
    for start, _ in frames:
        assert zstandard.get_frame_parameters(data[start:]).has_checksum
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    return reader.read()


@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_fixture_written_by_the_session_writer_reads_back_event_for_event(
    fixture_path: Path, tmp_path: Path, compression: Compression
) -> None:
    header, events = read_log_file(fixture_path)
    store = JsonlStore(tmp_path / "sessions", compression=compression, pack_chunks=True)
    session = Session(header.id, seed=events, header=header)
    with store.open_writer(session) as writer:
        writer.flush()

    added = list(session.events[len(events) :])
    assert [event.type for event in added] in ([], [v.END_SEED])
    read_header, read_events = store.read(header.id)
    assert read_header == header
    _assert_same_events(read_events[: len(events)], events)
    _assert_same_events(read_events[len(events) :], added)

    path = Path(str(store.locate(header.id)))
    assert path.name == ("session.jsonl.zstd" if compression == "zstd" else "session.jsonl")
    file_header, file_events = read_log_file(path)
    assert file_header == header
    _assert_same_events(file_events, read_events)

    # Chunk runs are stored as packed rows, as many as the fixture (also written packed) has.
    stored_rows = _row_types(_stored_plaintext(path, compression))
    fixture_rows = _row_types(fixture_path.read_bytes())
    assert [t for t in stored_rows if t in _PACKED_TYPES] == [
        t for t in fixture_rows if t in _PACKED_TYPES
    ]
