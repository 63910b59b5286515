"""Budget flags, the `[prices]` table and the usage lines of the CLI (docs/loop.md#budgets)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ._support import Cli, clean_env, ok, session_id_of


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def _tool_steps(cli: Cli, steps: int) -> str:
    step = {"text": "looking", "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]}
    return cli.script([step] * steps + [{"text": "done"}])


def _prices(cli: Cli, text: str) -> dict[str, str]:
    home = cli.tmp / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(text, encoding="utf-8")
    return clean_env(cli.tmp)


PRICES = '[prices."scripted:script-1"]\ninput_per_mtok = 1.0\noutput_per_mtok = 4.0\n'
"""The price of the first script's model (a `scripted:` model is named after its file)."""


def test_run_with_a_turn_budget_ends_blocked_naming_the_budget(cli: Cli) -> None:
    result = cli("run", "go", "--model", _tool_steps(cli, 5), "--max-requests-per-turn", "2")
    assert result.returncode == 1
    assert "turn 1 blocked: the turn budget of 2 requests is reached" in result.stdout
    assert "--max-requests-per-turn" in result.stdout
    assert "2 model requests · " in result.stdout  # the usage line under the turn's end
    events = cli.events(session_id_of(result))
    assert sum(e["type"] == "step/start" for e in events) == 2


def test_a_spent_session_budget_refuses_the_next_turn_across_processes(cli: Cli) -> None:
    first = ok(cli("run", "go", "--model", _tool_steps(cli, 1)))
    session_id = session_id_of(first)
    before = cli.events(session_id)
    refused = cli(
        "run",
        "more",
        "--session",
        session_id,
        "--model",
        _tool_steps(cli, 1),
        "--max-requests-per-session",
        "2",
    )
    assert refused.returncode == 1
    assert refused.stderr.startswith("BudgetExceededError: session ")
    assert "the session budget of 2 requests is reached: 2 model requests spent" in refused.stderr
    after = cli.events(session_id)
    assert not any(e["type"] == "turn/start" for e in after[len(before) :])
    raised = cli(
        "run",
        "more",
        "--session",
        session_id,
        "--model",
        _tool_steps(cli, 1),
        "--max-requests-per-session",
        "3",
    )
    assert raised.returncode == 1  # one more request, then blocked before the second
    assert "the session budget of 3 requests is reached" in raised.stdout


def test_show_prints_each_turns_usage_and_its_cost_from_the_price_table(cli: Cli) -> None:
    session_id = session_id_of(ok(cli("run", "go", "--model", _tool_steps(cli, 2))))
    plain = ok(cli("show", session_id)).stdout
    assert "3 model requests · " in plain and " · 2 tool calls" in plain
    assert "cost" not in plain.split("── turn 1 completed", 1)[1]
    priced = ok(cli("show", session_id, env=_prices(cli, PRICES))).stdout
    assert " · 2 tool calls · cost " in priced
    assert "no price for" not in priced


def test_a_cost_budget_without_the_models_price_is_refused(cli: Cli) -> None:
    env = _prices(cli, '[prices."openai:gpt-x"]\ninput_per_mtok = 1\noutput_per_mtok = 2\n')
    result = cli("run", "go", "--model", _tool_steps(cli, 1), "--max-cost-per-turn", "1", env=env)
    assert result.returncode == 1
    assert result.stderr.startswith(
        "ConfigError: a cost budget needs the price of scripted:script-1"
    )


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ('[prices."nocolon"]\ninput_per_mtok = 1\noutput_per_mtok = 1\n', 'as "provider:model"'),
        ('[prices."a:b"]\ninput_per_mtok = 1\n', "needs output_per_mtok"),
        ('[prices."a:b"]\ninput_per_mtok = -1\noutput_per_mtok = 1\n', "line 2: `prices.a:b.input"),
        (
            '[prices."a:b"]\ninput_per_mtok = 1\noutput_per_mtok = 1\nper_call = 2\n',
            "not a known key",
        ),
    ],
)
def test_the_price_table_is_checked_strictly(cli: Cli, table: str, problem: str) -> None:
    result = cli("run", "go", "--model", _tool_steps(cli, 1), env=_prices(cli, table))
    assert result.returncode == 1
    assert result.stderr.startswith("ConfigError: config file ")
    assert problem in result.stderr


def test_resume_without_a_prompt_refuses_budget_flags(cli: Cli) -> None:
    session_id = session_id_of(ok(cli("run", "go", "--model", _tool_steps(cli, 1))))
    result = cli("resume", session_id, "--max-tokens-per-turn", "5")
    assert result.returncode == 1
    assert "--max-tokens-per-turn is used only when resume runs a turn" in result.stderr


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_a_cost_budget_that_is_not_a_positive_number_is_a_usage_error(cli: Cli, value: str) -> None:
    result = cli("run", "go", "--model", _tool_steps(cli, 1), "--max-cost-per-session", value)
    assert result.returncode == 2
    assert "Invalid value for '--max-cost-per-session'" in result.stderr
    assert "give a finite number > 0" in result.stderr


def test_a_model_without_a_price_costs_unknown_not_zero(cli: Cli) -> None:
    session_id = session_id_of(ok(cli("run", "go", "--model", _tool_steps(cli, 1))))
    env = _prices(cli, '[prices."openai:gpt-x"]\ninput_per_mtok = 1\noutput_per_mtok = 2\n')
    shown = ok(cli("show", session_id, env=env)).stdout
    assert "cost unknown (no price for scripted:script-1)" in shown


def test_a_budget_of_one_reads_in_the_singular(cli: Cli) -> None:
    result = cli("run", "go", "--model", _tool_steps(cli, 3), "--max-tool-calls-per-turn", "1")
    assert "the turn budget of 1 tool call is reached: 1 tool call spent" in result.stdout
