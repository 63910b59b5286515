"""Live: the session page follows new commits over server-sent events, and a reconnect
(the server stopped and started again) resumes from Last-Event-ID: no event missed or
applied twice."""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path
from typing import Any

from ._sessions import build_simple, last_seq, run_gated_turn, run_text_turns
from ._support import Background, ViewServer, in_thread


def _open(page: Any, server: ViewServer, session_id: str) -> None:
    page.goto(server.url(f"/s/{session_id}"))
    page.wait_for_selector("body[data-ready='1']")
    page.wait_for_selector("#live.on")
    page.evaluate("window.__sameDocument = 1")


def _api(server: ViewServer, path: str) -> Any:
    request = urllib.request.Request(
        f"{server.origin}{path}", headers={"X-Duraloop-Token": server.token}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def _item_seqs(page: Any) -> list[int]:
    return [
        int(seq)
        for seq in page.eval_on_selector_all(
            "#conversation .item", "nodes => nodes.map(node => node.dataset.seq)"
        )
    ]


def test_a_running_session_appears_live_without_a_reload(
    page: Any, view: ViewServer, store_root: Path, tmp_path: Path
) -> None:
    cwd = tmp_path / "ws"
    session_id = in_thread(lambda: build_simple(store_root, cwd))
    _open(page, view, session_id)
    assert page.locator(".turn").count() == 1
    gate = threading.Event()
    turn = Background(lambda: run_gated_turn(store_root, cwd, session_id, gate))
    try:
        conversation = page.locator("#conversation")
        conversation.locator(".item-user", has_text="Go through the gate.").wait_for()
        conversation.locator(".tool-call[data-call-id='gate-1']").wait_for()
        running = page.locator(".turn[data-turn='2'] .bar.call.running[data-call-id='gate-1']")
        running.wait_for()
        assert "running" in page.locator(".turn[data-turn='2'] .turn-head .reason").inner_text()
    finally:
        gate.set()
    assert turn.join() == "completed"
    conversation.locator(".item-tool_result", has_text="the gate opened").wait_for()
    conversation.locator(".item-assistant", has_text="Gate passed.").wait_for()
    page.locator(".turn[data-turn='2'] .turn-head .reason", has_text="completed").wait_for()
    final = last_seq(store_root, session_id)
    page.wait_for_selector(f"body[data-last-seq='{final}']")
    assert page.locator("#event-count").inner_text() == f"{final + 1:,}"
    assert page.evaluate("window.__sameDocument") == 1, "the page reloaded"
    seqs = _item_seqs(page)
    assert len(seqs) == len(set(seqs))
    assert page.locator("#live").inner_text() == "live"


def test_a_reconnect_after_the_server_restarts_misses_no_event_and_repeats_none(
    page: Any, view: ViewServer, store_root: Path, tmp_path: Path
) -> None:
    cwd = tmp_path / "ws"
    session_id = in_thread(lambda: build_simple(store_root, cwd))
    _open(page, view, session_id)
    before = int(page.evaluate("document.body.dataset.lastSeq"))

    view.stop()
    page.wait_for_selector("#live.off")
    # Two turns are written while the server is down, one after it is back.
    in_thread(lambda: run_text_turns(store_root, cwd, session_id, range(1, 3)))
    view.start()  # the same port and token: EventSource reconnects with Last-Event-ID

    page.wait_for_selector("#live.on")
    in_thread(lambda: run_text_turns(store_root, cwd, session_id, range(3, 4)))
    final = last_seq(store_root, session_id)
    assert final > before
    page.wait_for_selector(f"body[data-last-seq='{final}']")
    page.locator("#conversation .item-turn_end[data-turn='4']").wait_for()
    assert page.evaluate("document.body.dataset.gaps") == "0"
    assert page.evaluate("document.body.dataset.repeats") == "0"

    seqs = _item_seqs(page)
    assert len(seqs) == len(set(seqs)), "an item is shown twice"
    items = _api(view, f"/api/sessions/{session_id}/messages?limit=2000")["items"]
    assert seqs == [item["seq"] for item in items]
    for n in (1, 2, 3):
        assert page.locator("#conversation .item-user", has_text=f"Question {n}?").count() == 1
        assert page.locator("#conversation .item-assistant", has_text=f"Answer {n}.").count() == 1
    assert page.locator(".turn").count() == 4
