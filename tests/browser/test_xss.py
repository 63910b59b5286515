"""Model and tool output is untrusted: the pages render it as text, never as HTML.

A prompt, a model text, its reasoning, a tool call's arguments and a tool result each hold
`<script>`, `<img onerror>` and a markdown `javascript:` link; after opening and clicking
everything, no script ran (`window.__xss` stays undefined), no element or link came of
them, and the payloads are shown literally.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._sessions import XSS_IMG, XSS_LINK, XSS_SCRIPT, build_xss
from ._support import ViewServer, in_thread


def _assert_inert(page: Any) -> None:
    assert page.evaluate("typeof window.__xss") == "undefined", "a payload ran"
    assert page.locator("img").count() == 0, "a payload became an element"
    assert page.locator("script:not([src])").count() == 0
    assert page.locator("a[href^='javascript:' i]").count() == 0, "a payload became a link"
    hrefs = page.eval_on_selector_all("a", "links => links.map(link => link.getAttribute('href'))")
    assert all(h.startswith("/") for h in hrefs), hrefs


def test_payloads_in_model_and_tool_output_stay_text_on_both_pages(
    page: Any, view: ViewServer, store_root: Path, tmp_path: Path
) -> None:
    session_id = in_thread(lambda: build_xss(store_root, tmp_path / "ws"))

    page.goto(view.url("/"))
    page.wait_for_selector("body[data-ready='1']")
    title = page.locator(f"#rows tr[data-id='{session_id}'] .title").inner_text()
    assert XSS_SCRIPT in title
    _assert_inert(page)

    page.goto(view.url(f"/s/{session_id}"))
    page.wait_for_selector("body[data-ready='1']")
    conversation = page.locator("#conversation")
    for details in conversation.locator("details.reasoning").all():
        details.locator("summary").click()
    for item in conversation.locator(".item").all():
        item.click()
        page.locator("#raw-json", has_text='"seq"').wait_for()
    for bar in page.locator(".timeline .clickable, .timeline .raw-button").all():
        bar.click()
    _assert_inert(page)

    user = conversation.locator(".item-user").first.inner_text()
    assert f"{XSS_SCRIPT} {XSS_IMG} {XSS_LINK}" in user
    assistant = conversation.locator(".item-assistant").first
    assert XSS_IMG in assistant.locator(".text").inner_text()
    assert XSS_LINK in assistant.locator(".reasoning-text").inner_text()
    assert XSS_SCRIPT in assistant.locator(".tool-call .arguments").inner_text()
    result = conversation.locator(".item-tool_result").first.inner_text()
    assert XSS_SCRIPT in result and XSS_IMG in result and XSS_LINK in result
    assert f"Model says: {XSS_SCRIPT}" in conversation.locator(".item-assistant").last.inner_text()
    assert page.get_by_text(XSS_LINK, exact=False).count() >= 4
    _assert_inert(page)
