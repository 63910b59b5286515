"""`GET /api/sessions/{id}`, `/events` and `/messages`: the timeline, recovery marks, paging."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest

from duraloop.log import Event, Price
from duraloop.store import JsonlStore, MemoryStore, SessionStore
from duraloop.view import CSP, create_app

from ._support import TOKEN, XSS, auth, serve, story_session


@pytest.fixture
def story(tmp_path: Path, workspace: Path) -> JsonlStore:
    store = JsonlStore(tmp_path / "sessions")
    story_session(store, workspace)
    return store


def _get(client: httpx2.Client, path: str) -> Any:
    answer = client.get(path, headers=auth())
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_the_timeline_shows_parallel_calls_and_the_failed_steps_recovery_results(
    story: JsonlStore,
) -> None:
    prices = {"scripted:scripted": Price(input_per_mtok=1.0, output_per_mtok=2.0)}
    with serve(create_app(story, token=TOKEN, prices=prices)) as client:
        summary = _get(client, "/api/sessions/story")
    assert summary["state"] == "closed" and summary["last_reason"] == "error"
    assert summary["pending"] == [] and summary["children"] == []
    first, second = summary["turns"]
    reads = first["steps"][0]["calls"]
    assert [call["call_id"] for call in reads] == ["read-1", "read-2"]
    # Both calls were recorded as started before either result: they overlapped.
    assert reads[1]["call_seq"] < reads[0]["result_seq"]
    assert reads[1]["start"] <= reads[0]["end"]
    assert all(call["recovery"] is None and not call["is_error"] for call in reads)
    assert first["reason"] == "completed" and first["error"] is None
    assert first["steps"][0]["request"]["finish"] == "tool-calls"
    assert first["usage"]["requests"] == 2 and first["usage"]["tool_calls"] == 2
    assert first["usage"]["cost"] is not None and first["usage"]["cost"] > 0
    assert second["reason"] == "error"
    assert "audit hook crashed" in second["error"]["message"]
    assert second["end_seq_of_error"] == second["end_seq"]
    stamp, log = second["steps"][0]["calls"]
    assert (stamp["call_id"], stamp["recovery"], stamp["is_error"]) == (
        "stamp-1",
        "TOOL_OUTCOME_UNKNOWN",
        True,
    )
    assert stamp["call_seq"] is not None and "may or may not have run" in stamp["explanation"]
    assert (log["call_id"], log["recovery"], log["call_seq"]) == ("log-1", "TOOL_NOT_STARTED", None)
    assert log["explanation"] and not log["aborted"]


def test_without_prices_the_cost_is_null(story: JsonlStore) -> None:
    with serve(create_app(story, token=TOKEN)) as client:
        summary = _get(client, "/api/sessions/story")
    assert [turn["usage"]["cost"] for turn in summary["turns"]] == [None, None]


def test_xss_shaped_strings_come_back_verbatim_as_json_with_the_csp(story: JsonlStore) -> None:
    with serve(create_app(story, token=TOKEN)) as client:
        answer = client.get("/api/sessions/story/messages", headers=auth())
        page = client.get("/s/story")
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["content-security-policy"] == CSP
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["cache-control"] == "no-store"
    items = answer.json()["items"]
    assert items[1]["kind"] == "user" and items[1]["text"] == f"read both files {XSS}"
    results = [item for item in items if item["kind"] == "tool_result"]
    assert results[0]["text"] == XSS and results[0]["call_id"] == "read-1"
    assistant = next(item for item in items if item["kind"] == "assistant")
    assert assistant["text"] == XSS and assistant["reasoning"] == "two reads at once"
    assert [call["call_id"] for call in assistant["tool_calls"]] == ["read-1", "read-2"]
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == CSP
    assert "story" not in page.text  # the page holds no data: its script asks the API


def test_events_are_paged_after_a_seq_with_next_null_at_the_end(story: JsonlStore) -> None:
    total = len(story.read("story")[1])
    with serve(create_app(story, token=TOKEN)) as client:
        seen: list[int] = []
        after = -1
        while True:
            page = _get(client, f"/api/sessions/story/events?after={after}&limit=7")
            seen += [event["seq"] for event in page["events"]]
            if page["next"] is None:
                break
            after = page["next"]
        refused = client.get("/api/sessions/story/events?limit=2001", headers=auth())
    assert seen == list(range(total))
    assert refused.status_code == 400


def test_messages_are_paged_the_same_way_and_turns_close_with_their_reason(
    story: JsonlStore,
) -> None:
    with serve(create_app(story, token=TOKEN)) as client:
        whole = _get(client, "/api/sessions/story/messages?limit=2000")["items"]
        paged: list[dict[str, Any]] = []
        after = -1
        while True:
            page = _get(client, f"/api/sessions/story/messages?after={after}&limit=3")
            paged += page["items"]
            if page["next"] is None:
                break
            after = page["next"]
    assert paged == whole
    ends = [item for item in whole if item["kind"] == "turn_end"]
    assert [end["reason"] for end in ends] == ["completed", "error"]
    assert "audit hook crashed" in ends[1]["error"]["message"]
    codes = [item["code"] for item in whole if item["kind"] == "tool_result"][-2:]
    assert codes == ["TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED"]


def _huge_session(store: SessionStore, size: int) -> None:
    from duraloop.log import Session

    session = Session("huge")
    writer = store.open_writer(session)
    session.append("turn/start", {"turn": 1})
    session.append(
        "user/message",
        {
            "id": "m1",
            "role": "user",
            "content": [{"type": "text", "text": "x" * size}],
            "source": {"kind": "user"},
        },
        surface_op="append",
    )
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    writer.close()


def test_a_huge_string_is_cut_with_a_marker(tmp_path: Path) -> None:
    store = MemoryStore()
    _huge_session(store, 250_000)
    with serve(create_app(store, token=TOKEN)) as client:
        events = _get(client, "/api/sessions/huge/events")["events"]
        items = _get(client, "/api/sessions/huge/messages")["items"]
        rows = _get(client, "/api/sessions")["sessions"]
    event = next(event for event in events if event["type"] == "user/message")
    item = next(item for item in items if item["kind"] == "user")
    text = event["data"]["content"][0]["text"]
    assert text == "x" * 100_000 + "…[cut 150000 chars]"
    assert item["text"] == text
    assert rows[0]["title"] == "x" * 200


def test_an_unknown_session_is_404(story: JsonlStore) -> None:
    with serve(create_app(story, token=TOKEN)) as client:
        for path in ("", "/events", "/messages", "/stream"):
            answer = client.get(f"/api/sessions/nope{path}", headers=auth())
            assert answer.status_code == 404, path
            assert "nope" in answer.json()["error"]


def test_the_summary_is_folded_once_per_revision(story: JsonlStore) -> None:
    reads: list[str] = []
    scan = story.scan

    def counting(session_id: str) -> tuple[Any, list[Event]]:
        reads.append(session_id)
        return scan(session_id)

    story.scan = counting  # type: ignore[method-assign]
    with serve(create_app(story, token=TOKEN)) as client:
        first = _get(client, "/api/sessions/story")
        _get(client, "/api/sessions/story/events")
        _get(client, "/api/sessions/story/messages")
        again = _get(client, "/api/sessions/story")
    assert reads == ["story"]
    assert first == again
