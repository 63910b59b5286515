"""How the CLI's help reads: plain flags, `PROMPT`-style arguments, and `--version`.

typer's help shows a `<bool>` value after every flag (`--json <bool>`), though a flag takes
no value (`--json true` is refused), and writes a required argument `{prompt}` in the usage
line. `DuraloopTyper` gives every command `PlainHelpCommand`, whose help shows flags bare and
arguments as `PROMPT` (required) or `[PROMPT]` (optional), the form the README uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from typer import _click  # typer's own copy of click, whose Context its classes take
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

_Function = TypeVar("_Function", bound=Callable[..., Any])
_NO_LIMIT = 10_000  # characters: a first paragraph is never cut


def _plain(params: list[Any]) -> None:
    """Give flags an empty metavar (no `<bool>`) and arguments an upper-case one."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
        elif isinstance(param, TyperArgument) and param.metavar is None and param.name:
            param.metavar = param.name.upper()


class _PlainParams:
    """Mixin for a click command or group: its own params and `--help` shown plain."""

    params: list[Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _plain(self.params)

    def get_help_option(self, ctx: _click.Context) -> Any:
        """Return the `--help` option, shown as a plain flag."""
        option = super().get_help_option(ctx)  # type: ignore[misc]
        _plain([option])
        return option


class PlainHelpCommand(_PlainParams, TyperCommand):
    """A typer command whose help shows flags without a value and arguments as `NAME`."""

    def collect_usage_pieces(self, ctx: _click.Context) -> list[str]:
        """Return the usage line's pieces: `[OPTIONS]`, then `NAME` or `[NAME]` per argument."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                name = param.metavar or (param.name or "").upper()
                name = name if param.required else f"[{name}]"
                pieces.append(name + ("..." if param.nargs != 1 else ""))
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces


class PlainHelpGroup(_PlainParams, TyperGroup):
    """The top-level group, with its own flags (`--help`, `--version`) shown plain.

    Its command list shows each command's whole first paragraph, wrapped, where click would
    cut it at the terminal width with `...`.
    """

    def format_commands(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        """Write the `Commands` section: every visible command and its first paragraph."""
        rows: list[tuple[str, str]] = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=_NO_LIMIT)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class DuraloopTyper(typer.Typer):
    """A `typer.Typer` whose commands are `PlainHelpCommand`s unless one names its class."""

    def command(
        self, name: str | None = None, *, cls: type[TyperCommand] | None = None, **kwargs: Any
    ) -> Callable[[_Function], _Function]:
        """Register a command (as `typer.Typer.command`), by default a `PlainHelpCommand`."""
        return super().command(name, cls=cls or PlainHelpCommand, **kwargs)


def package_version() -> str:
    """Return duraloop's installed version, from the package metadata.

    Returns:
        The version string (`0.1.0`); when duraloop runs from a source tree that was never
        installed, a sentence saying so.
    """
    from importlib.metadata import PackageNotFoundError, version  # only `--version` reads it

    try:
        return version("duraloop")
    except PackageNotFoundError:
        return "(version unknown: the package is not installed; run pip install -e .)"


def print_version(value: bool) -> None:
    """Print `duraloop <version>` and exit 0, as the eager `--version` callback.

    Raises:
        typer.Exit: always when `value` is true (the command line stops here).
    """
    if value:
        typer.echo(f"duraloop {package_version()}")
        raise typer.Exit(0)


def root_options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=print_version,
            help="Print duraloop's version and exit.",
        ),
    ] = False,
) -> None:
    """A durable agent loop: every tool call answered, every crash repairable."""
