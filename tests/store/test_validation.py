"""Every store path judges a log as `check` does (issue 9, A1-A3), on every backend.

A closed step with an unanswered call is readable (read, inspect, list) but cannot be
continued: `load` raises `UnpairedHistoryError` naming the rescue before writing anything
(the revision and the stored events are unchanged even when an open final turn and a torn
tail would otherwise be repaired). The rescue fork keeps the prefix and closes the cut with
crash repair's closers; the parent is never written. `append` refuses to write such history.
A fork inside the open final turn needs the writer lock (a running writer is not a crash),
and a default fork of an open final turn cuts at the last closed turn. A log with a renamed
key is refused alike by read, inspect, load, fork and `list` (a damaged row).
"""

from __future__ import annotations

import pytest

from duraloop.errors import (
    CorruptLogError,
    InvariantError,
    SessionForkError,
    SessionLockedError,
    UnpairedHistoryError,
)
from duraloop.log import Event, check_log
from duraloop.log import vocabulary as v
from duraloop.store import SessionStore

from ._builders import (
    assistant,
    call_block,
    ev,
    meta,
    one_turn_log,
    se,
    ss,
    te,
    tool_call,
    ts,
    user,
)
from ._torn import append_torn_fragment


def wedged_log() -> list[Event]:
    """Turn 1 asked for c1 and c2, recorded only c1's `tool/call`, and closed unanswered."""
    return [
        ts(0, 1),
        user(1, "go", "u1"),
        ss(2, 1, 1),
        assistant(3, 1, 1, [call_block("c1"), call_block("c2")], "a1"),
        tool_call(4, 1, 1, "c1"),
        se(5, 1, 1),
        ev(
            v.TURN_END,
            6,
            6,
            {"turn": 1, "reason": {"kind": "error", "error": {"message": "boom", "code": "X"}}},
        ),
    ]


def result(seq: int, turn: int, step: int, call_id: str) -> Event:
    message = {
        "id": f"r-{call_id}",
        "role": "user",
        "source": {"kind": "tool", "callId": call_id},
        "content": [
            {"type": "tool-result", "toolCallId": call_id, "content": [], "isError": False}
        ],
    }
    return ev(
        v.TOOL_RESULT, seq, seq, {"turn": turn, "step": step, "message": message}, op="append"
    )


def test_load_of_a_closed_unanswered_turn_names_the_rescue_and_writes_nothing(
    store: SessionStore,
) -> None:
    store.backend.materialize(meta("w"), [*wedged_log(), ts(7, 2)])  # an open final turn too
    revision = store.revision("w")
    with pytest.raises(UnpairedHistoryError) as caught:
        store.load("w")
    error = caught.value
    assert (error.turn, error.step, error.call_ids, error.rescue_seq) == (1, 1, ("c1", "c2"), 4)
    assert error.rescue == "duraloop fork w --at 4"
    assert "`duraloop fork w --at 4`" in str(error) and "Nothing was written" in str(error)
    assert store.revision("w") == revision
    assert store.backend.read("w").events == [*wedged_log(), ts(7, 2)]


def test_load_refuses_unanswered_history_before_cutting_a_torn_tail(store: SessionStore) -> None:
    store.backend.materialize(meta("w"), wedged_log())
    append_torn_fragment(store, "w", seq=7)
    torn = store.backend.read("w").torn_bytes
    assert torn > 0
    with pytest.raises(UnpairedHistoryError):
        store.load("w")
    assert store.backend.read("w").torn_bytes == torn


def test_read_inspect_check_and_list_accept_a_closed_unanswered_turn(store: SessionStore) -> None:
    store.backend.materialize(meta("w"), wedged_log())
    assert store.read("w")[1] == wedged_log()
    assert store.inspect("w").events == wedged_log()
    assert store.check("w").rescue_seq == 4
    [row] = store.list()
    assert row.damaged is None and row.last_turn_end == "error"


def test_rescue_fork_closes_the_cut_like_crash_repair_and_leaves_the_parent(
    store: SessionStore,
) -> None:
    store.backend.materialize(meta("w"), wedged_log())
    revision = store.revision("w")
    child = store.fork("w", boundary=4, child_id="rescued")
    events = store.load(child).events
    assert events[:5] == wedged_log()[:5]
    closers = [(e.type, (e.data.get("error") or {}).get("code")) for e in events[5:]]
    assert closers == [
        (v.TOOL_RESULT, "TOOL_OUTCOME_UNKNOWN"),
        (v.TOOL_RESULT, "TOOL_NOT_STARTED"),
        (v.STEP_END, None),
        (v.TURN_END, None),
        (v.END_SEED, None),
    ]
    assert events[8].data["reason"] == {"kind": "interrupted"}
    assert store.load(child).header.seed_length == 9
    assert check_log(child, events).valid
    assert store.revision("w") == revision


def test_fork_whose_prefix_holds_an_unanswered_closed_step_is_refused_with_the_rescue(
    store: SessionStore,
) -> None:
    store.backend.materialize(meta("w"), wedged_log())
    for boundary in (None, 5, 6):
        with pytest.raises(UnpairedHistoryError, match="--at 4"):
            store.fork("w", boundary=boundary)
    assert [row.id for row in store.list()] == ["w"]


def test_append_refuses_an_event_that_closes_a_step_with_an_unanswered_call(
    store: SessionStore,
) -> None:
    opened = [ts(0, 1), ss(1, 1, 1), assistant(2, 1, 1, [call_block("c1")], "a1")]
    store.backend.materialize(meta("s"), opened)
    with pytest.raises(
        InvariantError, match="step/end at seq 3 would close its step with tool call"
    ):
        store.append("s", [se(3, 1, 1), te(4, 1)])
    with pytest.raises(InvariantError, match="'c1' unanswered"):
        store.append("s", [tool_call(3, 1, 1, "c1"), se(4, 1, 1)])
    assert store.backend.read("s").events == opened
    store.append("s", [tool_call(3, 1, 1, "c1"), result(4, 1, 1, "c1"), se(5, 1, 1), te(6, 1)])
    assert len(store.backend.read("s").events) == 7


def test_default_fork_of_an_open_final_turn_cuts_at_the_last_closed_turn(
    store: SessionStore,
) -> None:
    running = [
        *one_turn_log(),
        ts(6, 2),
        ss(7, 2, 1),
        assistant(8, 2, 1, [call_block("c")], "a2"),
        tool_call(9, 2, 1, "c"),
    ]
    store.backend.materialize(meta("p"), running)
    release = store.backend.lock("p", cwd=None)  # a live writer runs turn 2's call
    try:
        child = store.fork("p")
        with pytest.raises(SessionLockedError):
            store.fork("p", boundary=9)
        with pytest.raises(SessionLockedError):
            store.fork("p", boundary=6)
        assert store.fork("p", boundary=3, child_id="inside-turn-1") == "inside-turn-1"
    finally:
        release()
    events = store.read(child)[1]
    assert events[:-1] == one_turn_log()
    assert events[-1].type == v.END_SEED
    assert not any(e.type == v.TOOL_RESULT for e in events)
    assert store.backend.read("p").events == running
    # Without a writer, the open final turn is interrupted for good: a cut in it is closed.
    crashed = store.fork("p", boundary=9)
    codes = [e.data["error"]["code"] for e in store.read(crashed)[1] if e.type == v.TOOL_RESULT]
    assert codes == ["TOOL_OUTCOME_UNKNOWN"]


def test_default_fork_of_a_session_whose_only_turn_is_open_is_refused(store: SessionStore) -> None:
    store.backend.materialize(meta("p"), [ts(0, 1)])
    with pytest.raises(SessionForkError, match="no closed turn to fork yet") as caught:
        store.fork("p")
    assert caught.value.code == "OPEN_TURN"


def test_every_store_path_refuses_a_log_with_a_renamed_key(store: SessionStore) -> None:
    log = one_turn_log()
    renamed = {"turn": 1, "stap": 1}  # two flipped bytes: "step" -> "stap"
    store.backend.materialize(meta("bad"), [*log[:4], ev(v.STEP_END, 4, 5, renamed), log[5]])
    revision = store.revision("bad")
    for path in (store.read, store.inspect, store.load, store.fork):
        with pytest.raises(
            CorruptLogError, match='session "bad" is damaged: invariant violated at seq 4'
        ):
            path("bad")
    [row] = store.list()
    assert row.damaged is not None and "invariant violated at seq 4" in row.damaged
    assert not store.check("bad").valid
    assert store.revision("bad") == revision
