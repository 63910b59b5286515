"""STYLE D11/D13: one exception tree under `DuraloopError`, every class documented.

Callers catch `DuraloopError` to catch everything duraloop raises, so every exception class
in `duraloop.errors` must derive from it, and nowhere else in `src/` may define an exception
except the listed control-flow signals. The class docstrings say when each is raised.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import duraloop.errors as errors
from duraloop.errors import DuraloopError

SRC = Path(__file__).resolve().parents[1] / "src" / "duraloop"
ERROR_CLASSES = [
    obj for _, obj in sorted(vars(errors).items())
    if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == errors.__name__
]
ALLOWED_SIGNALS = {("tools/_signal.py", "TurnCancelled")}
"""Control-flow signals that are deliberately not errors (STYLE D11)."""


def test_errors_module_defines_exceptions() -> None:
    assert DuraloopError in ERROR_CLASSES
    assert len(ERROR_CLASSES) >= 10


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_error_derives_from_duraloop_error(cls: type[BaseException]) -> None:
    assert issubclass(cls, DuraloopError)


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_error_docstring_says_when_it_is_raised(cls: type[BaseException]) -> None:
    doc = inspect.getdoc(cls) or ""
    assert "Raised" in doc.splitlines()[0] if doc else False, f"{cls.__name__}: {doc!r}"


def test_errors_all_lists_every_error() -> None:
    assert sorted(errors.__all__) == sorted(c.__name__ for c in ERROR_CLASSES)


def _exception_bases(node: ast.ClassDef) -> list[str]:
    names = [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "" for b in node.bases]
    return [n for n in names if n.endswith(("Error", "Exception")) or n in ("BaseException",)]


def test_no_exception_classes_outside_errors_module_except_signals() -> None:
    local_names: dict[str, set[str]] = {}
    offenders: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        rel = str(path.relative_to(SRC))
        if rel == "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and _exception_bases(node):
                local_names.setdefault(rel, set()).add(node.name)
                if (rel, node.name) in ALLOWED_SIGNALS:
                    continue
                # A subclass of a duraloop error is fine (e.g. a provider-specific LlmError).
                if all(base in errors.__all__ for base in _exception_bases(node)):
                    continue
                offenders.append(f"{rel}: {node.name}({', '.join(_exception_bases(node))})")
    assert offenders == []


def test_turn_cancelled_is_a_signal_not_an_error() -> None:
    from duraloop.tools._signal import TurnCancelled

    assert not issubclass(TurnCancelled, DuraloopError)
