"""Fuzz the JSONL reader (session-spec 6.6, Law 9): damaged bytes load a valid prefix or raise.

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
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from conformance._builders import CH, SE, SS, TC, TE, TR, TS, A, Spec, U, build, call, txt
from duraloop.errors import CorruptLogError, SessionFormatUnsupportedError
from duraloop.log import Event, Session, check_pairing, encode_event
from duraloop.store import JsonlStore
from duraloop.store._jsonl import Compression
from duraloop.store._jsonl_scan import scan_log
from duraloop.store._records import decode_record, encode_header
from duraloop.store._zstd import scan_frames

from ._builders import meta, te, ts

SID = "fuzz"
EXAMPLES = 150


@st.composite
def turn_specs(draw: st.DrawFn, turn: int) -> list[Spec]:
    specs = [TS(turn), U(f"prompt-{turn}")]
    for step in range(1, draw(st.integers(0, 2)) + 1):
        specs.append(SS(turn, step))
        specs += [CH(turn, step, text) for text in draw(st.lists(st.sampled_from("abé\n"), max_size=4))]
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
    kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "duplicate", "remove", "swap"]))
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
        extra = draw(st.binary(min_size=1, max_size=8) | st.sampled_from([b"\n", b"{", b'"', b"\xff", b"\x00"]))
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
    swapped = data[:start] + data[other_start:other_end] + data[end:other_start] + data[start:end] + data[other_end:]
    return Mutation(swapped, start)


def write_log(root: Path, events: list[Event], sizes: list[int], compression: Compression) -> tuple[Path, list[int]]:
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
    """For a raw log, the offset just past the line holding each event (packed rows hold several)."""
    ends: list[int] = []
    offset = data.find(b"\n") + 1
    for line in data[offset:].split(b"\n")[:-1]:
        offset += len(line) + 1
        ends += [offset] * len(decode_record(line))
    assert len(ends) == count
    return ends


def surviving_turn_ends(original: bytes, mutated: bytes, events: list[Event], ends: list[int]) -> list[int]:
    """Seqs of `turn/end` events whose exact raw line is still a whole line of the mutated file."""
    seqs = []
    for event in events:
        if event.type == "turn/end":
            start = original.rfind(b"\n", 0, ends[event.seq] - 1) + 1
            if b"\n" + original[start : ends[event.seq]] in mutated:
                seqs.append(event.seq)
    return seqs


def check_load(events: list[Event], sizes: list[int], compression: Compression, draw: st.DataObject) -> None:
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
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
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
