"""The options `run`, `chat` and `resume` share, and the JSON rows of `check` and `ls`.

Pins that one `TurnOptions` builds the same `SessionSetup` the three commands used to build
each on their own (model, loop options, built-in tools, the store), that `resume` without a
prompt still refuses the model flags by name, and that `check --json`/`ls --json` rows come
from the report types' `to_json()` with the keys the CLI has always printed. In-process
calls: the subprocess tests in this folder pin the command line's bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from duraloop.cli._options import TurnOptions
from duraloop.cli._stores import StoreSpec
from duraloop.errors import UsageError
from duraloop.llm import ScriptedModel
from duraloop.log import LogCheckReport
from duraloop.store import JsonlStore, MemoryStore, SessionSummary


def _options(tmp_path: Path, **overrides: object) -> TurnOptions:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "ok"}]), encoding="utf-8")
    values: dict[str, object] = {
        "model": f"scripted:{script}",
        "system": "be brief",
        "max_parallel": 3,
        "max_steps": 7,
        "base_url": None,
        "max_tokens": None,
        "reasoning_effort": None,
    }
    values.update(overrides)
    return TurnOptions(**values)  # type: ignore[arg-type]


def test_turn_options_build_the_setup_with_the_loop_options_and_builtin_tools(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    setup = _options(tmp_path).session_setup(store, cwd=tmp_path)
    assert setup.store is store and setup.cwd == tmp_path
    assert isinstance(setup.model, ScriptedModel)
    assert setup.config is not None
    assert (setup.config.max_parallel_tool_calls, setup.config.max_steps) == (3, 7)
    assert setup.config.system_prompt == "be brief"
    assert {tool.name for tool in setup.tools} >= {"read_file", "bash"}


def test_turn_options_open_a_store_spec(tmp_path: Path) -> None:
    setup = _options(tmp_path).session_setup(StoreSpec("jsonl", tmp_path / "sessions"), cwd=None)
    assert isinstance(setup.store, JsonlStore) and setup.cwd is None


def test_resume_without_a_prompt_refuses_the_model_flags_by_name(tmp_path: Path) -> None:
    with pytest.raises(
        UsageError, match=r"^--model, --max-tokens are used only when resume runs a turn"
    ):
        _options(tmp_path, system=None, max_tokens=5).refuse_model_flags()
    _options(tmp_path, model=None, system=None).refuse_model_flags()  # nothing given: fine


def test_check_report_to_json_has_the_check_json_keys_in_order() -> None:
    report = LogCheckReport(
        event_count=4, turn_count=1, open_turn=1, closers_needed=2, problems=["x"]
    )
    assert list(report.to_json().items()) == [
        ("valid", False),
        ("events", 4),
        ("turns", 1),
        ("openTurn", 1),
        ("closersNeeded", 2),
        ("tornTailBytes", 0),
        ("problems", ["x"]),
    ]


def test_session_summary_to_json_adds_damaged_only_for_a_damaged_log() -> None:
    row = SessionSummary(
        id="s",
        created_at=1,
        cwd="/w",
        turn_count=2,
        last_turn_end="completed",
        event_count=9,
        parent_session=None,
    )
    assert row.to_json() == {
        "id": "s",
        "createdAt": 1,
        "cwd": "/w",
        "turns": 2,
        "lastTurnEnd": "completed",
        "events": 9,
        "parentSession": None,
    }
    damaged = SessionSummary(
        id="d",
        created_at=0,
        cwd=None,
        turn_count=0,
        last_turn_end="unknown",
        event_count=0,
        parent_session=None,
        damaged="torn header",
    )
    assert (
        list(damaged.to_json())[-1] == "damaged" and damaged.to_json()["damaged"] == "torn header"
    )
