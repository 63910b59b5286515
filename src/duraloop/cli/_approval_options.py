"""The approval options of the commands that run turns: which built-in tools ask, and how.

`--ask-before bash,write_file` makes those built-in tools ask a person before each call
(`Tool.requires_approval`); `--approval-policy ask|never` is `LoopConfig.approval_policy`;
`--auto-approve TOOLS` is `LoopConfig.auto_approve` (asks of those tools are approved and
recorded without a person).

Which tools asked when a session's turn paused is not recorded, so a command that opens an
existing session whose log holds an ask (`run --session`, `chat --session`, `resume`, and
`approve`/`deny --continue`) and has no `--ask-before` asks before the side-effecting
built-ins (`SIDE_EFFECT_TOOLS`) plus every tool the log asked about: a continued turn never
runs unasked a tool the first run asked before. `--ask-before` given replaces that set
(`--ask-before none`: no tool asks).
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
    from ..store import SessionStore
    from ..tools import Tool

BUILTIN_NAMES_TEXT: Final = "read_file, list_dir, grep, write_file, edit_file, bash"
"""The built-in tools' names, for help texts (tests/cli/test_approvals.py pins them)."""
SIDE_EFFECT_TOOLS: Final = ("write_file", "edit_file", "bash")
"""The built-ins that change things: they ask by default in a session that has asked before."""
NO_TOOLS: Final = "none"
"""`--ask-before none`: no built-in tool asks (the explicit empty set)."""


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


def parse_ask_before(text: str) -> tuple[str, ...]:
    """Parse `--ask-before`: `none`, or a comma-separated list of built-in tool names.

    Returns:
        The names; `()` for `none`.

    Raises:
        typer.BadParameter: for an unknown name, `none` mixed with names, or an empty value
            (`--ask-before none` says "no tool" explicitly).
    """
    words = [name.strip() for name in text.split(",") if name.strip()]
    if words == [NO_TOOLS]:
        return ()
    if not words or NO_TOOLS in words:
        raise typer.BadParameter(
            f"{text!r} names no tool; pass --ask-before {NO_TOOLS} for no tool, or a "
            f"comma-separated list of: {BUILTIN_NAMES_TEXT}"
        )
    return parse_tool_names(text, option="--ask-before")


def _ask_before(value: str | None) -> str | None:
    if value is not None:
        parse_ask_before(value)
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
        f"{BUILTIN_NAMES_TEXT}), or {NO_TOOLS}; a turn whose call asks pauses, or chat asks "
        "inline [default: none; in a session whose log holds an ask (continued, resumed, or "
        f"chatted in again): {', '.join(SIDE_EFFECT_TOOLS)} and every tool it asked about; a "
        "value given replaces that set].",
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


def default_asking(events: Iterable[Event]) -> frozenset[str]:
    """Return the tools that ask without `--ask-before` in a session with this log.

    Returns:
        Empty if the log holds no `approval/asked`; else `SIDE_EFFECT_TOOLS` plus every
        built-in tool an ask of the log names.
    """
    asked = {
        str(event.data["toolName"])
        for event in events
        if event.type == APPROVAL_ASKED and isinstance(event.data.get("toolName"), str)
    }
    if not asked:
        return frozenset()
    return frozenset(SIDE_EFFECT_TOOLS) | {name for name in asked if name in builtin_tool_names()}


def session_default_asking(sessions: SessionStore, session_id: str | None) -> frozenset[str]:
    """Return `default_asking` of a stored session's log; empty for a new or no session.

    Raises:
        CorruptLogError: if the log cannot be read (as opening it would raise).
    """
    if session_id is None or not sessions.exists(session_id):
        return frozenset()
    return default_asking(sessions.read(session_id)[1])


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

    def asking(self, default: frozenset[str] = frozenset()) -> frozenset[str]:
        """Return the built-in tools that ask.

        Args:
            default: the set when `--ask-before` is not given (`default_asking` of the
                session's log; empty for a new session).
        """
        if self.ask_before is None:
            return default
        return frozenset(parse_ask_before(self.ask_before))

    def asks_a_person(self, default: frozenset[str] = frozenset()) -> bool:
        """Whether a call may wait for a person: a tool asks, not auto-approved, policy ask."""
        asking = self.asking(default) - self.auto_approved()
        return bool(asking) and self.approval_policy != POLICY_NEVER

    def tools(self, builtins: Sequence[Tool], default: frozenset[str]) -> list[Tool]:
        """Return `builtins`, each tool that asks (`asking(default)`) with `requires_approval`."""
        asking = self.asking(default)
        return [
            dataclasses.replace(tool, requires_approval=True) if tool.name in asking else tool
            for tool in builtins
        ]
