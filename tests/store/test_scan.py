"""`SessionStore.scan`: the log as stored, without the invariant judging of `read`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from duraloop.errors import CorruptLogError
from duraloop.log import Session
from duraloop.store import JsonlStore


def test_scan_returns_a_log_that_read_refuses_and_list_marks_damaged(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    session = Session("ok")
    writer = store.open_writer(session)
    session.append("turn/start", {"turn": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    writer.close()
    path = Path(str(store.locate("ok")))
    lines = path.read_text(encoding="utf-8").splitlines()
    broken = json.loads(lines[1])  # the turn/start, renumbered: turn/end then closes turn 2
    broken["data"]["turn"] = 2
    path.write_text("\n".join([lines[0], json.dumps(broken), *lines[2:]]) + "\n", "utf-8")
    with pytest.raises(CorruptLogError):
        JsonlStore(tmp_path / "sessions").read("ok")
    header, events = JsonlStore(tmp_path / "sessions").scan("ok")
    assert header.id == "ok" and [event.type for event in events] == ["turn/start", "turn/end"]
    [row] = JsonlStore(tmp_path / "sessions").list()
    assert row.damaged is not None
