"""Fixtures of the browser tests: Chromium (one per module), a page, a view server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ._support import CHROMIUM, ViewServer, require_browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's headless Chromium under Playwright (skips, or fails under CI=true, without).

    Module-scoped, not session-scoped: Playwright's sync API keeps an event loop of its own
    in the main thread, stopped before the next module's (possibly async) tests run.
    """
    require_browser()
    from playwright.sync_api import sync_playwright

    manager = sync_playwright()
    playwright = manager.start()
    try:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
        )
        try:
            yield chromium
        finally:
            chromium.close()
    finally:
        manager.__exit__(None, None, None)


@pytest.fixture
def page(browser: Any, view: ViewServer) -> Iterator[Any]:
    """A fresh page (1280×900), closed before the server stops; JavaScript errors on it fail
    the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield tab
        assert errors == [], f"JavaScript errors on the page: {errors}"
    finally:
        context.close()


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    """The JSONL store the view server reads."""
    return tmp_path / "sessions"


@pytest.fixture
def view(store_root: Path) -> Iterator[ViewServer]:
    """The real view server over `store_root`, on a free loopback port."""
    server = ViewServer(store_root)
    store_root.mkdir(parents=True, exist_ok=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()
