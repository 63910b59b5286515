"""STYLE D1, D2, D3, D4 and D6 as cheap static checks over `src/duraloop`.

These rules are the kind a review forgets: module size (at most 400 lines, every module, no
exception), banned module names, the purity of `log/` (no I/O or concurrency imports, no
`async def`), banned spellings, and logic-free `__init__.py` files. Each check walks the source tree (AST where syntax matters), so a
violation names the file and line.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "duraloop"
MODULES = sorted(SRC.rglob("*.py"))
LOG_MODULES = sorted((SRC / "log").rglob("*.py"))
BANNED_MODULE_NAMES = {"utils", "helpers", "common", "misc"}
BANNED_LOG_IMPORTS = {
    "anyio",
    "asyncio",
    "io",
    "os",
    "socket",
    "sqlite3",
    "psycopg",
    "openai",
    "anthropic",
}
BANNED_TERMS = ("canceled", "canceling", "max_turns")
WIRE_SPELLING_MARK = "# dsh wire spelling"
"""Marks the one line of `log/_vocabulary.py` defining a dsh wire value spelled with a banned
term (`agent/inbox/spliced` outcome "canceled"); wire strings are defined once (STYLE D7)."""
SIZE_LIMIT_LINES = 400
"""The most lines any module in `src/` may have (no `Size:` exception)."""


def _rel(path: Path) -> str:
    return str(path.relative_to(SRC.parent))


def test_source_tree_is_found() -> None:
    assert SRC / "log" / "_session.py" in MODULES


@pytest.mark.parametrize("path", MODULES, ids=_rel)
def test_module_size(path: Path) -> None:
    """No module in `src/` is over `SIZE_LIMIT_LINES` lines: there is no exception."""
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= SIZE_LIMIT_LINES, (
        f"{_rel(path)} has {lines} lines (> {SIZE_LIMIT_LINES}); split it along a concept seam"
    )


def test_no_banned_module_names() -> None:
    offenders = [_rel(p) for p in MODULES if p.stem.lstrip("_") in BANNED_MODULE_NAMES] + [
        _rel(p) for p in SRC.rglob("*") if p.is_dir() and p.name.lstrip("_") in BANNED_MODULE_NAMES
    ]
    assert offenders == []


def _imported_roots(tree: ast.AST) -> list[tuple[str, int]]:
    roots: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots += [(alias.name.split(".")[0], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.append((node.module.split(".")[0], node.lineno))
    return roots


@pytest.mark.parametrize("path", LOG_MODULES, ids=_rel)
def test_log_layer_is_pure(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad_imports = [
        f"{name} (line {line})"
        for name, line in _imported_roots(tree)
        if name in BANNED_LOG_IMPORTS
    ]
    assert bad_imports == [], f"{_rel(path)} imports I/O or concurrency modules"
    upward = [
        f"{node.module} (line {node.lineno})"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (
            (
                node.level == 0
                and (node.module or "").startswith("duraloop.")
                and not (node.module or "").startswith(("duraloop.log", "duraloop.errors"))
            )
            or (node.level >= 2 and node.module not in (None, "errors"))
        )
    ]
    assert upward == [], f"{_rel(path)} imports from outside log/"
    async_defs = [
        n.lineno for n in ast.walk(tree) if isinstance(n, ast.AsyncFunctionDef | ast.Await)
    ]
    assert async_defs == [], f"{_rel(path)} has async code at lines {async_defs}"


def test_no_banned_terms_in_src() -> None:
    pattern = re.compile("|".join(BANNED_TERMS), re.IGNORECASE)
    hits = [
        f"{_rel(path)}:{number}: {line.strip()}"
        for path in MODULES
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
        and not (path.name == "_vocabulary.py" and line.rstrip().endswith(WIRE_SPELLING_MARK))
    ]
    assert hits == []


@pytest.mark.parametrize("path", sorted(SRC.rglob("__init__.py")), ids=_rel)
def test_init_modules_hold_only_imports_docstring_and_all(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    offenders = []
    for index, node in enumerate(tree.body):
        if index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the module docstring
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if all(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                continue
        offenders.append(f"line {node.lineno}: {ast.dump(node)[:60]}")
    assert offenders == [], f"{_rel(path)} has logic"
