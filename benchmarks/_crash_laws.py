"""The crash campaign's readers and laws, written without duraloop's own readers.

Everything here reads the stores' bytes directly: a JSONL log is split at newlines and each
line parsed with `json`; a zstd log is cut into frames with the `zstandard` package alone; a
SQLite store is queried with `sqlite3`. Packed chunk rows (`text-chunks`, `reasoning-chunks`,
`tool-call-chunks`) are expanded only far enough to know their seqs. The layouts follow
session-spec 6.3/6.4/6.8 as `src/duraloop/store/` writes them, but no duraloop module is
imported, so a loader bug cannot hide a law's violation.

Laws (each violation names one of them):

- `committed-lost`: every complete line (zstd: complete frame; SQLite: row) on disk after a
  kill is present byte for byte after the next process; only a torn final fragment may go.
- `seq-contiguous`: the logical events' seqs are 0, 1, 2, ... with no gap or repeat.
- `body-twice`: a ledger entry appears twice, or a call id has two `tool/call`s or results.
- `effect-without-call`: a ledger entry or an output file exists for a call with no
  `tool/call` on disk.
- `result-without-effect`: a successful result of a write, edit or bash call whose effect
  is not there.
- `answer-order`: a call's results are not exactly once, in the assistant's call order, all
  before the step's `step/end`; or `tool/call`s are not in call order.
- `recovery-code`: a call that had a `tool/call` but no result at a kill is not answered
  `TOOL_OUTCOME_UNKNOWN`, one that had no `tool/call` is not answered `TOOL_NOT_STARTED`, a
  recovery code appears with no kill to explain it, or contradicts the `tool/call`s on disk.
- `head-result-not-durable` (timing-based): a fast parallel call (`read_file`, `list_dir`:
  its body takes milliseconds) started by the killed process, at the head of model order,
  whose `tool/call` was on disk for `HEAD_GRACE_MS` before the kill while a later call of its
  group had started, has no result (issue 9 item 4).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zstandard

UNKNOWN = "TOOL_OUTCOME_UNKNOWN"
NOT_STARTED = "TOOL_NOT_STARTED"
RECOVERY_CODES = frozenset({UNKNOWN, NOT_STARTED})
PARALLEL_TOOLS = frozenset({"read_file", "list_dir", "grep"})
"""The built-in tools that declare themselves parallel-safe; every other one is exclusive."""
PACKED_TYPES = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})
FAST_TOOLS = frozenset({"read_file", "list_dir"})
"""Parallel-safe built-ins whose bodies finish within milliseconds on the campaign's inputs."""
HEAD_GRACE_MS = 250
"""How long a finished head call may go without a durable result before it counts as lost."""

LAWS = (
    "committed-lost",
    "seq-contiguous",
    "body-twice",
    "effect-without-call",
    "result-without-effect",
    "answer-order",
    "recovery-code",
    "head-result-not-durable",
    "process-failed",
    "check-invalid",
    "reader",
)
"""Every law a violation can name (`process-failed`: a process not killed exited non-zero or
left its turn unfinished; `check-invalid`: `duraloop check` refused the final log;
`reader`: a line or row the campaign's own reader could not parse)."""


@dataclass(frozen=True)
class Violation:
    """One broken law, with what showed it."""

    law: str
    detail: str


@dataclass(frozen=True)
class Snapshot:
    """One store's view of one session at one moment, read independently of duraloop.

    Attributes:
        raw: the file's bytes (JSONL, zstd); b"" for SQLite.
        committed: the bytes a later process must keep: up to the last newline (JSONL), the
            complete frames (zstd); b"" for SQLite.
        rows: the committed units compared byte-wise: lines (JSONL, zstd plaintext) or
            SQLite rows as tuples keyed by seq.
        events: the logical events after the header, packed rows expanded to placeholders.
        problems: what the reader could not parse (each a `reader` violation).
        framed: a zstd log: what must be kept is its plaintext lines, not its bytes (a
            closed turn's frames are merged into one, docs/store.md#zstd-framing).
    """

    raw: bytes = b""
    committed: bytes = b""
    rows: Mapping[int, tuple[Any, ...]] = field(default_factory=dict)
    lines: tuple[bytes, ...] = ()
    events: tuple[dict[str, Any], ...] = ()
    problems: tuple[str, ...] = ()
    framed: bool = False

    @property
    def exists(self) -> bool:
        return bool(self.events) or bool(self.lines) or bool(self.rows)


# --------------------------------------------------------------------------- readers


def _expand(row: dict[str, Any]) -> list[dict[str, Any]]:
    """Return a packed chunk row's members as `{"type": "assistant/chunk", "seq": n}`."""
    data = row["data"]
    members = data["args"] if row["type"] == "tool-call-chunks" else data["texts"]
    seq0 = int(row["seq0"])
    return [
        {"type": "assistant/chunk", "seq": seq0 + k, "packed": True} for k in range(len(members))
    ]


def _events_of_lines(lines: Sequence[bytes]) -> tuple[list[dict[str, Any]], list[str]]:
    events: list[dict[str, Any]] = []
    problems: list[str] = []
    for number, line in enumerate(lines, start=1):
        try:
            row = json.loads(line)
        except ValueError as exc:
            problems.append(f"line {number} is not JSON ({exc}): {line[:80]!r}")
            continue
        if not isinstance(row, dict):
            problems.append(f"line {number} is not an object")
        elif number == 1:
            if row.get("type") != "session":
                problems.append(f"line 1 is not a session header: {line[:80]!r}")
        elif row.get("type") in PACKED_TYPES:
            events.extend(_expand(row))
        else:
            events.append(row)
    return events, problems


def read_jsonl(path: Path) -> Snapshot:
    """Read a raw `session.jsonl`: committed = every byte up to the last newline."""
    raw = path.read_bytes() if path.exists() else b""
    committed = raw[: raw.rfind(b"\n") + 1]
    lines = tuple(committed.split(b"\n")[:-1])
    events, problems = _events_of_lines(lines)
    return Snapshot(
        raw=raw, committed=committed, lines=lines, events=tuple(events), problems=tuple(problems)
    )


def zstd_frames(data: bytes) -> tuple[int, bytes, str | None]:
    """Decode the complete frames of a zstd log.

    Returns:
        The end of the last complete frame, the plaintext of the complete frames, and a
        problem if a frame does not decode (a frame cut by end of file is a torn tail).
    """
    view = memoryview(data)
    position = 0
    plaintext: list[bytes] = []
    while position < len(data):
        reader = zstandard.ZstdDecompressor().decompressobj()
        try:
            out = reader.decompress(view[position:])
        except zstandard.ZstdError as exc:
            return position, b"".join(plaintext), f"zstd frame at byte {position}: {exc}"
        if not reader.eof:
            break  # torn final frame
        plaintext.append(out)
        position = len(data) - len(reader.unused_data)
    return position, b"".join(plaintext), None


def read_zstd(path: Path) -> Snapshot:
    """Read a `session.jsonl.zstd`: committed = the complete frames' bytes."""
    raw = path.read_bytes() if path.exists() else b""
    end, plaintext, problem = zstd_frames(raw)
    problems = [] if problem is None else [problem]
    if plaintext and not plaintext.endswith(b"\n"):
        problems.append("the complete frames do not end at a line end")
    lines = tuple(plaintext.split(b"\n")[:-1])
    events, line_problems = _events_of_lines(lines)
    return Snapshot(
        raw=raw,
        committed=raw[:end],
        lines=lines,
        events=tuple(events),
        problems=tuple(problems + line_problems),
        framed=True,
    )


_SQL = (
    "SELECT seq, type, time, typeof(data), data, source_event_seqs, surface_op, ignorable "
    "FROM events WHERE session_id = ? ORDER BY seq"
)


def read_sqlite(path: Path, session_id: str) -> Snapshot:
    """Read one session's rows from a SQLite store (a missing file or table is no session)."""
    if not path.exists():
        return Snapshot()
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        connection.text_factory = bytes
        try:
            rows = connection.execute(_SQL, (session_id,)).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return Snapshot()
            raise
    finally:
        connection.close()
    events: list[dict[str, Any]] = []
    problems: list[str] = []
    by_seq: dict[int, tuple[Any, ...]] = {}
    for row in rows:
        seq, kind, _time, data_type, data = row[0], row[1].decode(), row[2], row[3], row[4]
        by_seq[int(seq)] = tuple(row)
        try:
            if data_type == b"blob":
                data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
            value = json.loads(data)
        except (ValueError, zstandard.ZstdError) as exc:
            problems.append(f"row seq {seq} ({kind}) data does not decode: {exc}")
            continue
        if row[7] == 0:
            events.extend(_expand({"type": kind, "seq0": seq, "data": value}))
        else:
            events.append({"type": kind, "seq": seq, "time": row[2], "data": value})
    return Snapshot(rows=by_seq, events=tuple(events), problems=tuple(problems))


# --------------------------------------------------------------------------- the log's calls


@dataclass
class Calls:
    """The tool calls of one log: who asked, who started, who answered."""

    messages: list[tuple[int, tuple[int, int], list[tuple[str, str]]]] = field(default_factory=list)
    """(seq, (turn, step), [(call id, tool name)]) of each assistant message with calls."""
    started: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    results: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    step_ends: dict[tuple[int, int], int] = field(default_factory=dict)
    turn_ends: set[int] = field(default_factory=set)
    last_turn: int = 0

    def name_of(self, call_id: str) -> str | None:
        for _seq, _where, calls in self.messages:
            for cid, name in calls:
                if cid == call_id:
                    return name
        return None


def calls_of(events: Iterable[dict[str, Any]]) -> Calls:
    """Index the calls, `tool/call`s, results and step/turn ends of a log's events."""
    calls = Calls()
    for event in events:
        kind, data = event["type"], event.get("data")
        if not isinstance(data, dict):
            continue
        if kind == "turn/start":
            calls.last_turn = int(data["turn"])
        elif kind == "assistant/message":
            blocks = data["message"]["content"]
            asked = [(b["id"], b["name"]) for b in blocks if b.get("type") == "tool-call"]
            if asked:
                calls.messages.append((event["seq"], (data["turn"], data["step"]), asked))
        elif kind == "tool/call":
            calls.started.setdefault(data["callId"], []).append(event)
        elif kind == "tool/result":
            call_id = data["message"]["source"]["callId"]
            calls.results.setdefault(call_id, []).append(event)
        elif kind == "step/end":
            calls.step_ends[(data["turn"], data["step"])] = event["seq"]
        elif kind == "turn/end":
            calls.turn_ends.add(int(data["turn"]))
    return calls


def result_code(event: dict[str, Any]) -> str | None:
    """The error code of a `tool/result` (None for a success or an uncoded error)."""
    error = event["data"].get("error")
    return error.get("code") if isinstance(error, dict) else None


def pending_calls(calls: Calls) -> dict[str, str]:
    """The calls of the open final turn with no result, each with the code repair owes it."""
    if calls.last_turn in calls.turn_ends:
        return {}
    owed: dict[str, str] = {}
    for _seq, (turn, _step), asked in calls.messages:
        if turn != calls.last_turn:
            continue
        for call_id, _name in asked:
            if call_id not in calls.results:
                owed[call_id] = UNKNOWN if call_id in calls.started else NOT_STARTED
    return owed


# --------------------------------------------------------------------------- laws


def check_preserved(before: Snapshot, after: Snapshot) -> list[Violation]:
    """`committed-lost`: what was complete on disk before is unchanged after."""
    found: list[Violation] = []
    if before.rows or after.rows:
        for seq, row in before.rows.items():
            if after.rows.get(seq) != row:
                found.append(
                    Violation(
                        "committed-lost",
                        f"SQLite row seq {seq} ({row[1]!r}) "
                        f"changed or went: {after.rows.get(seq)!r:.120}",
                    )
                )
        return found
    if before.framed:
        # Frames may be merged (same plaintext, other bytes): every committed line must stay.
        if after.lines[: len(before.lines)] != before.lines:
            common = next(
                (
                    k
                    for k, (a, b) in enumerate(zip(before.lines, after.lines, strict=False))
                    if a != b
                ),
                min(len(before.lines), len(after.lines)),
            )
            found.append(
                Violation(
                    "committed-lost",
                    f"plaintext line {common + 2} of the {len(before.lines)} committed lines "
                    "differs or went after resume",
                )
            )
        return found
    if not after.raw.startswith(before.committed):
        common = next(
            (
                k
                for k, (a, b) in enumerate(zip(before.committed, after.raw, strict=False))
                if a != b
            ),
            min(len(before.committed), len(after.raw)),
        )
        line = before.committed[:common].count(b"\n") + 1
        found.append(
            Violation(
                "committed-lost",
                f"byte {common} (line {line}) of the "
                f"{len(before.committed)} committed bytes differs after resume",
            )
        )
    elif before.lines and after.lines[: len(before.lines)] != before.lines:
        found.append(Violation("committed-lost", "a committed line differs after resume"))
    return found


def check_seqs(snapshot: Snapshot) -> list[Violation]:
    """`seq-contiguous` and `reader`."""
    found = [Violation("reader", problem) for problem in snapshot.problems]
    for index, event in enumerate(snapshot.events):
        if event.get("seq") != index:
            found.append(
                Violation(
                    "seq-contiguous",
                    f"event {index} has seq {event.get('seq')!r} ({event.get('type')})",
                )
            )
            break
    return found


def check_answers(calls: Calls) -> list[Violation]:
    """`answer-order` and the `body-twice` half that the log shows."""
    found: list[Violation] = []
    asked_ids = Counter(cid for _s, _w, asked in calls.messages for cid, _n in asked)
    for call_id, count in asked_ids.items():
        if count > 1:
            found.append(Violation("answer-order", f"call id {call_id} asked {count} times"))
    for call_id, events in calls.started.items():
        if len(events) > 1:
            found.append(Violation("body-twice", f"{call_id} has {len(events)} tool/call events"))
        if call_id not in asked_ids:
            found.append(
                Violation("answer-order", f"tool/call {call_id} answers no assistant call")
            )
    for call_id, events in calls.results.items():
        if len(events) > 1:
            codes = [result_code(e) for e in events]
            found.append(Violation("body-twice", f"{call_id} has {len(events)} results {codes}"))
        if call_id not in asked_ids:
            found.append(
                Violation("answer-order", f"result for {call_id} answers no assistant call")
            )
    for seq, where, asked in calls.messages:
        ids = [cid for cid, _ in asked]
        answered = sorted(
            (calls.results[cid][0]["seq"], cid) for cid in ids if cid in calls.results
        )
        order = [cid for _s, cid in answered]
        if order != ids[: len(order)]:
            found.append(
                Violation(
                    "answer-order", f"step {where}: results in order {order}, calls in order {ids}"
                )
            )
        started = sorted((calls.started[cid][0]["seq"], cid) for cid in ids if cid in calls.started)
        if [cid for _s, cid in started] != [cid for cid in ids if cid in calls.started]:
            found.append(
                Violation(
                    "answer-order",
                    f"step {where}: tool/calls out of call order {[cid for _s, cid in started]}",
                )
            )
        if any(s < seq for s, _cid in answered + started):
            found.append(
                Violation(
                    "answer-order",
                    f"step {where}: a result or tool/call before its assistant message",
                )
            )
        end = calls.step_ends.get(where)
        if end is not None and (len(order) != len(ids) or any(s > end for s, _ in answered)):
            found.append(
                Violation(
                    "answer-order",
                    f"step {where} ended at seq {end} with calls {ids} answered {order} before it",
                )
            )
    return found


def check_codes(calls: Calls) -> list[Violation]:
    """The half of `recovery-code` that one log shows: codes agree with the `tool/call`s."""
    found: list[Violation] = []
    for call_id, events in calls.results.items():
        code = result_code(events[0])
        if code == UNKNOWN and call_id not in calls.started:
            found.append(Violation("recovery-code", f"{call_id} is {UNKNOWN} but has no tool/call"))
        if code == NOT_STARTED and call_id in calls.started:
            found.append(
                Violation("recovery-code", f"{call_id} is {NOT_STARTED} but has a tool/call")
            )
    return found


def check_owed(owed: Mapping[str, str], calls: Calls) -> list[Violation]:
    """`recovery-code`: each call owed a recovery result at a kill got exactly that code."""
    found: list[Violation] = []
    for call_id, code in owed.items():
        results = calls.results.get(call_id)
        if results and result_code(results[0]) != code:
            found.append(
                Violation(
                    "recovery-code",
                    f"{call_id} was owed {code} at a kill but is "
                    f"answered {result_code(results[0])!r}",
                )
            )
    return found


def check_spurious(calls: Calls, ever_owed: Iterable[str]) -> list[Violation]:
    """`recovery-code`: a recovery code no kill explains (the scripts never fail a step)."""
    owed = set(ever_owed)
    return [
        Violation("recovery-code", f"{cid} answered {result_code(ev[0])} with no kill owing it")
        for cid, ev in calls.results.items()
        if result_code(ev[0]) in RECOVERY_CODES and cid not in owed
    ]


@dataclass(frozen=True)
class Effects:
    """The side effects on disk: ledger lines and the files write/edit calls produce."""

    ledger: tuple[str, ...]
    written: frozenset[str]
    """Call ids whose `w-<id>.txt` exists with its own content."""
    edited: frozenset[str]
    """Call ids whose `e-<id>.txt` holds their edit."""


def read_effects(ledger: Path, workspace: Path, call_ids: Iterable[str]) -> Effects:
    """Read the ledger and the output files of the given calls."""
    lines = tuple(ledger.read_text().splitlines()) if ledger.exists() else ()
    written, edited = set(), set()
    for call_id in call_ids:
        wfile, efile = workspace / f"w-{call_id}.txt", workspace / f"e-{call_id}.txt"
        if wfile.exists() and wfile.read_text() == f"written by {call_id}\n":
            written.add(call_id)
        if efile.exists() and efile.read_text() == f"state: DONE {call_id}\n":
            edited.add(call_id)
    return Effects(lines, frozenset(written), frozenset(edited))


def check_effects(calls: Calls, effects: Effects) -> list[Violation]:
    """`body-twice` (ledger), `effect-without-call`, `result-without-effect`."""
    found: list[Violation] = []
    for line, count in Counter(effects.ledger).items():
        if count > 1:
            found.append(Violation("body-twice", f"ledger line {line!r} appears {count} times"))
    ledger_ids = {line.split(":", 1)[0] for line in effects.ledger}
    for call_id in sorted(ledger_ids | effects.written | effects.edited):
        if call_id not in calls.started:
            found.append(
                Violation(
                    "effect-without-call", f"{call_id} has an effect on disk but no tool/call"
                )
            )
    for call_id, results in calls.results.items():
        if results[0]["data"]["message"]["content"][0].get("isError"):
            continue
        name = calls.name_of(call_id)
        missing = (
            (name == "bash" and not {f"{call_id}:begin", f"{call_id}:end"} <= set(effects.ledger))
            or (name == "write_file" and call_id not in effects.written)
            or (name == "edit_file" and call_id not in effects.edited)
        )
        if missing:
            found.append(
                Violation(
                    "result-without-effect",
                    f"{name} {call_id} succeeded but its effect is not on disk",
                )
            )
    return found


def check_head_durable(calls: Calls, kill_ms: int, *, since_seq: int = 0) -> list[Violation]:
    """`head-result-not-durable`: see the module docstring (issue 9 item 4).

    Args:
        calls: the log as the kill left it.
        kill_ms: when SIGKILL was sent, epoch milliseconds (the clock of event `time`s).
        since_seq: the first seq the killed process wrote; older `tool/call`s were left by
            an earlier kill and are not judged again.
    """
    found: list[Violation] = []
    for _seq, _where, asked in calls.messages:
        groups: list[list[tuple[str, str]]] = []
        for call in asked:
            if groups and call[1] in PARALLEL_TOOLS and groups[-1][-1][1] in PARALLEL_TOOLS:
                groups[-1].append(call)
            else:
                groups.append([call])
        for group in groups:
            for index, (call_id, _name) in enumerate(group):
                if call_id in calls.results:
                    continue
                # The first unanswered call of its group: the head of model order, if every
                # earlier call of the message is answered.
                earlier = asked[: asked.index((call_id, _name))]
                later_started = any(cid in calls.started for cid, _ in group[index + 1 :])
                started = calls.started.get(call_id)
                if (
                    _name in FAST_TOOLS
                    and all(cid in calls.results for cid, _ in earlier)
                    and later_started
                    and started
                    and started[0]["seq"] >= since_seq
                    and kill_ms - int(started[0]["time"]) > HEAD_GRACE_MS
                ):
                    found.append(
                        Violation(
                            "head-result-not-durable",
                            f"{_name} {call_id}: tool/call on disk "
                            f"{kill_ms - started[0]['time']} ms "
                            "before the kill, head of model order, no result while a later call of "
                            "its group ran",
                        )
                    )
                break
    return found
