"""Issue 10 point 1: `duraloop.loop` has no import cycle (TYPE_CHECKING imports count too).

`lint-imports` keeps the turn, its steps and the hooks from importing `_agent`; this test
pins the stronger property over the whole package with grimp (installed with import-linter).
"""

from __future__ import annotations

import itertools

import grimp


def test_no_two_loop_modules_import_each_other() -> None:
    graph = grimp.build_graph("duraloop")
    modules = sorted(m for m in graph.modules if m.startswith("duraloop.loop."))
    assert "duraloop.loop._agent" in modules and "duraloop.loop._turn" in modules
    cycles = [
        (a, b)
        for a, b in itertools.combinations(modules, 2)
        if graph.find_shortest_chain(importer=a, imported=b)
        and graph.find_shortest_chain(importer=b, imported=a)
    ]
    assert cycles == []
