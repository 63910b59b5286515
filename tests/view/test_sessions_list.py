"""`GET /api/sessions`: every session of every kind of store, damaged logs with their reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.test_store_option import FIXTURES, _dsh_lines, _dsh_project_key, _dsh_segment
from duraloop.store import JsonlStore, SessionStore, SessionSummary
from duraloop.view import create_app

from ._support import TOKEN, XSS, auth, paused_session, serve, story_session


def test_sessions_list_every_store_kind_newest_first_with_state_and_title(
    store: SessionStore, workspace: Path
) -> None:
    story_session(store, workspace)
    paused_session(store, workspace)
    with serve(create_app(store, token=TOKEN)) as client:
        answer = client.get("/api/sessions", headers=auth())
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    rows = answer.json()["sessions"]
    assert [row["id"] for row in rows] == ["paused", "story"]  # newest first
    paused, story = rows
    assert paused["state"] == "paused" and paused["last_reason"] is None
    assert story["state"] == "closed" and story["last_reason"] == "error"
    assert story["turns"] == 2 and story["events"] > 40
    assert story["title"] == f"read both files {XSS}"  # as written: escaping is the page's
    assert story["damaged"] is None and story["parent"] is None
    assert story["created"] is not None and story["updated"] >= story["created"]
    if isinstance(store, JsonlStore):
        path = Path(str(store.locate("story")))
        assert story["size_bytes"] == path.stat().st_size
    else:
        assert story["size_bytes"] is None


def test_a_fork_names_its_parent_and_the_parent_lists_it_as_a_child(
    tmp_path: Path, workspace: Path
) -> None:
    store = JsonlStore(tmp_path / "sessions")
    story_session(store, workspace)
    child = store.fork("story", child_id="child")
    with serve(create_app(store, token=TOKEN)) as client:
        rows = {
            row["id"]: row for row in client.get("/api/sessions", headers=auth()).json()["sessions"]
        }
        parent = client.get("/api/sessions/story", headers=auth()).json()
        forked = client.get(f"/api/sessions/{child}", headers=auth()).json()
    assert rows["child"]["parent"] == "story"
    assert parent["children"] == ["child"]
    assert forked["header"]["parent"] == "story"


def test_damaged_logs_are_listed_as_damaged_with_their_reason(
    tmp_path: Path, workspace: Path
) -> None:
    root = tmp_path / "sessions"
    store = JsonlStore(root)
    story_session(store, workspace)
    unreadable = root / "--x--" / "broken-header"
    unreadable.mkdir(parents=True)
    (unreadable / "session.jsonl").write_text("this is not json\n", encoding="utf-8")
    lines = Path(str(store.locate("story"))).read_text(encoding="utf-8").splitlines()
    middle = Path(str(store.locate("story"))).parent.parent / "broken-middle"
    middle.mkdir(parents=True)
    header = {**json.loads(lines[0]), "id": "broken-middle"}
    damaged = [json.dumps(header), *lines[1:5], '{"type": "turn/start", "seq": 4', *lines[6:]]
    (middle / "session.jsonl").write_text("\n".join(damaged) + "\n", encoding="utf-8")
    with serve(create_app(store, token=TOKEN)) as client:
        rows = {
            row["id"]: row for row in client.get("/api/sessions", headers=auth()).json()["sessions"]
        }
        summary = client.get("/api/sessions/broken-middle", headers=auth())
        events = client.get("/api/sessions/broken-middle/events", headers=auth())
    assert rows["story"]["state"] == "closed"  # one damaged log never hides the others
    for name in ("broken-header", "broken-middle"):
        assert rows[name]["state"] == "damaged", rows[name]
        assert rows[name]["damaged"] and "\n" not in rows[name]["damaged"]
    assert rows["broken-middle"]["created"] == header["createdAt"]
    assert summary.status_code == 200 and summary.json()["state"] == "damaged"
    assert summary.json()["damaged"]
    assert events.status_code == 409 and "cannot be read" in events.json()["error"]


@pytest.mark.parametrize("zstd", [False, True], ids=["raw", "zstd"])
def test_a_dsh_root_is_listed_and_summarized(tmp_path: Path, zstd: bool) -> None:
    fixture = FIXTURES / "parallel-tool-calls" / "session.jsonl"
    if not fixture.is_file():
        pytest.skip(f"dsh fixtures not found at {FIXTURES}")
    import zstandard

    root = tmp_path / "dsh"
    cwd = str(tmp_path)
    lines = _dsh_lines(fixture, session_id="dsh-session", cwd=cwd)
    directory = root / _dsh_project_key(cwd) / _dsh_segment("dsh-session")
    directory.mkdir(parents=True)
    if zstd:  # dsh's framing: the header alone in the first frame, then one frame a batch
        codec = zstandard.ZstdCompressor(write_checksum=True)
        batches = [lines[:1]] + [lines[i : i + 7] for i in range(1, len(lines), 7)]
        frames = [codec.compress(b"".join(line + b"\n" for line in batch)) for batch in batches]
        (directory / "session.jsonl.zstd").write_bytes(b"".join(frames))
    else:
        (directory / "session.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
    store = JsonlStore(root, compression="zstd" if zstd else "none")
    with serve(create_app(store, token=TOKEN)) as client:
        rows = client.get("/api/sessions", headers=auth()).json()["sessions"]
        summary = client.get("/api/sessions/dsh-session", headers=auth()).json()
    assert [(row["id"], row["state"], row["turns"]) for row in rows] == [
        ("dsh-session", "closed", 1)
    ]
    calls = summary["turns"][0]["steps"][0]["calls"]
    assert len(calls) == 2 and all(call["result_seq"] is not None for call in calls)
    assert calls[1]["call_seq"] < calls[0]["result_seq"]  # both started before either ended


def test_the_list_is_read_again_only_when_a_session_changed(
    tmp_path: Path, workspace: Path
) -> None:
    store = JsonlStore(tmp_path / "sessions")
    story_session(store, workspace)
    listed: list[int] = []
    original = store.list

    def counting() -> list[SessionSummary]:
        listed.append(1)
        return original()

    store.list = counting  # type: ignore[method-assign]
    with serve(create_app(store, token=TOKEN)) as client:
        first = client.get("/api/sessions", headers=auth()).json()
        again = client.get("/api/sessions", headers=auth()).json()
        paused_session(store, workspace)
        changed = client.get("/api/sessions", headers=auth()).json()
    assert first == again and len(listed) == 2
    assert [row["id"] for row in changed["sessions"]] == ["paused", "story"]
