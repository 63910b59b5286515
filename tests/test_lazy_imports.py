"""Lazy imports (docs/architecture.md#start-up): what `import duraloop` and the CLI load.

Each check runs a fresh interpreter and reads its `sys.modules`, so the order the test suite
imports things in cannot hide an eager import. Behaviour only: no times are asserted
(`benchmarks/bench_startup.py` measures them).
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cli._support import Cli, clean_env, ok, session_id_of

SRC = Path(__file__).resolve().parents[1] / "src" / "duraloop"
PROVIDER_SDKS = ("openai", "anthropic", "httpx", "httpx2")
NEVER_AT_IMPORT = (
    *PROVIDER_SDKS,
    "pydantic",
    "rich",
    "typer",
    "sqlite3",
    "zstandard",
    "msgspec",
    "anyio",
)
"""Third-party (and I/O) modules `import duraloop` must not load."""
BEHIND_THE_FACES = ("duraloop.loop.", "duraloop.tools.", "duraloop.llm.")
"""The modules of the loop, the tools and the models (their faces alone cost nothing)."""
LAZY_PACKAGES = (
    "duraloop",
    "duraloop.log",
    "duraloop.store",
    "duraloop.llm",
    "duraloop.tools",
    "duraloop.tools.mcp",
    "duraloop.loop",
    "duraloop.testing",
    "duraloop.telemetry",
    "duraloop.view",
    "duraloop.llm._anthropic",
    "duraloop.llm._chat_completions",
)

_REPORT = """
import atexit, json, sys
def _report():
    with open({out!r}, "w") as handle:
        json.dump(sorted(sys.modules), handle)
atexit.register(_report)
"""


def loaded_by(code: str, tmp_path: Path) -> set[str]:
    """Run `code` in a fresh interpreter; return the modules loaded when it exits."""
    out = tmp_path / "modules.json"
    script = _REPORT.format(out=str(out)) + textwrap.dedent(code)
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, timeout=60)
    return set(json.loads(out.read_text()))


def cli_loads(tmp_path: Path, *args: str) -> tuple[int, set[str]]:
    """Run `duraloop ARGS` in a fresh interpreter; return its exit code and loaded modules."""
    out = tmp_path / "modules.json"
    script = _REPORT.format(out=str(out)) + (
        f"sys.argv = ['duraloop', *{list(args)!r}]\nfrom duraloop.cli import main\nmain()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path),
        timeout=60,
        check=False,
    )
    return result.returncode, set(json.loads(out.read_text()))


def roots(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


def test_import_duraloop_loads_no_dependency(tmp_path: Path) -> None:
    modules = loaded_by("import duraloop", tmp_path)
    assert roots(modules) & set(NEVER_AT_IMPORT) == set()
    assert {m for m in modules if m.startswith("duraloop.")} == {"duraloop._lazy"}
    assert "typing" not in modules  # `_lazy.TYPE_CHECKING`: most of what the import would cost


def test_a_name_loads_only_its_own_modules(tmp_path: Path) -> None:
    modules = loaded_by("from duraloop.store import JsonlStore", tmp_path)
    assert roots(modules) & {*PROVIDER_SDKS, "pydantic", "sqlite3", "zstandard", "anyio"} == set()
    assert not any(m.startswith(BEHIND_THE_FACES) for m in modules)


def test_sqlite_loads_with_the_sqlite_store(tmp_path: Path) -> None:
    code = f"from duraloop.store import SqliteStore\nSqliteStore({str(tmp_path / 'x.db')!r})"
    assert "sqlite3" in loaded_by(code, tmp_path)


def test_provider_sdks_load_when_an_adapter_is_first_used(tmp_path: Path) -> None:
    code = "from duraloop import OpenAIChatModel\nfrom duraloop.llm import AnthropicMessagesModel"
    assert roots(loaded_by(code, tmp_path)) & set(PROVIDER_SDKS) == set()


def test_help_loads_typer_and_rich_only(tmp_path: Path) -> None:
    code, modules = cli_loads(tmp_path, "--help")
    assert code == 0
    assert {"typer", "rich"} <= roots(modules)
    # Plain help (docs/architecture.md#start-up): typer's rich help renderer and the
    # markdown parser it imports cost ~70 ms and are never loaded.
    assert {"typer.rich_utils", "rich.markdown"} & modules == set()
    assert "markdown_it" not in roots(modules)
    assert roots(modules) & {*PROVIDER_SDKS, "pydantic", "sqlite3", "zstandard", "msgspec"} == set()
    assert not any(m.startswith(BEHIND_THE_FACES) for m in modules)
    assert "duraloop.store._session_store" not in modules  # the file-name constants only


@pytest.fixture(scope="module")
def stored_session(tmp_path_factory: pytest.TempPathFactory) -> tuple[Cli, str]:
    cli = Cli(tmp_path_factory.mktemp("lazy"))
    result = ok(cli("run", "Say hi.", "--model", cli.script([{"text": "Hi."}])))
    return cli, session_id_of(result)


@pytest.mark.parametrize(
    "command",
    [("ls",), ("ls", "--json"), ("show", "ID"), ("show", "ID", "--messages"), ("check", "ID")],
    ids=" ".join,
)
def test_read_commands_load_no_loop_no_tools_no_sdk(
    stored_session: tuple[Cli, str], tmp_path: Path, command: tuple[str, ...]
) -> None:
    cli, session_id = stored_session
    args = [session_id if arg == "ID" else arg for arg in command]
    code, modules = cli_loads(tmp_path, *args, "--store", str(cli.store))
    assert code == 0
    assert roots(modules) & {*PROVIDER_SDKS, "sqlite3", "zstandard"} == set()
    assert not any(m.startswith(BEHIND_THE_FACES) for m in modules)


def test_a_log_file_is_shown_without_opening_a_store(
    stored_session: tuple[Cli, str], tmp_path: Path
) -> None:
    cli, session_id = stored_session
    code, modules = cli_loads(tmp_path, "show", str(cli.log_path(session_id)))
    assert code == 0
    assert "duraloop.store._session_store" not in modules


def _declared(package: str) -> tuple[dict[str, str], dict[str, str]]:
    """Return a face's `TYPE_CHECKING` imports and its lazy map, each name -> module."""
    init = SRC.joinpath(*package.split(".")[1:], "__init__.py")
    typed: dict[str, str] = {}
    lazy: dict[str, str] = {}
    for node in ast.walk(ast.parse(init.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            for alias in node.names:
                if alias.name == "_lazy":
                    continue
                typed[alias.asname or alias.name] = "." * node.level + (node.module or "")
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "lazy_exports":
            mapping = node.args[1]
            assert isinstance(mapping, ast.Dict)
            lazy = {
                ast.literal_eval(key): ast.literal_eval(value)
                for key, value in zip(mapping.keys, mapping.values, strict=True)
                if key is not None
            }
    return typed, lazy


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_the_lazy_map_matches_what_the_type_checker_reads(package: str) -> None:
    typed, lazy = _declared(package)
    assert typed == lazy
    assert set(lazy) == set(importlib.import_module(package).__all__)


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_name_in_all_resolves_in_a_fresh_interpreter(package: str, tmp_path: Path) -> None:
    code = f"""
    import importlib
    package = importlib.import_module({package!r})
    assert set(package.__all__) <= set(dir(package)), "dir() lists every lazy name"
    for name in package.__all__:
        scope = {{}}
        exec(f"from {package} import {{name}}", scope)
        assert scope[name] is getattr(package, name) is vars(package)[name], name
    """
    loaded_by(code, tmp_path)


def test_the_layers_are_attributes_of_the_root_as_before(tmp_path: Path) -> None:
    code = """
    import duraloop
    assert {"errors", "llm", "log", "loop", "store", "tools"} <= set(dir(duraloop))
    assert duraloop.store.JsonlStore.__name__ == "JsonlStore"
    assert duraloop.log.vocabulary.TOOL_CALL == "tool/call"
    assert duraloop.errors.DuraloopError is duraloop.DuraloopError
    """
    loaded_by(code, tmp_path)


def test_an_unknown_name_is_an_attribute_error() -> None:
    import duraloop.store

    with pytest.raises(AttributeError, match="has no attribute 'NoSuchStore'"):
        _ = duraloop.store.NoSuchStore  # type: ignore[attr-defined]
    with pytest.raises(ImportError):
        exec("from duraloop.log import no_such_name")
