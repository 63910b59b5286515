"""A 100k-event session: the page renders its first screen from one summary and the first
conversation page, then loads more on demand (never 100k DOM nodes at once).

The time to the first render is printed (`-s` shows it), not asserted: tests never assert
wall-clock times.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ._sessions import build_large
from ._support import ViewServer, in_thread

EVENTS = 100_000


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, int]]:
    """A JSONL store holding one session of at least 100k events."""
    root = tmp_path_factory.mktemp("large")
    store_root = root / "sessions"
    session_id, count = in_thread(lambda: build_large(store_root, root / "ws", EVENTS), timeout=110)
    yield store_root, session_id, count


@pytest.mark.timeout(300)
def test_a_100k_event_session_renders_its_first_page_and_pages_the_rest(
    browser: Any, large: tuple[Path, str, int]
) -> None:
    store_root, session_id, count = large
    assert count >= EVENTS
    server = ViewServer(store_root).start()
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(60_000)
    page = context.new_page()
    try:
        started = time.perf_counter()
        page.goto(server.url(f"/s/{session_id}"))
        page.locator("#conversation .item").first.wait_for()
        page.locator("#timeline .turn").first.wait_for()
        first_render = time.perf_counter() - started
        page.wait_for_selector("body[data-ready='1']")
        ready = time.perf_counter() - started
        again = time.perf_counter()
        page.reload()
        page.locator("#conversation .item").first.wait_for()
        warm = time.perf_counter() - again
        page.wait_for_selector("body[data-ready='1']")
        print(
            f"\n100k-event session ({count} events): first render {first_render:.2f} s "
            f"(ready {ready:.2f} s; the server reads the log cold), "
            f"after a reload {warm:.2f} s (the server's copy warm)"
        )
        shown = page.locator("#conversation .item").count()
        assert 0 < shown <= 500, "the conversation is paged, not rendered whole"
        assert page.locator("#timeline .turn").count() <= 100
        assert page.locator("#event-count").inner_text() == f"{count:,}"

        page.locator("#load-more").click()
        page.locator(f"#conversation .item >> nth={shown}").wait_for()
        after_click = page.locator("#conversation .item").count()
        assert after_click > shown
        page.locator("#sentinel").scroll_into_view_if_needed()
        page.locator(f"#conversation .item >> nth={after_click}").wait_for()
        assert page.locator("#conversation .item").count() > after_click

        nodes = page.evaluate("document.getElementsByTagName('*').length")
        assert nodes < 20_000, f"{nodes} DOM nodes for a paged view"
    finally:
        context.close()
        server.stop()
