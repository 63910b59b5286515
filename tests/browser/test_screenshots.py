"""The README's screenshots of the two pages, taken by this test's own run.

With `DURALOOP_SCREENSHOTS=1` they are written to docs/images/view-sessions.png and
docs/images/view-session.png (commit them); otherwise to the test's temporary directory.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ._sessions import build_parallel_and_recovered, build_paused, build_simple
from ._support import ViewServer, in_thread
from .test_pages import damage

IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
PNG = b"\x89PNG\r\n\x1a\n"


def test_screenshots_of_the_sessions_page_and_a_session_page(
    page: Any, view: ViewServer, store_root: Path, tmp_path: Path
) -> None:
    target = IMAGES if os.environ.get("DURALOOP_SCREENSHOTS") == "1" else tmp_path
    target.mkdir(parents=True, exist_ok=True)
    in_thread(
        lambda: build_simple(store_root, tmp_path / "a", "What changed since v1.2?", "Two fixes.")
    )
    in_thread(lambda: build_paused(store_root, tmp_path / "b", []))
    broken = in_thread(lambda: build_simple(store_root, tmp_path / "d", "Summarize the log."))
    damage(store_root, broken)
    session_id, _fork = in_thread(lambda: build_parallel_and_recovered(store_root, tmp_path / "c"))

    page.set_viewport_size({"width": 1280, "height": 420})
    page.goto(view.url("/"))
    page.wait_for_selector("body[data-ready='1']")
    sessions_png = target / "view-sessions.png"
    page.screenshot(path=str(sessions_png))

    page.set_viewport_size({"width": 1280, "height": 860})
    page.goto(view.url(f"/s/{session_id}"))
    page.wait_for_selector("body[data-ready='1']")
    page.locator(".bar.call.recovery-unknown").click()
    page.locator("#raw-json", has_text="TOOL_OUTCOME_UNKNOWN").wait_for()
    session_png = target / "view-session.png"
    page.screenshot(path=str(session_png))

    for png in (sessions_png, session_png):
        assert png.read_bytes()[:8] == PNG and png.stat().st_size > 10_000
