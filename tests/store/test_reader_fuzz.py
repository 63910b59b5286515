"""Fuzz the readers (docs/store.md#reading-and-torn-tails, #sqlite, Law 9): damaged input loads a
valid prefix or raises typed.

Hypothesis builds valid logs (whole turns of chunks, assistant messages, tool calls and
results; the last turn possibly cut short as by a crash), writes them through the JSONL store
in several batches (raw lines and zstd frames), and mutates the file once: truncation, a bit
flip, inserted or deleted bytes, or a duplicated, removed or swapped line (zstd: frame). A load
must then either raise the store's corruption error (`CorruptLogError`, or
`SessionFormatUnsupportedError` for a damaged header version or type), or return the original
events up to some k, plus closers, forming a valid session: every event stored entirely before
the damage is kept, and a `turn/end` whose line survived intact is never dropped. Raw JSONL
has no checksums, so a mutated line that still decodes is indistinguishable from a real one;
the test then only requires that the differing events come from the damaged bytes.

The second fuzz (D13, issue 9) runs every reader path (`list`, `read`, `read_from`,
`inspect`, `load`, and `check_log` on what was read) over raw JSONL, zstd and SQLite logs
damaged by bit flips, truncations, byte insertions and deletions, values nested around and far
beyond `MAX_JSON_DEPTH`, and (SQLite) columns set to another type or to damaged JSON: the only
exceptions allowed are duraloop's typed errors. `OUTCOMES` counts what each input did;
`benchmarks/reader_fuzz.py` runs the long campaign (`DURALOOP_FUZZ_EXAMPLES`) and prints it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from conformance._builders import CH, SE, SS, TC, TE, TR, TS, A, Spec, U, build, call, txt
from duraloop.errors import (
    CorruptLogError,
    DuraloopError,
    SessionFormatUnsupportedError,
)
from duraloop.log import Event, Session, check_log, check_pairing, encode_event
from duraloop.log._json import MAX_JSON_DEPTH
from duraloop.store import JsonlStore, SessionStore, SqliteStore
from duraloop.store._codec._records import RecordError, decode_record, encode_header
from duraloop.store._jsonl._backend import Compression
from duraloop.store._jsonl._scan import scan_log, scan_zstd_log
from duraloop.store._jsonl._zstd import FrameCodec, decompress_complete, scan_frames
from duraloop.store._sqlite._rows import decode_row
from duraloop.store._sqlite._scan import scan_rows

from ._builders import ev, meta, te, ts

SID = "fuzz"
EXAMPLES = int(os.environ.get("DURALOOP_FUZZ_EXAMPLES", "40"))
"""Examples per fuzz test and encoding; CI keeps the default, a long run sets the variable."""
OUTCOMES: Counter[str] = Counter()
"""What each fuzzed reader call did: `ok`, or the typed error class it raised."""
INPUTS: Counter[str] = Counter()
"""How many damaged inputs each encoding was given."""


@st.composite
def turn_specs(draw: st.DrawFn, turn: int) -> list[Spec]:
    specs = [TS(turn), U(f"prompt-{turn}")]
    for step in range(1, draw(st.integers(0, 2)) + 1):
        specs.append(SS(turn, step))
        specs += [
            CH(turn, step, text) for text in draw(st.lists(st.sampled_from("abé\n"), max_size=4))
        ]
        call_ids = [f"call-{turn}-{step}-{n}" for n in range(draw(st.integers(0, 2)))]
        specs.append(A(turn, step, txt("answer"), *(call(c) for c in call_ids)))
        for call_id in call_ids:
            specs += [TC(turn, step, call_id), TR(turn, step, call_id, "out")]
        specs.append(SE(turn, step))
    specs.append(TE(turn, draw(st.sampled_from(["completed", "max-tokens", "blocked"]))))
    return specs


@st.composite
def logs(draw: st.DrawFn) -> tuple[list[Event], list[int]]:
    """A valid log and the batch sizes it is written in."""
    specs: list[Spec] = []
    for turn in range(1, draw(st.integers(1, 3)) + 1):
        specs += draw(turn_specs(turn))
    if draw(st.booleans()):  # the last turn cut short, as by a crash
        last_start = max(i for i, spec in enumerate(specs) if spec.type == "turn/start")
        specs = specs[: draw(st.integers(last_start + 1, len(specs)))]
    events = build(*specs)
    cuts = sorted(set(draw(st.lists(st.integers(1, len(events)), max_size=4))) | {len(events)})
    sizes = [b - a for a, b in zip([0, *cuts], cuts, strict=False)]
    return events, sizes


@dataclass(frozen=True)
class Mutation:
    """One damage to the file: the new bytes and the first damaged byte offset."""

    data: bytes
    first_damaged: int


def units(data: bytes, compression: Compression) -> list[tuple[int, int]]:
    """The spans of whole records: lines (raw) or frames (zstd), header included."""
    if compression == "zstd":
        return scan_frames(data, path=None).frames
    spans, start = [], 0
    while (end := data.find(b"\n", start)) >= 0:
        spans.append((start, end + 1))
        start = end + 1
    return spans


@st.composite
def mutations(draw: st.DrawFn, data: bytes, compression: Compression) -> Mutation:
    kind = draw(
        st.sampled_from(["truncate", "flip", "insert", "delete", "duplicate", "remove", "swap"])
    )
    size = len(data)
    if kind == "truncate":
        at = draw(st.integers(0, size))
        return Mutation(data[:at], at)
    if kind == "flip":
        at = draw(st.integers(0, size - 1))
        bit = 1 << draw(st.integers(0, 7))
        return Mutation(data[:at] + bytes([data[at] ^ bit]) + data[at + 1 :], at)
    if kind == "insert":
        at = draw(st.integers(0, size))
        extra = draw(
            st.binary(min_size=1, max_size=8)
            | st.sampled_from([b"\n", b"{", b'"', b"\xff", b"\x00"])
        )
        return Mutation(data[:at] + extra + data[at:], max(at - 1, 0))
    if kind == "delete":
        at = draw(st.integers(0, size - 1))
        count = draw(st.integers(1, 8))
        return Mutation(data[:at] + data[at + count :], at)
    spans = units(data, compression)
    first = draw(st.integers(0, len(spans) - 1))
    start, end = spans[first]
    if kind == "duplicate":
        return Mutation(data[:end] + data[start:end] + data[end:], end)
    if kind == "remove":
        return Mutation(data[:start] + data[end:], start)
    second = draw(st.integers(first, len(spans) - 1))
    other_start, other_end = spans[second]
    if second == first:
        return Mutation(data, size)
    swapped = (
        data[:start]
        + data[other_start:other_end]
        + data[end:other_start]
        + data[start:end]
        + data[other_end:]
    )
    return Mutation(swapped, start)


def write_log(
    root: Path, events: list[Event], sizes: list[int], compression: Compression
) -> tuple[Path, list[int]]:
    """Store `events` in batches; return the file and the byte offset where each event ends."""
    store = JsonlStore(root, compression=compression)
    ends: list[int] = []
    start = 0
    for index, count in enumerate(sizes):
        batch = events[start : start + count]
        if index == 0:
            store.backend.materialize(meta(SID), batch)
        else:
            store.append(SID, batch)
        ends += [log_file(store).stat().st_size] * len(batch)
        start += count
    if compression == "none":
        ends = raw_event_ends(log_file(store).read_bytes(), len(events))
    return log_file(store), ends


def log_file(store: JsonlStore) -> Path:
    location = store.locate(SID)
    assert location is not None
    return Path(location)


def raw_event_ends(data: bytes, count: int) -> list[int]:
    """For a raw log, the offset just past the line holding each event.

    Packed rows hold several.
    """
    ends: list[int] = []
    offset = data.find(b"\n") + 1
    for line in data[offset:].split(b"\n")[:-1]:
        offset += len(line) + 1
        ends += [offset] * len(decode_record(line))
    assert len(ends) == count
    return ends


def surviving_turn_ends(
    original: bytes, mutated: bytes, events: list[Event], ends: list[int]
) -> list[int]:
    """Seqs of `turn/end` events whose exact raw line is still a whole line of the mutated file."""
    seqs = []
    for event in events:
        if event.type == "turn/end":
            start = original.rfind(b"\n", 0, ends[event.seq] - 1) + 1
            if b"\n" + original[start : ends[event.seq]] in mutated:
                seqs.append(event.seq)
    return seqs


def check_load(
    events: list[Event], sizes: list[int], compression: Compression, draw: st.DataObject
) -> None:
    INPUTS[f"prefix-{compression}"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        path, ends = write_log(Path(tmp), events, sizes, compression)
        original = path.read_bytes()
        mutation = draw.draw(mutations(original, compression))
        path.write_bytes(mutation.data)
        store = JsonlStore(Path(tmp), compression=compression)
        try:
            loaded = store.load(SID)
        except (CorruptLogError, SessionFormatUnsupportedError):
            return
        body = loaded.events[: len(loaded.events) - len(loaded.repair.closers)]
        assert [e.seq for e in body] == list(range(len(body)))
        kept_before_damage = sum(1 for end in ends if end <= mutation.first_damaged)
        assert len(body) >= kept_before_damage, "an event stored before the damage was dropped"
        changed = [e.seq for e in body if e.seq >= len(events) or e != events[e.seq]]
        if changed:
            # Raw lines carry no checksum: a damaged line that still decodes is read as is.
            assert compression == "none", f"zstd returned altered events {changed}"
            assert min(changed) >= kept_before_damage
            return
        if compression == "none":
            for seq in surviving_turn_ends(original, mutation.data, events, ends):
                assert seq < len(body), f"committed turn/end at seq {seq} was dropped"
        session = Session(SID, seed=loaded.events)
        check_pairing(session.derive_messages())
        assert store.load(SID).events == loaded.events, "a second load reads the repaired log"


FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("compression", ["none", "zstd"])
@FUZZ_SETTINGS
@given(log=logs(), data=st.data())
def test_damaged_log_loads_a_valid_prefix_or_raises_corruption(
    compression: Compression, log: tuple[list[Event], list[int]], data: st.DataObject
) -> None:
    events, sizes = log
    check_load(events, sizes, compression, data)


# --- the smallest failing inputs the fuzzer found, pinned ---------------------------------------

HEADER = encode_header(meta(SID))


@pytest.mark.parametrize("line", [b'"a"b', b"1 2", b"[]x"])
def test_a_line_with_trailing_garbage_after_a_json_value_is_unparsable(line: bytes) -> None:
    # The typed decode stopped at `"a"` (not an object) and the generic decode then raised a
    # bare msgspec.DecodeError out of the reader.
    tolerated = scan_log(HEADER + encode_event(ts(0, 1)) + b"\n" + line + b"\n", path=None)
    assert [e.seq for e in tolerated.events] == [0]
    with pytest.raises(CorruptLogError, match="unparsable committed event"):
        scan_log(HEADER + line + b"\n" + encode_event(te(0, 1)) + b"\n", path=None)


# --- every reader path, every encoding: only typed errors (D13) ---------------------------------

DEPTHS = [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 999, 1000, 5000, 100_000]
Encoding = str  # "none", "zstd" or "sqlite"


def deepen(line: bytes, depth: int, *, inside_data: bool) -> bytes:
    """Nest a value `depth` deep into a JSON line: a new envelope key, or a key of `data`."""
    deep = b"[" * depth + b"]" * depth
    if inside_data and b'"data":{' in line:
        return line.replace(b'"data":{', b'"data":{"deep":' + deep + b",", 1)
    return b'{"deep":' + deep + b"," + line[1:]


@st.composite
def line_damage(draw: st.DrawFn) -> Callable[[bytes], bytes]:
    depth = draw(st.sampled_from(DEPTHS))
    inside = draw(st.booleans())
    return lambda line: deepen(line, depth, inside_data=inside)


def deepen_zstd(
    data: bytes, frame_index: int, line_index: int, damage: Callable[[bytes], bytes]
) -> bytes:
    """Re-frame a zstd log with one line of one batch frame damaged (frame 0 is the header)."""
    frames = scan_frames(data, path=None).frames
    start, end = frames[min(frame_index, len(frames) - 1)]
    lines = decompress_complete(data[start:end], path=None, offset=start).split(b"\n")
    lines[min(line_index, len(lines) - 2)] = damage(lines[min(line_index, len(lines) - 2)])
    return data[:start] + FrameCodec().compress(b"\n".join(lines)) + data[end:]


_SQL_COLUMNS = ["seq", "type", "time", "data", "source_event_seqs", "surface_op", "ignorable"]
_SQL_VALUES: list[Any] = [None, 7, -1, 1.5, b"\x00\xff", "{", "x", '{"turn":"x"}', 2**62]


@st.composite
def sql_damage(draw: st.DrawFn) -> Callable[[sqlite3.Connection], None]:
    """One row-level damage: a column set to another value or type, or deep or broken JSON."""
    kind = draw(st.sampled_from(["value", "deep", "flip", "session"]))
    pick = draw(st.integers(0, 1000))
    if kind == "session":
        column = draw(
            st.sampled_from(
                ["version", "created_at", "cwd", "id", "delegation_depth", "seed_length"]
            )
        )
        value = draw(st.sampled_from(_SQL_VALUES))

        def damage_session(connection: sqlite3.Connection) -> None:
            connection.execute(f"UPDATE sessions SET {column} = ?", (value,))

        return damage_session
    column = draw(st.sampled_from(_SQL_COLUMNS))
    value = draw(st.sampled_from(_SQL_VALUES))
    depth = draw(st.sampled_from(DEPTHS))
    at = draw(st.integers(0, 200))

    def apply(connection: sqlite3.Connection) -> None:
        seqs = [row[0] for row in connection.execute("SELECT seq FROM events ORDER BY seq")]
        if not seqs:
            return
        seq = seqs[pick % len(seqs)]
        if kind == "value":
            connection.execute(
                f"UPDATE OR IGNORE events SET {column} = ? WHERE seq = ?", (value, seq)
            )
        elif kind == "deep":
            deep = '{"deep":' + "[" * depth + "]" * depth + "}"
            connection.execute("UPDATE events SET data = ? WHERE seq = ?", (deep, seq))
        else:
            text = connection.execute(
                "SELECT CAST(data AS BLOB) FROM events WHERE seq = ?", (seq,)
            ).fetchone()[0]
            if isinstance(text, bytes) and text:
                flipped = bytearray(text)
                flipped[at % len(flipped)] ^= 1 << (at % 8)
                connection.execute(
                    "UPDATE events SET data = ? WHERE seq = ?", (bytes(flipped), seq)
                )

    return apply


def read_everything(open_store: Callable[[], SessionStore]) -> None:
    """Run every reader path; count each outcome; let any untyped exception escape."""
    for name, reader in (
        ("list", lambda store: store.list()),
        ("read", lambda store: store.read(SID)),
        ("read_from", lambda store: store.read_from(SID, 1)),
        ("check", lambda store: check_log(SID, store.read(SID)[1])),
        ("inspect", lambda store: store.inspect(SID)),
        ("load", lambda store: store.load(SID)),
    ):
        try:
            store = open_store()
            try:
                reader(store)
            finally:
                close = getattr(store, "close", None)
                if close is not None:
                    close()
        except DuraloopError as exc:
            OUTCOMES[f"{name}: {type(exc).__name__}"] += 1
        else:
            OUTCOMES[f"{name}: ok"] += 1


def fuzz_jsonl(
    events: list[Event], sizes: list[int], compression: Compression, data: st.DataObject
) -> None:
    INPUTS[f"readers-{compression}"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        path, _ends = write_log(Path(tmp), events, sizes, compression)
        original = path.read_bytes()
        if data.draw(st.booleans()):
            damage = data.draw(line_damage())
            if compression == "zstd":
                frames = len(scan_frames(original, path=None).frames)
                frame = data.draw(st.integers(0, frames - 1))
                mutated = deepen_zstd(original, frame, data.draw(st.integers(0, 50)), damage)
            else:
                lines = original.split(b"\n")
                at = data.draw(st.integers(0, len(lines) - 2))
                lines[at] = damage(lines[at])
                mutated = b"\n".join(lines)
        else:
            mutated = data.draw(mutations(original, compression)).data
        path.write_bytes(mutated)
        read_everything(lambda: JsonlStore(Path(tmp), compression=compression))


def fuzz_sqlite(events: list[Event], sizes: list[int], data: st.DataObject) -> None:
    INPUTS["readers-sqlite"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "s.db"
        with SqliteStore(db) as store:
            start = 0
            for index, count in enumerate(sizes):
                batch = events[start : start + count]
                if index == 0:
                    store.backend.materialize(meta(SID), batch)
                else:
                    store.append(SID, batch)
                start += count
        if data.draw(st.booleans()):
            with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as connection:
                try:
                    data.draw(sql_damage())(connection)
                except sqlite3.IntegrityError:
                    OUTCOMES["damage refused by a STRICT table"] += 1  # the log stays intact
        else:
            with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as connection:
                connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            original = db.read_bytes()
            kind = data.draw(st.sampled_from(["flip", "truncate", "insert", "delete"]))
            at = data.draw(st.integers(0, len(original) - 1))
            if kind == "flip":
                mutated = (
                    original[:at]
                    + bytes([original[at] ^ (1 << data.draw(st.integers(0, 7)))])
                    + original[at + 1 :]
                )
            elif kind == "truncate":
                mutated = original[:at]
            elif kind == "insert":
                mutated = (
                    original[:at] + data.draw(st.binary(min_size=1, max_size=8)) + original[at:]
                )
            else:
                mutated = original[:at] + original[at + data.draw(st.integers(1, 64)) :]
            db.write_bytes(mutated)
            for suffix in ("-wal", "-shm"):
                db.with_name(db.name + suffix).unlink(missing_ok=True)
        read_everything(lambda: SqliteStore(db))


@pytest.mark.parametrize("encoding", ["none", "zstd", "sqlite"])
@FUZZ_SETTINGS
@given(log=logs(), data=st.data())
def test_every_reader_path_raises_only_typed_errors_on_damaged_input(
    encoding: Encoding, log: tuple[list[Event], list[int]], data: st.DataObject
) -> None:
    events, sizes = log
    if encoding == "sqlite":
        fuzz_sqlite(events, sizes, data)
    else:
        fuzz_jsonl(events, sizes, "zstd" if encoding == "zstd" else "none", data)


# --- the smallest failing inputs of the D13 fuzz, pinned ----------------------------------------


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 1000, 100_000])
def test_a_line_nested_deeper_than_the_limit_is_unparsable_not_a_recursion_error(
    depth: int,
) -> None:
    # RecursionError escaped from msgspec at ~1000 levels, in every encoding and command.
    deep = deepen(encode_event(ts(1, 1)), depth, inside_data=True)
    tolerated = scan_log(HEADER + encode_event(ts(0, 1)) + b"\n" + deep + b"\n", path=None)
    assert [e.seq for e in tolerated.events] == [0] and tolerated.cut is not None
    assert "nested deeper than" in tolerated.cut.reason
    with pytest.raises(CorruptLogError, match="nested deeper than"):
        scan_log(HEADER + deep + b"\n" + encode_event(te(0, 1)) + b"\n", path=None)
    codec = FrameCodec()
    framed = codec.compress(HEADER) + codec.compress(deep + b"\n")
    with pytest.raises(CorruptLogError, match="nested deeper than .* inside a complete zstd frame"):
        scan_zstd_log(framed, path=None)


def test_a_line_as_deep_as_duraloop_writes_reads_back() -> None:
    value: Any = []
    for _ in range(MAX_JSON_DEPTH - 2):  # data {"todos": ...} is one level, the list the rest
        value = [value]
    session = Session(SID)
    session.append("turn/start", {"turn": 1})
    session.append("todo/write", {"todos": value})
    lines = b"".join(encode_event(event) + b"\n" for event in session.events)
    assert scan_log(HEADER + lines, path=None).events == list(session.events)


def test_sqlite_data_nested_deeper_than_the_limit_is_an_undecodable_row(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SqliteStore(db) as store:
        store.backend.materialize(meta(SID), [ts(0, 1), te(1, 1)])
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as connection:
        connection.execute("UPDATE events SET data = ? WHERE seq = 0", ("[" * 5000 + "]" * 5000,))
    with SqliteStore(db) as store, pytest.raises(CorruptLogError, match="nested deeper than 256"):
        store.load(SID)


def test_check_log_of_an_open_turn_whose_turn_is_not_a_number_reports_it() -> None:
    # ValueError escaped check_log: int("x") for the open turn's number.
    events = [ev("turn/start", 0, 0, {"turn": "x"})]
    report = check_log(SID, events)
    assert report.open_turn is None and not report.valid


def test_a_sqlite_row_with_a_null_column_is_undecodable_not_a_type_error() -> None:
    # TypeError escaped the row decoder (`bytes(None)` for a NULL type) on a flipped file.
    row = (1, None, 1, b"text", b'{"turn":1}', b"null", None, None, None)
    with pytest.raises(RecordError, match="wrong SQLite type"):
        decode_row(row)
    scanned = scan_rows(
        SID,
        [(0, b"turn/start", 0, b"text", b'{"turn":1}', b"null", None, None, None), row],
        path=Path("db"),
    )
    assert [e.seq for e in scanned.events] == [0] and scanned.torn == 1 and scanned.cut is not None


def test_a_header_whose_id_was_flipped_is_listed_damaged_not_raised(tmp_path: Path) -> None:
    # `list()` raised SessionNotFoundError for the whole store: the header's id ("fuzy") no
    # longer maps to its directory ("fuzz"), and the summary then looked the id up.
    store = JsonlStore(tmp_path)
    store.backend.materialize(meta(SID), [ts(0, 1), te(1, 1)])
    store.backend.materialize(meta("other"), [ts(0, 1), te(1, 1)])
    path = log_file(store)
    path.write_bytes(path.read_bytes().replace(b'"id":"fuzz"', b'"id":"fuzy"', 1))
    listed = JsonlStore(tmp_path).list()
    assert sorted(entry.id for entry in listed) == ["fuzz", "other"]
    damaged = [entry for entry in listed if entry.id == SID]
    assert damaged[0].damaged is not None and "does not map to this file" in damaged[0].damaged
