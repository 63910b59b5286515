"""`SessionSetup` refuses a part of the wrong type at construction (style rule D23).

A new user's mistakes (a path for the store, a model string, a plain function in `tools`, a
dict for `config`/`hooks`/`tool_hooks`) are a `ConfigError` naming the part, raised before
anything is opened, so no writer is left open and no session is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from duraloop import JsonlStore, SessionSetup, start_session
from duraloop.errors import ConfigError
from duraloop.llm import ScriptedModel
from duraloop.tools import tool


def _double(n: int) -> int:
    """Double n."""
    return 2 * n


def _parts(tmp_path: Path) -> dict[str, Any]:
    return {"store": JsonlStore(tmp_path / "st"), "model": ScriptedModel([])}


@pytest.mark.parametrize(
    ("part", "value", "named"),
    [
        ("store", "some/dir", "store"),
        ("model", "openai:gpt-4.1", "parse_model_spec"),
        ("tools", [_double], "@duraloop.tool"),
        ("tools", {"double": tool(_double)}, "tools"),
        ("cwd", 3, "cwd"),
        ("config", {"max_steps": 3}, "LoopConfig"),
        ("hooks", {}, "LoopHooks"),
        ("tool_hooks", [print], "ToolHooks"),
    ],
)
def test_a_setup_part_of_the_wrong_type_is_a_config_error_naming_it(
    tmp_path: Path, part: str, value: object, named: str
) -> None:
    with pytest.raises(ConfigError, match=rf"SessionSetup\({part}=\.\.\.\)") as raised:
        SessionSetup(**{**_parts(tmp_path), part: value})
    assert named in str(raised.value)
    assert not (tmp_path / "st").exists()


def test_a_setup_of_the_right_types_builds_and_starts(tmp_path: Path) -> None:
    setup = SessionSetup(**_parts(tmp_path), tools=[tool(_double)], cwd=tmp_path)
    loop = start_session(setup, session_id="s1")
    assert loop.session.id == "s1"
