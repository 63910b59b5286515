"""The CLI's app object and its two consoles, shared by every command module."""

from __future__ import annotations

from rich.console import Console

from ._help import DuraloopTyper, PlainHelpGroup, root_options

# The log, the store and the loop load when a command first uses them (their package
# `__init__`s are lazy, docs/architecture.md#start-up): `duraloop --help` loads none of them.

app = DuraloopTyper(
    name="duraloop",
    help="A durable agent loop: every tool call answered, every crash repairable.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
    cls=PlainHelpGroup,
    rich_markup_mode=None,
    context_settings={"max_content_width": 10_000},  # help as wide as the terminal
)
app.callback()(root_options)
# soft_wrap: a line is never broken at the console width (a piped `session: <id>` line or a
# one-line error must stay one line; the terminal wraps long lines itself).
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)
