"""The pages' JavaScript never turns data into HTML: no innerHTML and co. (needs no browser).

Every string from the API is untrusted (model and tool output): the static JS builds DOM
with textContent / createTextNode / data-only attributes, and builds links only from session
ids on a fixed path (`sessionHref`).
"""

from __future__ import annotations

import re
from pathlib import Path

STATIC = Path(__file__).resolve().parents[2] / "src" / "duraloop" / "view" / "static"
FORBIDDEN = re.compile(
    r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|createContextualFragment"
    r"|DOMParser|\beval\s*\(|new\s+Function|setAttribute\(\s*[\"'](?:on|href|src|style)"
    r"|\.srcdoc\b|javascript:"
)


def _scripts() -> list[Path]:
    return sorted(STATIC.glob("*.js"))


def test_the_static_js_uses_no_html_sinks() -> None:
    scripts = _scripts()
    assert {p.name for p in scripts} >= {"common.js", "sessions.js", "session.js"}
    found = [
        f"{path.name}:{number}: {line.strip()}"
        for path in scripts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if FORBIDDEN.search(line)
    ]
    assert found == [], "HTML sinks in the static JS:\n" + "\n".join(found)


def test_links_are_set_only_by_the_session_link_helpers() -> None:
    href_sets = [
        f"{path.name}:{number}: {line.strip()}"
        for path in _scripts()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\.href\s*=", line)
    ]
    allowed = {
        "link.href = sessionHref(id);",
        'document.getElementById("home").href = indexHref();',
    }
    assert href_sets, "the pages link sessions somewhere"
    assert all(entry.split(": ", 1)[1] in allowed for entry in href_sets), href_sets


def test_the_pages_load_only_their_own_scripts_and_styles() -> None:
    for page in ("index.html", "session.html"):
        html = (STATIC / page).read_text(encoding="utf-8")
        sources = re.findall(r"(?:src|href)=\"([^\"]+)\"", html)
        assert all(s.startswith("/") or s == "data:," for s in sources), (page, sources)
        assert not re.search(r"<script(?![^>]*\bsrc=)", html), f"inline script in {page}"
        assert not re.search(r"\son[a-z]+=", html), f"inline handler in {page}"
        assert "style=" not in html, f"inline style in {page}"
