"""STYLE D21/D16: every command and option has help, and every command is in the README.

The README's CLI table is the user contract; a command missing from it, or an option
without help text, is a documentation bug this test catches.
"""

from __future__ import annotations

from pathlib import Path

import typer.main

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
    assert names == {"run", "chat", "resume", "fork", "show", "check", "ls", "demo"}
    for name in names:
        assert f"`duraloop {name}" in README, name
