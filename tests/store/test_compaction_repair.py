"""A torn compaction in a stored log is closed durably on load (compaction-spec 9).

The JSONL store's load judges the log, appends the repair's closers (the `compaction/end`
first, then the interrupted turn's) and stores them; the next load finds nothing to repair.
"""

from __future__ import annotations

from pathlib import Path

from conformance._builders import SE, SS, TS, A, U, build, txt
from duraloop.log.vocabulary import COMPACTION_END, COMPACTION_INTERRUPTED_TEXT, TURN_END
from duraloop.store import JsonlStore
from log._compaction_builders import CS, CY

from ._builders import meta


def test_jsonl_load_closes_a_torn_compaction_and_stores_the_closers(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    events = build(TS(1), U("a"), SS(1, 1), A(1, 1, txt("hi")), SE(1, 1), CS(1), CY([1]))
    store.backend.materialize(meta("s"), events)
    loaded = store.load("s")
    closers = loaded.events[len(events) :]
    assert [event.type for event in closers] == [COMPACTION_END, TURN_END]
    assert closers[0].data == {
        "compactionId": "test-compaction",
        "turn": 1,
        "error": COMPACTION_INTERRUPTED_TEXT,
    }
    assert loaded.repair.closers == closers
    again = store.load("s")
    assert again.events == loaded.events and again.repair.closers == []
