"""The documents in `docs/` name only paths and anchors that exist.

A module path in a document (`log/_event.py` under `src/duraloop/`, `src/duraloop/...`,
`duraloop/...py`, `tests/...py`) must name a file that exists (a `*` matches as a glob, for
`llm/_openai*.py`). A relative markdown link between documents (`loop.md#steps`,
`#steps`) and a `docs/<name>.md#<anchor>` citation in `src` or `tests` must name an existing
document and, with an anchor, one of its headings by GitHub's slug rule: lowercase, every
character but letters, digits, spaces, `-` and `_` dropped, spaces turned into `-`, and a
repeated heading suffixed `-1`, `-2`, ...
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DOC_FILES = sorted(DOCS.glob("*.md"))
PACKAGES = ("cli", "llm", "log", "loop", "store", "telemetry", "testing", "tools")
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(
    r"^(?:src/duraloop/|duraloop/|tests/|(?:"
    + "|".join(PACKAGES)
    + r")/)[\w*./-]*\.py(?:::(\w+))?$"
)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_CITATION = re.compile(r"docs/([\w-]+\.md)(?:#([\w-]+))?")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def slug(heading: str) -> str:
    """GitHub's anchor for a heading text: lowercase, punctuation dropped, spaces to `-`."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of one markdown file (fenced code skipped, repeats numbered)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line)
        if match is None:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def _resolve(name: str) -> list[Path]:
    if name.startswith(("src/", "tests/")):
        pattern = name
    elif name.startswith("duraloop/"):
        pattern = f"src/{name}"
    else:
        pattern = f"src/duraloop/{name}"
    if "*" in pattern:
        return sorted(ROOT.glob(pattern))
    return [ROOT / pattern] if (ROOT / pattern).is_file() else []


def _doc_lines(path: Path) -> list[tuple[int, str]]:
    lines: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def _check_target(where: str, doc: Path, anchor: str | None) -> list[str]:
    if not doc.is_file():
        return [f"{where}: {_rel(doc)} does not exist"]
    if anchor and anchor not in anchors(doc):
        return [f"{where}: {_rel(doc)} has no heading #{anchor}"]
    return []


def test_the_docs_exist() -> None:
    assert DOC_FILES, "no docs/*.md found"


@pytest.mark.parametrize("doc", DOC_FILES, ids=lambda p: p.name)
def test_every_module_path_in_a_doc_exists(doc: Path) -> None:
    missing: list[str] = []
    for number, line in _doc_lines(doc):
        for name in _CODE_SPAN.findall(line):
            match = _PATH.match(name)
            if match is None:
                continue
            files = _resolve(name.partition("::")[0])
            test = match.group(1)
            if not files:
                missing.append(f"{_rel(doc)}:{number}: `{name}`")
            elif test and not re.search(rf"^(async )?def {test}\(", files[0].read_text(), re.M):
                missing.append(f"{_rel(doc)}:{number}: `{name}` (no such test function)")
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)


@pytest.mark.parametrize("doc", DOC_FILES, ids=lambda p: p.name)
def test_every_relative_link_in_a_doc_resolves(doc: Path) -> None:
    broken: list[str] = []
    for number, line in _doc_lines(doc):
        for target in _LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # https:, mailto: and the like
            file, _, anchor = target.partition("#")
            path = doc if not file else (doc.parent / file).resolve()
            if file and not file.endswith(".md"):
                if not path.exists():
                    broken.append(f"{_rel(doc)}:{number}: {target} does not exist")
                continue
            broken += _check_target(f"{_rel(doc)}:{number}: ({target})", path, anchor or None)
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_every_docs_citation_in_the_code_resolves() -> None:
    broken: list[str] = []
    for path in sorted([*(ROOT / "src").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]):
        text = path.read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), 1):
            for name, anchor in _CITATION.findall(line):
                where = f"{_rel(path)}:{number}: docs/{name}{'#' + anchor if anchor else ''}"
                broken += _check_target(where, DOCS / name, anchor or None)
    assert not broken, "citations that do not resolve:\n" + "\n".join(broken)


def test_slug_follows_github() -> None:
    assert slug("Loop behaviour cases") == "loop-behaviour-cases"
    assert slug("The `request_error` hook (B35)") == "the-request_error-hook-b35"
    assert slug("Send and cancel") == "send-and-cancel"
