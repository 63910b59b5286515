"""style rule D1, D2, D3, D4, D6 and D7 as cheap static checks over `src/duraloop`.

These rules are the kind a review forgets: module size (at most 400 lines, every module, no
exception), banned module names, the purity of `log/` (no I/O or concurrency imports, no
`async def`), banned spellings, logic-free `__init__.py` files, and wire names spelled only in
`log/vocabulary.py`. Each check walks the source tree (AST where syntax matters), so a
violation names the file and line.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from duraloop.log import vocabulary

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
"""Marks the one line of `log/vocabulary.py` defining a dsh wire value spelled with a banned
term (`agent/inbox/spliced` outcome "canceled"); wire strings are defined once (style rule D7)."""
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
            # `duraloop._lazy`: the faces' lazy re-exports (importlib only, no I/O)
            or (node.level >= 2 and node.module not in (None, "errors", "_lazy"))
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
        and not (path.name == "vocabulary.py" and line.rstrip().endswith(WIRE_SPELLING_MARK))
    ]
    assert hits == []


def _type_checking_test(node: ast.expr) -> bool:
    """Whether `node` is `_lazy.TYPE_CHECKING` or `not _lazy.TYPE_CHECKING`."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        node = node.operand
    return isinstance(node, ast.Attribute) and node.attr == "TYPE_CHECKING"


def _lazy_exports_call(node: ast.stmt) -> bool:
    """Whether `node` is `__getattr__, __dir__ = _lazy.lazy_exports(__name__, {"N": "._x"})`."""
    if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
        return False
    targets = node.targets[0]
    call = node.value
    return (
        isinstance(targets, ast.Tuple)
        and [t.id for t in targets.elts if isinstance(t, ast.Name)] == ["__getattr__", "__dir__"]
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "lazy_exports"
        and len(call.args) == 2
        and isinstance(call.args[1], ast.Dict)
        and all(
            isinstance(part, ast.Constant) for part in [*call.args[1].keys, *call.args[1].values]
        )
        and all(
            keyword.arg == "submodules"
            and isinstance(keyword.value, ast.Tuple)
            and all(isinstance(part, ast.Constant) for part in keyword.value.elts)
            for keyword in call.keywords
        )
    )


@pytest.mark.parametrize("path", sorted(SRC.rglob("__init__.py")), ids=_rel)
def test_init_modules_hold_only_imports_docstring_and_all(path: Path) -> None:
    """Imports, `__all__`, and the lazy re-exports (PEP 562, docs/architecture.md#start-up)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    offenders = []
    for index, node in enumerate(tree.body):
        if index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the module docstring
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.If) and _type_checking_test(node.test) and not node.orelse:
            body = node.body
            if all(isinstance(n, ast.ImportFrom) for n in body) or (
                len(body) == 1 and _lazy_exports_call(body[0])
            ):
                continue
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if all(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                continue
        offenders.append(f"line {node.lineno}: {ast.dump(node)[:60]}")
    assert offenders == [], f"{_rel(path)} has logic"


WIRE_NAME = re.compile(r"[a-z]+(?:[-/][a-z]+)+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*")
"""The shape of a vocabulary value that is unmistakably a wire name: an event type, a block,
chunk or finish kind with a `-` or `/` (`tool/call`, `tool-call`, `max-tokens`), or a code
(`TOOL_TIMEOUT`, `UNKNOWN`). One-word kinds (`text`, `stop`, `error`) are ordinary words too."""

WIRE_LITERAL_ALLOWED = {
    # errors.py sits below log/ (log imports it), so it cannot import the vocabulary.
    ("duraloop/errors.py", "EMPTY_RESPONSE"),
    ("duraloop/errors.py", "RATE_LIMIT"),
    ("duraloop/errors.py", "SERVER"),
    ("duraloop/errors.py", "TIMEOUT"),
    ("duraloop/errors.py", "TRANSPORT"),
    ("duraloop/errors.py", "UNKNOWN"),
    # Anthropic's own protocol spells its text block `{"type": "text"}` too: a request block.
    ("duraloop/llm/_anthropic/_convert.py", "text"),
    ("duraloop/llm/_anthropic/_request.py", "text"),
    # The CLI flag `--max-tool-calls-per-turn` spells the word as the finish reason does.
    ("duraloop/cli/_options.py", "tool-calls"),
}
"""(module, value) pairs whose wire literal must stay, each with its reason above."""


def _vocabulary_wire_names() -> set[str]:
    values: set[str] = set()
    for name, value in vars(vocabulary).items():
        if name.startswith("_") or not name.isupper():
            continue
        items = value if isinstance(value, frozenset | tuple) else (value,)
        values.update(item for item in items if isinstance(item, str))
    return {value for value in values if WIRE_NAME.fullmatch(value)}


def _literal_constants(tree: ast.AST) -> list[ast.Constant]:
    """Every string constant of `tree` except docstrings and `Literal[...]` members."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skipped.add(id(node.value))  # a docstring (module, class, function or attribute)
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == "Literal"
        ):
            # a type's members: `Literal[...]` takes no constants; the values are typed there
            skipped.update(id(member) for member in ast.walk(node.slice))
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skipped
    ]


KEYED_WIRE_NAMES = {
    vocabulary.BLOCK_TEXT,
    vocabulary.BLOCK_REASONING,
    vocabulary.BLOCK_IMAGE,
    vocabulary.USAGE,
    vocabulary.FINISH,
}
"""One-word block and chunk types: wire names where they are a block's or chunk's `type`."""
TYPE_KEYS = {"type", "blockType", "block_type"}


def _type_of(node: ast.expr) -> bool:
    """Whether `node` reads a type: `x["type"]`, `x.get("type")`, `block_type`, `x.block_type`."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return node.slice.value in TYPE_KEYS
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        first = node.args[0]
        return (
            node.func.attr == "get" and isinstance(first, ast.Constant) and first.value in TYPE_KEYS
        )
    if isinstance(node, ast.Attribute):
        return node.attr in TYPE_KEYS
    return isinstance(node, ast.Name) and node.id in TYPE_KEYS


def _keyed_type_constants(tree: ast.AST) -> list[ast.Constant]:
    """String constants given as a type: a `"type"` dict value, or compared with a type."""
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            found.extend(
                value
                for key, value in zip(node.keys, node.values, strict=True)
                if isinstance(key, ast.Constant) and key.value in TYPE_KEYS
            )
        elif isinstance(node, ast.Compare) and _type_of(node.left):
            for right in node.comparators:
                found.extend(right.elts if isinstance(right, ast.Tuple | ast.Set) else [right])
    return [
        node for node in found if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def test_vocabulary_wire_names_are_found() -> None:
    names = _vocabulary_wire_names()
    assert {"tool/call", "tool-call", "tool-result", "TOOL_TIMEOUT", "UNKNOWN"} <= names
    assert "text" not in names


def test_wire_names_are_spelled_only_in_the_vocabulary() -> None:
    """style rule D7: every wire name is a constant of `duraloop.log.vocabulary`, spelled once."""
    names = _vocabulary_wire_names()
    home = SRC / "log" / "vocabulary.py"
    hits = [
        f"{_rel(path)}:{node.lineno}: {node.value!r}"
        for path in MODULES
        if path != home
        for node in _literal_constants(ast.parse(path.read_text(encoding="utf-8")))
        if node.value in names and (_rel(path), node.value) not in WIRE_LITERAL_ALLOWED
    ]
    hits += [
        f"{_rel(path)}:{node.lineno}: {node.value!r}"
        for path in MODULES
        if path != home
        for node in _keyed_type_constants(ast.parse(path.read_text(encoding="utf-8")))
        if node.value in KEYED_WIRE_NAMES and (_rel(path), node.value) not in WIRE_LITERAL_ALLOWED
    ]
    assert hits == []


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    package = list(path.relative_to(SRC.parent).with_suffix("").parts)
    package = package[:-1]  # a module's package; an __init__'s package is its folder
    if node.level:
        package = package[: len(package) - (node.level - 1)]
        return ".".join([*package, *([node.module] if node.module else [])])
    return node.module or ""


def _top(parts: list[str]) -> str:
    return parts[1] if len(parts) > 1 else ""


@pytest.mark.parametrize("path", MODULES, ids=_rel)
def test_cross_package_imports_go_through_the_package_face(path: Path) -> None:
    """`from ..<package>._<module> import X` across packages is refused (issue 10, point 3).

    A package's private modules are its own; another package imports the names its
    `__init__` re-exports (or a public module such as `duraloop.log.vocabulary`).
    """
    own = list(path.relative_to(SRC.parent).with_suffix("").parts)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    offenders = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        target = _absolute(path, node).split(".")
        if target[0] != "duraloop" or _top(target) == _top(own) and len(own) > 2:
            continue
        if any(part.startswith("_") for part in target[2:]):
            offenders.append(f"line {node.lineno}: {'.'.join(target)}")
    assert offenders == [], f"{_rel(path)} imports another package's private module"
