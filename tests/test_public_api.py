"""style rule D3: each public namespace lists exactly its public names; the root stays small.

A name importable without an underscore is public API; `__all__` must say so, so a new
export is a deliberate choice and an accidental one (a helper leaking out) fails here.
"""

from __future__ import annotations

import importlib
import importlib.util

import pytest

PUBLIC = [
    "duraloop",
    "duraloop.log",
    "duraloop.log.vocabulary",
    "duraloop.store",
    "duraloop.llm",
    "duraloop.tools",
    "duraloop.tools.mcp",
    "duraloop.loop",
    "duraloop.testing",
    "duraloop.telemetry",
    "duraloop.view",
]


@pytest.mark.parametrize("name", PUBLIC)
def test_all_lists_exactly_the_public_names(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert len(exported) == len(set(exported))

    def public(names: list[str]) -> set[str]:
        return {
            attr
            for attr in names
            if not attr.startswith("_")
            and attr != "annotations"
            # a subpackage the import system sets on its parent is not an export
            and not (hasattr(module, "__path__") and importlib.util.find_spec(f"{name}.{attr}"))
        }

    assert public(dir(module)) == set(exported)  # lazy names (PEP 562) are listed before use
    for attr in exported:
        getattr(module, attr)  # a lazy name is in the namespace once looked up
    assert public(list(vars(module))) == set(exported)


def test_root_namespace_stays_small() -> None:
    import duraloop

    assert len(duraloop.__all__) <= 40


def test_every_exported_name_resolves() -> None:
    for name in PUBLIC:
        module = importlib.import_module(name)
        for attr in module.__all__:
            assert getattr(module, attr) is not None, f"{name}.{attr}"
