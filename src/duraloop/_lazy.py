"""Lazy re-exports for the package `__init__`s (PEP 562): a name's module loads on first use.

A package `__init__` lists its re-exports twice, in the same order: as
`from ._x import Name as Name` under `if _lazy.TYPE_CHECKING:` (what mypy and import-linter
read) and as `{"Name": "._x"}` given to `lazy_exports` (what runs). `import duraloop` then
costs only the package files themselves; `duraloop.store.JsonlStore` imports the JSONL
backend the first time it is looked up, and never SQLite. `tests/test_lazy_imports.py`
checks that the two lists agree and that every name in `__all__` resolves.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

TYPE_CHECKING = False
"""The faces' `if _lazy.TYPE_CHECKING:` (true for type checkers, which go by the name):
`typing.TYPE_CHECKING` without importing `typing`, most of what `import duraloop` would cost."""


def lazy_exports(
    package: str, exports: Mapping[str, str], *, submodules: tuple[str, ...] = ()
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """Return a package's module-level `__getattr__` and `__dir__` for lazy re-exports.

    Args:
        package: the package's `__name__`.
        exports: public name -> the module defining it, relative to `package` (`"._check"`)
            or absolute.
        submodules: public submodules that are attributes of the package once looked up
            (`duraloop.log` after `import duraloop`), as they were when the faces imported
            everything.

    Returns:
        `(__getattr__, __dir__)`: `__getattr__(name)` imports the name's module, caches the
        value in the package's namespace (later lookups are plain attribute reads) and returns
        it (a submodule: imports it); `__dir__()` lists the package's namespace, every lazy
        name and the submodules.
    """

    def getattr_(name: str) -> object:
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def dir_() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports) | set(submodules))

    return getattr_, dir_
