"""A very long tool output is shown by its start (40 lines / 4,000 characters) with a
"show all (N more characters)" button that reveals the rest, as text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from duraloop.loop import start_session

from ._sessions import XSS_SCRIPT, call, echo_tool, setup
from ._support import ViewServer, in_thread

LONG = "\n".join(f"line {number} {XSS_SCRIPT}" for number in range(2_000))


def _build(root: Path, cwd: Path) -> str:
    script: list[dict[str, Any]] = [
        {"text": "echoing", "tool_calls": [call("long-1", "echo", text=LONG)]},
        {"text": "echoed"},
    ]

    async def run() -> str:
        with start_session(setup(root, cwd, script, [echo_tool()])) as loop:
            await loop.run_turn("echo a long text")
            return loop.session.id

    return anyio.run(run)


def test_a_long_tool_output_shows_its_start_and_a_button_reveals_all_of_it(
    page: Any, view: ViewServer, store_root: Path, tmp_path: Path
) -> None:
    session_id = in_thread(lambda: _build(store_root, tmp_path / "ws"))
    page.goto(view.url(f"/s/{session_id}"))
    page.wait_for_selector("body[data-ready='1']")
    result = page.locator("#conversation .item-tool_result").first
    result.wait_for()
    text = result.locator("pre.result-text")
    shown = text.text_content() or ""
    assert LONG.startswith(shown) and shown.count("\n") == 39  # 40 lines
    button = result.locator("button.show-all")
    assert button.inner_text() == f"show all ({len(LONG) - len(shown):,} more characters)"
    button.click()
    assert text.text_content() == LONG  # all of it, as text
    assert page.locator("#raw-panel").is_hidden()  # the button does not open the raw event
    assert page.evaluate("window.__xss") is None
    button.click()
    assert text.text_content() == shown and button.inner_text().startswith("show all")
