"""style rule D21/D16: every command and option has help, and every command is in the README.

The README's CLI table is the user contract; a command missing from it, or an option
without help text, is a documentation bug this test catches.
"""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

import typer.main
from typer.testing import CliRunner

from duraloop.cli import app

README = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")


def _commands() -> dict[str, object]:
    group = typer.main.get_command(app)
    return dict(group.commands)  # type: ignore[attr-defined]


def test_every_command_and_parameter_has_help() -> None:
    missing = []
    for name, command in _commands().items():
        if not getattr(command, "help", None):
            missing.append(name)
        for param in command.params:  # type: ignore[attr-defined]
            if param.name == "help":
                continue
            if not getattr(param, "help", None):
                missing.append(f"{name} {param.name}")
    assert missing == []


def test_every_command_appears_in_the_readme() -> None:
    names = set(_commands())
    assert names == {
        "run",
        "chat",
        "resume",
        "pending",
        "approve",
        "deny",
        "fork",
        "show",
        "check",
        "ls",
        "demo",
        "compact",
        "db",
        "submit",
        "worker",
        "view",
    }
    for name in names:
        assert f"`duraloop {name}" in README, name


_DOCUMENTED_ONCE = {"--store", "--help"}  # described above the README's table, for every command
_BUDGET_FLAGS = {  # `run`, `chat` and `resume`: described once, in the README's Budgets section
    f"--max-{limit}-per-{scope}"
    for limit in ("requests", "tokens", "tool-calls", "cost")
    for scope in ("turn", "session")
}

_APPROVAL_FLAGS = {"--ask-before", "--approval-policy", "--auto-approve"}
"""`run`, `chat`, `resume`, `approve`, `deny`: described once, in "A person in the loop"."""


def _readme_row(command: str) -> str:
    rows = [line for line in README.splitlines() if line.startswith(f"| `duraloop {command}")]
    assert len(rows) == 1, command
    return rows[0]


def test_every_option_of_a_command_is_in_its_readme_row() -> None:
    missing = []
    for name, command in _commands().items():
        row = _readme_row(name)
        for param in command.params:  # type: ignore[attr-defined]
            for option in param.opts:
                listed = re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", row)
                if option in _BUDGET_FLAGS | _APPROVAL_FLAGS:
                    continue
                if option.startswith("--") and option not in _DOCUMENTED_ONCE and listed is None:
                    missing.append(f"{name} {option}")
    assert missing == []


def test_every_budget_flag_is_in_the_readmes_budgets_section() -> None:
    section = README.split("### Budgets", 1)[1].split("\n### ", 1)[0]
    assert sorted(flag for flag in _BUDGET_FLAGS if flag not in section) == []
    for name in ("run", "chat", "resume"):
        options = {o for p in _commands()[name].params for o in p.opts}  # type: ignore[attr-defined]
        assert options >= _BUDGET_FLAGS, name


def test_every_approval_flag_is_in_the_readmes_person_in_the_loop_section() -> None:
    headings = [
        line
        for line in README.splitlines()
        if line.startswith("#") and "A person in the loop" in line
    ]
    assert len(headings) == 1, "the README needs one section named 'A person in the loop'"
    heading = headings[0]
    section = README.split(heading, 1)[1].split("\n#", 1)[0]
    assert sorted(flag for flag in _APPROVAL_FLAGS if flag not in section) == []
    for name in ("run", "chat", "resume", "approve", "deny"):
        options = {o for p in _commands()[name].params for o in p.opts}  # type: ignore[attr-defined]
        assert options >= _APPROVAL_FLAGS, name


def _help(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


def test_flags_show_no_value_in_help_and_arguments_read_as_in_the_readme() -> None:
    for name in ["", *_commands()]:
        text = _help(*([name] if name else []))
        assert "<bool>" not in text, name
        assert "{" not in text.split("Usage:", 1)[1].splitlines()[0], name
    assert re.search(r"Usage: duraloop run \[OPTIONS\] PROMPT *\n", _help("run"))
    assert re.search(
        r"Usage: duraloop resume \[OPTIONS\] SESSION_ID \[PROMPT\] *\n", _help("resume")
    )


def test_a_flag_given_a_value_is_refused_as_an_extra_argument() -> None:
    result = CliRunner().invoke(app, ["ls", "--json", "true"])
    assert result.exit_code == 2
    assert "unexpected extra argument(s) (true)" in result.output


def test_version_prints_the_installed_package_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"duraloop {version('duraloop')}\n"
