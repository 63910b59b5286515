"""One measurement in a fresh process: `child.py DRIVER SCENARIO ROOT [N]`, prints one JSON line.

DRIVER is `openai_agents`, `langgraph`, `pydantic_ai` or `duraloop` (the module `_DRIVER.py`
beside this file); SCENARIO is `import`, `steps`, `pgsteps` (S on PostgreSQL, `_pg.py`),
`build`, `resume` or `parallel`. The
`import` scenario times importing the framework's modules before anything else is loaded.
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
import time
from pathlib import Path

MODULES = {
    "openai_agents": ("agents",),
    "langgraph": ("langgraph.graph", "langgraph.prebuilt", "langgraph.checkpoint.sqlite"),
    "pydantic_ai": ("pydantic_ai",),
    "duraloop": ("duraloop", "duraloop.loop", "duraloop.store", "duraloop.llm", "duraloop.tools"),
}
NAMES = {
    # duraloop's package faces load a module when a name is first used (PEP 562): the import
    # figure touches what a program running these scenarios uses, so it is not only the faces.
    "duraloop": {
        "duraloop.loop": ("start_session", "resume_session", "SessionSetup", "LoopConfig"),
        "duraloop.store": ("JsonlStore",),
        "duraloop.llm": ("ScriptedModel", "OpenAIChatModel"),
        "duraloop.tools": ("tool",),
    },
}


def main(argv: list[str]) -> None:
    driver, scenario, root = argv[0], argv[1], Path(argv[2])
    size = int(argv[3]) if len(argv) > 3 else 0
    started = time.perf_counter()
    for name in MODULES[driver]:
        module = importlib.import_module(name)
        for attribute in NAMES.get(driver, {}).get(name, ()):
            getattr(module, attribute)
    imported = (time.perf_counter() - started) * 1000
    if scenario == "import":
        print(json.dumps({"import_ms": imported}))
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    module = importlib.import_module(f"_{driver}")
    if scenario not in ("steps", "pgsteps", "build", "resume", "parallel"):
        raise SystemExit(f"unknown scenario {scenario!r}")
    function = getattr(module, scenario)
    args = (size, root) if scenario in ("steps", "pgsteps", "build") else (root,)
    if inspect.iscoroutinefunction(function):
        import anyio

        result = anyio.run(function, *args)
    else:
        result = function(*args)
    print(json.dumps({"import_ms": imported, **(result or {})}))


if __name__ == "__main__":
    main(sys.argv[1:])
