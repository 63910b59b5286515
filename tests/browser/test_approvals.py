"""Approve / Deny from the session page: the decision is recorded as `duraloop approve/deny`
record it (the real `duraloop view` process and its decider), then the turn continues (here
the test continues it, as another process would) and the page shows it live."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from duraloop.store import JsonlStore

from ._sessions import build_paused, continue_paused
from ._support import ViewProcess, in_thread


def _decided(root: Path, session_id: str) -> list[dict[str, Any]]:
    _, events = JsonlStore(root).read(session_id)
    return [dict(event.data) for event in events if event.type == "approval/decided"]


def _open_paused(page: Any, server: ViewProcess, session_id: str) -> Any:
    page.goto(server.page_url(f"/s/{session_id}"))
    page.wait_for_selector("body[data-ready='1']")
    page.wait_for_selector("#live.on")
    assert page.locator("#session-state").inner_text() == "paused"
    ask = page.locator("#approvals .ask[data-call-id='deploy-1']")
    assert ask.locator(".tool-name").inner_text() == "deploy"
    # The paused turn is shown paused (not running), its waiting call marked as such.
    turn = page.locator("#timeline .turn").last
    assert turn.locator(".turn-head .badge.reason").inner_text() == "paused"
    assert "waiting for approval" in turn.locator(".turn-head").inner_text()
    bar = turn.locator(".bar.call.waiting[data-call-id='deploy-1']")
    assert "waiting for approval" in (bar.get_attribute("title") or "")
    return ask


def test_approve_from_the_page_records_the_decision_and_the_turn_continues_live(
    page: Any, store_root: Path, tmp_path: Path
) -> None:
    cwd = tmp_path / "ws"
    runs: list[str] = []
    session_id = in_thread(lambda: build_paused(store_root, cwd, runs))
    server = ViewProcess(store_root)
    try:
        ask = _open_paused(page, server, session_id)
        ask.locator("button.approve").click()
        ask.locator(".ask-status", has_text="decision recorded").wait_for()
        (decided,) = _decided(store_root, session_id)
        assert decided["outcome"] == "allowed-once"
        assert runs == [], "recording a decision runs nothing"
        notice = page.locator("#decision-notice")
        notice.wait_for()
        assert notice.get_attribute("data-continuation") == "resume"
        assert "Approved: recorded" in notice.inner_text()
        assert notice.locator("code.resume-command").inner_text() == (
            f"duraloop resume {session_id}"
        )

        assert in_thread(lambda: continue_paused(store_root, cwd, session_id, runs)) == "completed"
        assert runs == ["deploy-1"]
        conversation = page.locator("#conversation")
        conversation.locator(".item-tool_result", has_text="deployed (deploy-1)").wait_for()
        conversation.locator(".item-assistant", has_text="Deployed and verified.").wait_for()
        page.locator("#approvals").wait_for(state="hidden")
        page.locator("#session-state", has_text="closed").wait_for()
        assert notice.is_visible(), "the notice stays after the ask is gone"
    finally:
        errors = server.stop()
    assert "recorded" in errors


def test_deny_with_feedback_from_the_page_records_the_rejection_and_its_feedback(
    page: Any, store_root: Path, tmp_path: Path
) -> None:
    cwd = tmp_path / "ws"
    runs: list[str] = []
    session_id = in_thread(lambda: build_paused(store_root, cwd, runs))
    server = ViewProcess(store_root)
    try:
        ask = _open_paused(page, server, session_id)
        ask.locator("textarea.feedback").fill("not on a Friday <b>please</b>")
        ask.locator("button.deny").click()
        ask.locator(".ask-status", has_text="denied: decision recorded").wait_for()
        (decided,) = _decided(store_root, session_id)
        assert decided["outcome"] == "rejected"
        assert "not on a Friday <b>please</b>" in str(decided)
        notice = page.locator("#decision-notice")
        notice.wait_for()
        assert "Denied: recorded" in notice.inner_text()
        ask.locator("button.approve").click(force=True)  # disabled: nothing more is sent
        assert len(_decided(store_root, session_id)) == 1

        assert in_thread(lambda: continue_paused(store_root, cwd, session_id, runs)) == "completed"
        assert runs == []
        rejected = page.locator("#conversation .item-tool_result.is-error", has_text="rejected")
        rejected.wait_for()
        assert "not on a Friday <b>please</b>" in rejected.inner_text()
    finally:
        server.stop()
