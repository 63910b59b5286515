"""The sessions page and the session page, in headless Chromium over a real view server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._sessions import build_parallel_and_recovered, build_simple
from ._support import ViewServer, in_thread


def damage(root: Path, session_id: str) -> None:
    """Break a middle line of a stored JSONL log (not a torn tail: damage load refuses)."""
    (path,) = root.rglob(f"{session_id}/session.jsonl")
    lines = path.read_bytes().splitlines(keepends=True)
    lines[3] = b'{"type":"user/message","seq":2,"time": broken\n'
    path.write_bytes(b"".join(lines))


def _ready(page: Any, server: ViewServer, path: str) -> None:
    page.goto(server.url(path))
    page.wait_for_selector("body[data-ready='1']")


def _overlap(a: dict[str, float], b: dict[str, float]) -> float:
    """How far two boxes overlap on the x axis, in pixels (<= 0: they do not)."""
    return min(a["x"] + a["width"], b["x"] + b["width"]) - max(a["x"], b["x"])


def test_sessions_page_lists_every_session_filters_by_state_and_searches(
    page: Any, view: ViewServer, store_root: Path, tmp_path: Path
) -> None:
    parent, fork = in_thread(lambda: build_parallel_and_recovered(store_root, tmp_path / "ws"))
    hello = in_thread(lambda: build_simple(store_root, tmp_path / "ws2", prompt="Find the zebra."))
    broken = in_thread(lambda: build_simple(store_root, tmp_path / "ws3"))
    damage(store_root, broken)
    _ready(page, view, "/")

    rows = page.locator("#rows tr.row")
    assert rows.count() == 4
    ids = {rows.nth(i).get_attribute("data-id") for i in range(4)}
    assert ids == {parent, fork, hello, broken}
    link = page.locator(f"#rows tr[data-id='{parent}'] td.id a.session-link").first
    assert link.get_attribute("href") == f"/s/{parent}?token={view.token}"
    row = page.locator(f"#rows tr[data-id='{parent}']")
    assert row.locator("td.reason").inner_text() == "error"
    assert "2" == row.locator("td.num").first.inner_text()  # turns
    fork_row = page.locator(f"#rows tr[data-id='{fork}']")
    assert parent in fork_row.locator(".parent").inner_text()

    damaged = page.locator(f"#rows tr[data-id='{broken}']")
    assert damaged.get_attribute("data-state") == "damaged"
    assert damaged.locator(".damaged-reason").inner_text().strip() != ""

    page.select_option("#state-filter", "damaged")
    assert page.locator("#rows tr.row").count() == 1
    assert page.locator("#rows tr.row").get_attribute("data-id") == broken
    page.select_option("#state-filter", "")
    page.fill("#search", "zebra")
    assert page.locator("#rows tr.row").count() == 1
    assert page.locator("#rows tr.row").get_attribute("data-id") == hello
    page.fill("#search", parent[:13])
    assert {r.get_attribute("data-id") for r in page.locator("#rows tr.row").all()} == {parent}

    page.fill("#search", "")
    with page.expect_navigation():
        page.locator(f"#rows tr[data-id='{hello}'] td.id a.session-link").click()
    page.wait_for_selector("body[data-ready='1']")
    assert page.url == view.url(f"/s/{hello}")
    assert page.locator("#session-id").inner_text() == hello


def test_session_page_timeline_shows_parallel_overlap_recovery_and_the_failure(
    page: Any, view: ViewServer, store_root: Path, tmp_path: Path
) -> None:
    session_id, fork = in_thread(lambda: build_parallel_and_recovered(store_root, tmp_path / "ws"))
    _ready(page, view, f"/s/{session_id}")

    header = page.locator("#header")
    assert page.locator("#session-id").inner_text() == session_id
    assert header.locator(f"a.session-link[data-session='{fork}']").count() == 1
    assert "closed" in page.locator("#session-state").inner_text()

    turn1 = page.locator(".turn[data-turn='1']")
    assert turn1.get_attribute("open") is not None
    bars = turn1.locator(".bar.call")
    assert bars.count() == 3
    boxes = [bars.nth(i).bounding_box() for i in range(3)]
    assert all(box is not None for box in boxes)
    for i in range(3):
        for j in range(i + 1, 3):
            assert _overlap(boxes[i], boxes[j]) > 10, (boxes[i], boxes[j])
    step1 = turn1.locator(".step[data-step='1']")
    assert "has-retries" in (step1.locator(".bar.request").get_attribute("class") or "")
    assert step1.locator(".tick.retry").count() == 1
    assert "TRANSPORT" in (step1.locator(".tick.retry").get_attribute("title") or "")
    assert step1.locator(".retry-badge").inner_text() == "1 retry"
    request = step1.locator(".bar.request").bounding_box()
    assert request is not None
    assert request["x"] < min(box["x"] for box in boxes)

    turn2 = page.locator(".turn[data-turn='2']")
    assert turn2.get_attribute("open") is not None
    unknown = turn2.locator(".bar.call.recovery-unknown")
    not_started = turn2.locator(".bar.call.recovery-not-started")
    assert unknown.get_attribute("data-call-id") == "stamp-1"
    assert not_started.get_attribute("data-call-id") == "note-1"
    explanations = turn2.locator(".explanation")
    assert explanations.count() == 2
    unknown_text = explanations.filter(has_text="TOOL_OUTCOME_UNKNOWN").inner_text()
    assert "stamp-1" in unknown_text and "may or may not have run" in unknown_text
    not_started_text = explanations.filter(has_text="TOOL_NOT_STARTED").inner_text()
    assert "note-1" in not_started_text
    failure = turn2.locator(".step[data-step='1'] .failure")
    assert "failed at step 1" in failure.inner_text()
    assert "audit hook crashed" in failure.inner_text()
    assert "error" in turn2.locator(".turn-head .reason").inner_text()
    assert "tokens" in turn2.locator(".turn-head").inner_text()

    unknown.click()
    raw = page.locator("#raw-json")
    page.locator("#raw-json", has_text="stamp-1").wait_for()
    assert '"tool/result"' in raw.inner_text()
    assert "TOOL_OUTCOME_UNKNOWN" in raw.inner_text()

    with page.expect_navigation():
        page.locator(f"#header a.session-link[data-session='{fork}']").click()
    page.wait_for_selector("body[data-ready='1']")
    assert page.locator("#session-id").inner_text() == fork
    assert page.locator(f"#header a.session-link[data-session='{session_id}']").count() == 1


def test_conversation_shows_user_assistant_reasoning_collapsed_calls_and_results(
    page: Any, view: ViewServer, store_root: Path, tmp_path: Path
) -> None:
    session_id, _ = in_thread(lambda: build_parallel_and_recovered(store_root, tmp_path / "ws"))
    _ready(page, view, f"/s/{session_id}")

    conversation = page.locator("#conversation")
    assert conversation.locator(".item-user").first.inner_text().endswith("Read the notes.")
    assistant = conversation.locator(".item-assistant").first
    reasoning = assistant.locator("details.reasoning")
    assert reasoning.get_attribute("open") is None
    assert not reasoning.locator(".reasoning-text").is_visible()
    reasoning.locator("summary").click()
    assert reasoning.locator(".reasoning-text").inner_text() == (
        "Three independent reads: run them together."
    )
    calls = assistant.locator(".tool-call")
    assert [calls.nth(i).get_attribute("data-call-id") for i in range(3)] == [
        "read-1",
        "read-2",
        "read-3",
    ]
    results = conversation.locator(".item-tool_result")
    assert "read read-1 ok" in results.first.inner_text()
    unknown = results.filter(has_text="TOOL_OUTCOME_UNKNOWN")
    assert unknown.get_attribute("class") is not None
    assert "is-error" in (unknown.get_attribute("class") or "")
    ended = conversation.locator(".item-turn_end").last
    assert "error" in ended.inner_text() and "audit hook crashed" in ended.inner_text()

    first_user = conversation.locator(".item-user").first
    seq = first_user.get_attribute("data-seq")
    first_user.click()
    page.locator("#raw-json", has_text="user/message").wait_for()
    assert f'"seq": {seq}' in page.locator("#raw-json").inner_text()


def test_a_damaged_session_page_says_why_and_does_not_go_live(
    page: Any, view: ViewServer, store_root: Path, tmp_path: Path
) -> None:
    broken = in_thread(lambda: build_simple(store_root, tmp_path / "ws"))
    damage(store_root, broken)
    _ready(page, view, f"/s/{broken}")
    assert page.locator("#session-state").inner_text() == "damaged"
    assert "damaged: " in page.locator("#header .damaged-reason").inner_text()
    assert page.locator("#live").inner_text() == "not live: the log is damaged"
    page.locator("#conversation-status", has_text="could not load").wait_for()


def test_sessions_page_polls_the_list_so_a_new_session_appears_and_the_search_stays(
    page: Any, view: ViewServer, store_root: Path, tmp_path: Path
) -> None:
    first = in_thread(lambda: build_simple(store_root, tmp_path / "ws", prompt="Find the zebra."))
    _ready(page, view, "/")
    page.fill("#search", "zebra")
    assert page.locator("#rows tr.row").count() == 1
    other = in_thread(lambda: build_simple(store_root, tmp_path / "ws2", prompt="Count the owls."))
    later = in_thread(lambda: build_simple(store_root, tmp_path / "ws3", prompt="A zebra again."))
    page.locator(f"#rows tr[data-id='{later}']").wait_for()  # the next poll (5 s) lists it
    assert page.input_value("#search") == "zebra"
    shown = {row.get_attribute("data-id") for row in page.locator("#rows tr.row").all()}
    assert shown == {first, later} and other not in shown
    assert page.locator("#count").inner_text() == "2 of 3"
