"""A paused turn in the Summary: marked `paused`, its waiting call marked (docs/view.md#summary)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2

from duraloop.cli._view_command import view_decider
from duraloop.store import JsonlStore
from duraloop.view import create_app

from ._support import TOKEN, auth, paused_session, serve, story_session


def _summary(client: httpx2.Client, session_id: str) -> Any:
    answer = client.get(f"/api/sessions/{session_id}", headers=auth())
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_paused_turn_is_marked_paused_up_to_its_ask_and_its_call_waits_for_approval(
    tmp_path: Path, workspace: Path
) -> None:
    store = JsonlStore(tmp_path / "sessions")
    paused_session(store, workspace, "one")
    story_session(store, workspace, "story")
    events = store.read("one")[1]
    ask = next(event for event in events if event.type == "approval/asked")
    app = create_app(store, token=TOKEN, decide=view_decider(store, None))
    with serve(app) as client:
        before = _summary(client, "one")
        closed = _summary(client, "story")
        origin = str(client.base_url).rstrip("/")
        decided = client.post(
            "/api/sessions/one/approvals/write-1",
            json={"allow": True},
            headers={**auth(), "Origin": origin},
        )
        after = _summary(client, "one")
    assert before["state"] == "paused"
    (turn,) = before["turns"]
    assert turn["paused"] is True and turn["end"] is None
    assert turn["last"] == events[-1].time == ask.time  # the ask is the turn's last event
    (call,) = turn["steps"][-1]["calls"]
    assert (call["call_id"], call["waiting"], call["asked"]) == ("write-1", "approval", ask.time)
    assert call["call_seq"] is None and call["end"] is None
    assert decided.status_code == 200, decided.text
    (decided_turn,) = after["turns"]
    assert decided_turn["paused"] is True
    assert decided_turn["steps"][-1]["calls"][0]["waiting"] == "resume"
    for closed_turn in closed["turns"]:
        assert closed_turn["paused"] is False and closed_turn["last"] == closed_turn["end"]
        assert all(c["waiting"] is None for s in closed_turn["steps"] for c in s["calls"])
