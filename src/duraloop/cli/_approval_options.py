"""The approval options of the commands that run turns: which built-in tools ask, and how.

`--ask-before bash,write_file` makes those built-in tools ask a person before each call
(`Tool.requires_approval`); `--approval-policy ask|never` is `LoopConfig.approval_policy`;
`--auto-approve TOOLS` is `LoopConfig.auto_approve` (asks of those tools are approved and
recorded without a person). A command that continues a paused turn (`resume`, `approve` and
`deny` with `--continue`) without `--ask-before` keeps asking about the built-in tools the
session has asked about before, so a continued turn never runs them unasked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Final

import typer

from ..log.vocabulary import APPROVAL_ASKED, APPROVAL_POLICIES, POLICY_NEVER

if TYPE_CHECKING:
    from ..log import Event
    from ..tools import Tool

BUILTIN_NAMES_TEXT: Final = "read_file, list_dir, grep, write_file, edit_file, bash"
"""The built-in tools' names, for help texts (tests/cli/test_approvals.py pins them)."""


def builtin_tool_names() -> tuple[str, ...]:
    """Return the names of the built-in tools, in their registration order."""
    from ..tools import builtin_tools  # only a command that takes the option loads the tools

    return tuple(tool.name for tool in builtin_tools())


def parse_tool_names(text: str, *, option: str) -> tuple[str, ...]:
    """Parse a comma-separated list of built-in tool names (`bash,write_file`).

    Args:
        text: the option's value; blanks around names and empty items are ignored, so
            `""` is the empty list.
        option: the option's flag, for the message.

    Returns:
        The names, in the order given, without repeats.

    Raises:
        typer.BadParameter: naming each unknown name and listing the valid ones (exit 2).
    """
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    valid = builtin_tool_names()
    unknown = [name for name in names if name not in valid]
    if unknown:
        raise typer.BadParameter(
            f"{', '.join(repr(name) for name in unknown)} is not a built-in tool; {option} "
            f"takes a comma-separated list of: {', '.join(valid)}"
        )
    return names


def _ask_before(value: str | None) -> str | None:
    if value is not None:
        parse_tool_names(value, option="--ask-before")
    return value


def _auto_approve(value: str | None) -> str | None:
    if value is not None:
        parse_tool_names(value, option="--auto-approve")
    return value


def _policy(value: str | None) -> str | None:
    if value is not None and value not in APPROVAL_POLICIES:
        raise typer.BadParameter(
            f"{value!r} is not an approval policy; use {' or '.join(APPROVAL_POLICIES)}"
        )
    return value


AskBeforeOption = Annotated[
    str | None,
    typer.Option(
        "--ask-before",
        metavar="TOOLS",
        callback=_ask_before,
        help="Built-in tools that ask a person before each call, comma-separated (of: "
        f"{BUILTIN_NAMES_TEXT}); a turn whose call asks pauses, or chat asks inline "
        "[default: none; when continuing a paused turn, the tools the session asked about].",
    ),
]
ApprovalPolicyOption = Annotated[
    str | None,
    typer.Option(
        "--approval-policy",
        metavar="ask|never",
        callback=_policy,
        help="How asks are answered: ask (a person decides) or never (every ask is rejected, "
        "for unattended runs); recorded in the session [default: the session's, else ask].",
    ),
]
AutoApproveOption = Annotated[
    str | None,
    typer.Option(
        "--auto-approve",
        metavar="TOOLS",
        callback=_auto_approve,
        help="Built-in tools whose asks are approved without a person, comma-separated "
        "(each recorded as decided allowed-once).",
    ),
]


def asked_tools(events: Iterable[Event]) -> frozenset[str]:
    """Return the names of the tools a session's `approval/asked` events asked about."""
    return frozenset(
        str(event.data["toolName"])
        for event in events
        if event.type == APPROVAL_ASKED and isinstance(event.data.get("toolName"), str)
    )


@dataclass(frozen=True, kw_only=True)
class ApprovalFlags:
    """The approval options of a command, as given (None: not given).

    Args:
        ask_before: `--ask-before`, the raw comma-separated text.
        approval_policy: `--approval-policy`.
        auto_approve: `--auto-approve`, the raw comma-separated text.
    """

    ask_before: str | None = None
    approval_policy: str | None = None
    auto_approve: str | None = None

    def auto_approved(self) -> frozenset[str]:
        """Return the `--auto-approve` names (empty when not given)."""
        if self.auto_approve is None:
            return frozenset()
        return frozenset(parse_tool_names(self.auto_approve, option="--auto-approve"))

    def asking(self, asked_before: frozenset[str] = frozenset()) -> frozenset[str]:
        """Return the built-in tools that ask.

        Args:
            asked_before: the tools the session asked about (`asked_tools`), used when
                `--ask-before` is not given (a command continuing a paused turn).
        """
        if self.ask_before is None:
            return frozenset(name for name in asked_before if name in builtin_tool_names())
        return frozenset(parse_tool_names(self.ask_before, option="--ask-before"))

    def asks_a_person(self) -> bool:
        """Whether a call may wait for a person: a tool asks, not auto-approved, policy ask."""
        return bool(self.asking() - self.auto_approved()) and self.approval_policy != POLICY_NEVER

    def tools(self, builtins: Sequence[Tool], asked_before: frozenset[str]) -> list[Tool]:
        """Return `builtins`, each tool that asks (`asking`) with `requires_approval=True`."""
        asking = self.asking(asked_before)
        return [
            dataclasses.replace(tool, requires_approval=True) if tool.name in asking else tool
            for tool in builtins
        ]
