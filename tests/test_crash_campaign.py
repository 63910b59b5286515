"""The crash campaign (benchmarks/crash_campaign.py) in CI: 50 SIGKILLs over the three stores.

Laws 1, 2, 4 and 5 as a user meets them: real `duraloop run`/`resume` processes killed at
uniform and targeted moments, resumed, checked, with every law judged by the campaign's own
readers (not duraloop's loader). The first tests show that each of those law checks can fail,
on the smallest log that breaks it, so a zero in the campaign's figures means something.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
import zstandard

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import _crash_laws as laws  # noqa: E402
import crash_campaign  # noqa: E402

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

HEADER = {"type": "session", "version": 0, "id": "s", "createdAt": 1, "cwd": "/w"}


def _line(event: dict[str, Any]) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


def _message(seq: int, *calls: tuple[str, str]) -> dict[str, Any]:
    content = [
        {"type": "tool-call", "id": cid, "name": name, "arguments": "{}"} for cid, name in calls
    ]
    return {
        "type": "assistant/message",
        "seq": seq,
        "time": 1,
        "data": {"turn": 1, "step": 1, "message": {"role": "assistant", "content": content}},
    }


def _call(seq: int, call_id: str, time_ms: int = 1) -> dict[str, Any]:
    return {
        "type": "tool/call",
        "seq": seq,
        "time": time_ms,
        "data": {"turn": 1, "step": 1, "callId": call_id, "name": "bash", "arguments": "{}"},
    }


def _result(seq: int, call_id: str, code: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "turn": 1,
        "step": 1,
        "message": {
            "role": "user",
            "source": {"kind": "tool", "callId": call_id},
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call_id,
                    "content": [],
                    "isError": code is not None,
                }
            ],
        },
    }
    if code is not None:
        data["error"] = {"code": code}
    return {"type": "tool/result", "seq": seq, "time": 1, "data": data}


def _turn(*events: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}, *events]


def _laws_of(snapshot: laws.Snapshot) -> list[str]:
    calls = laws.calls_of(snapshot.events)
    found = laws.check_seqs(snapshot) + laws.check_answers(calls) + laws.check_codes(calls)
    return [v.law for v in found]


def test_jsonl_reader_commits_whole_lines_and_leaves_a_torn_fragment_out(tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    log.write_bytes(_line(HEADER) + _line(_turn()[0]) + b'{"type":"step/st')
    snapshot = laws.read_jsonl(log)
    assert snapshot.committed == _line(HEADER) + _line(_turn()[0])
    assert [e["type"] for e in snapshot.events] == ["turn/start"]


def test_zstd_reader_commits_complete_frames_only(tmp_path: Path) -> None:
    compressor = zstandard.ZstdCompressor(write_checksum=True)
    frames = [compressor.compress(_line(HEADER)), compressor.compress(_line(_turn()[0]))]
    torn = compressor.compress(_line(_call(1, "x")))[:-3]
    log = tmp_path / "session.jsonl.zstd"
    log.write_bytes(b"".join(frames) + torn)
    snapshot = laws.read_zstd(log)
    assert snapshot.committed == b"".join(frames)
    assert [e["type"] for e in snapshot.events] == ["turn/start"]
    assert snapshot.problems == ()


def test_packed_chunk_rows_count_one_seq_per_member(tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    packed = {
        "type": "text-chunks",
        "seq0": 1,
        "time0": 1,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [0, 0], "texts": ["a", "b", "c"]},
    }
    log.write_bytes(_line(HEADER) + _line(_turn()[0]) + _line(packed) + _line(_call(4, "x")))
    assert [e["seq"] for e in laws.read_jsonl(log).events] == [0, 1, 2, 3, 4]


def test_committed_lost_is_flagged_when_one_committed_byte_changes(tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    log.write_bytes(_line(HEADER) + _line(_turn()[0]) + b'{"torn')
    before = laws.read_jsonl(log)
    log.write_bytes(_line(HEADER) + _line(_turn()[0]) + _line(_call(1, "x")))
    assert laws.check_preserved(before, laws.read_jsonl(log)) == []  # the torn fragment may go
    log.write_bytes(_line(HEADER) + _line(_turn()[0]).replace(b"1", b"2"))
    assert [v.law for v in laws.check_preserved(before, laws.read_jsonl(log))] == ["committed-lost"]


def test_committed_lost_is_flagged_when_a_sqlite_row_goes(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    connection = sqlite3.connect(db)
    connection.execute(
        "CREATE TABLE events (session_id, seq, type, time, data, source_event_seqs, "
        "surface_op, ignorable)"
    )
    for seq, kind in enumerate(["turn/start", "step/start"]):
        connection.execute(
            "INSERT INTO events VALUES ('s', ?, ?, 1, ?, NULL, NULL, NULL)",
            (seq, kind, '{"turn": 1}'),
        )
    connection.commit()
    before = laws.read_sqlite(db, "s")
    connection.execute("DELETE FROM events WHERE seq = 1")
    connection.commit()
    connection.close()
    after = laws.read_sqlite(db, "s")
    assert [e["seq"] for e in before.events] == [0, 1]
    assert [v.law for v in laws.check_preserved(before, after)] == ["committed-lost"]


def test_seq_gap_is_flagged() -> None:
    snapshot = laws.Snapshot(events=tuple(_turn(_message(2, ("a", "bash")))))
    assert _laws_of(snapshot) == ["seq-contiguous"]


def test_results_out_of_call_order_are_flagged() -> None:
    events = _turn(
        _message(1, ("a", "bash"), ("b", "bash")),
        _call(2, "a"),
        _call(3, "b"),
        _result(4, "b"),
        _result(5, "a"),
    )
    assert _laws_of(laws.Snapshot(events=tuple(events))) == ["answer-order"]


def test_a_step_ended_with_an_unanswered_call_is_flagged() -> None:
    step_end = {"type": "step/end", "seq": 4, "time": 1, "data": {"turn": 1, "step": 1}}
    events = _turn(
        _message(1, ("a", "bash"), ("b", "bash")), _call(2, "a"), _result(3, "a"), step_end
    )
    assert _laws_of(laws.Snapshot(events=tuple(events))) == ["answer-order"]


def test_a_second_tool_call_of_one_call_is_a_body_run_twice() -> None:
    events = _turn(_message(1, ("a", "bash")), _call(2, "a"), _call(3, "a"))
    assert _laws_of(laws.Snapshot(events=tuple(events))) == ["body-twice"]


def test_outcome_unknown_without_a_tool_call_is_a_wrong_recovery_code() -> None:
    events = _turn(_message(1, ("a", "bash")), _result(2, "a", laws.UNKNOWN))
    assert _laws_of(laws.Snapshot(events=tuple(events))) == ["recovery-code"]


def test_a_started_call_owed_outcome_unknown_answered_not_started_is_flagged() -> None:
    killed = laws.calls_of(_turn(_message(1, ("a", "bash"), ("b", "bash")), _call(2, "a")))
    owed = laws.pending_calls(killed)
    assert owed == {"a": laws.UNKNOWN, "b": laws.NOT_STARTED}
    resumed = laws.calls_of(
        _turn(
            _message(1, ("a", "bash"), ("b", "bash")),
            _call(2, "a"),
            _result(3, "a", laws.NOT_STARTED),
            _result(4, "b", laws.NOT_STARTED),
        )
    )
    assert [v.law for v in laws.check_owed(owed, resumed)] == ["recovery-code"]
    assert [v.law for v in laws.check_spurious(resumed, ["a"])] == ["recovery-code"]  # b: no kill


def test_ledger_effects_twice_or_without_a_tool_call_are_flagged(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    ledger.write_text("a:begin\na:begin\nb:begin\n")
    (tmp_path / "w-c.txt").write_text("written by c\n")
    calls = laws.calls_of(
        _turn(_message(1, ("a", "bash"), ("b", "bash"), ("c", "write_file")), _call(2, "a"))
    )
    found = laws.check_effects(calls, laws.read_effects(ledger, tmp_path, ["a", "b", "c"]))
    assert sorted(v.law for v in found) == [
        "body-twice",
        "effect-without-call",
        "effect-without-call",
    ]


def test_a_success_without_its_effect_is_flagged(tmp_path: Path) -> None:
    calls = laws.calls_of(_turn(_message(1, ("a", "bash")), _call(2, "a"), _result(3, "a")))
    found = laws.check_effects(calls, laws.read_effects(tmp_path / "ledger", tmp_path, ["a"]))
    assert [v.law for v in found] == ["result-without-effect"]


def test_a_finished_head_call_without_a_result_while_its_group_runs_is_flagged() -> None:
    calls = laws.calls_of(
        _turn(
            _message(1, ("r", "read_file"), ("g", "grep")),
            _call(2, "r", time_ms=1000),
            _call(3, "g", time_ms=1001),
        )
    )
    assert laws.check_head_durable(calls, kill_ms=1000 + laws.HEAD_GRACE_MS // 2) == []
    found = laws.check_head_durable(calls, kill_ms=1001 + laws.HEAD_GRACE_MS)
    assert [v.law for v in found] == ["head-result-not-durable"]
    # a call an earlier kill left (before seq 3) is not judged again at a later kill
    assert laws.check_head_durable(calls, kill_ms=9999, since_seq=3) == []


def test_a_slow_head_call_without_a_result_is_not_flagged() -> None:
    calls = laws.calls_of(
        _turn(
            _message(1, ("g", "grep"), ("r", "read_file")),
            _call(2, "g", time_ms=1000),
            _call(3, "r", time_ms=1001),
        )
    )
    assert laws.check_head_durable(calls, kill_ms=9999) == []  # grep may still be running


@pytest.mark.timeout(900)
def test_campaign_of_50_sigkills_over_three_stores_breaks_no_law(tmp_path: Path) -> None:
    report = crash_campaign.run_campaign(50, seed=9, workdir=tmp_path / "campaign")
    rendered = report.render()
    assert report.total_kills == 50, rendered
    for store in crash_campaign.STORES:
        assert sum(n for (s, _k), n in report.kills.items() if s == store) >= 16, rendered
    assert {kind for _s, kind in report.kills} == set(crash_campaign.KINDS), rendered
    assert report.unexpected() == [], rendered
