"""How the CLI shows a call that waits for approval, and the commands that decide it.

`run`, `resume`, `chat` and `pending` print the same block: the waiting call (tool, call
id, its arguments in full up to `MAX_ARGUMENTS_CHARS`, escaped, and past that how many
characters are not shown and the command that prints them; the reason), then the exact
commands that approve or deny it or, once decided, the one that continues the turn. The
commands work as printed: they carry the `--store` in use, the `--model` and the
`--ask-before` set of the command that printed them (`ContinueWith`), and every argument
is quoted for the shell; an id holding control characters is spelled `$'...'` (bash, zsh),
never written raw. Every value in the block comes from the model or the log: untrusted, so
each goes through `ident` or `styled` (control characters shown as escapes, never markup).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from rich.console import Console
from rich.text import Text

from ._approval_lines import MAX_REASON_CHARS
from ._approval_options import BUILTIN_NAMES_TEXT, NO_TOOLS
from ._render import MAX_ID_CHARS, MAX_NAME_CHARS, ident, short_text, styled, visible
from ._stores import opened_store_text

if TYPE_CHECKING:
    from ..log import PendingApproval

MAX_ARGUMENTS_CHARS: Final = 20_000
"""Most characters of a waiting call's arguments shown where a person decides (then cut,
saying how many more there are and which command prints them)."""


def shell_word(value: str) -> str:
    r"""Return `value` as one shell word that reads back as exactly `value`.

    Plain text is quoted with `shlex.quote`; a value holding control characters, line
    breaks or characters a terminal would reorder is spelled as ANSI-C quoting (`$'b\x1b'`,
    bash and zsh), so the printed word holds no control character and still is the value.
    """
    if ident(value, sys.maxsize) == value:
        return shlex.quote(value)
    return "$'" + "".join(_ansi_c(char) for char in value) + "'"


def _ansi_c(char: str) -> str:
    code = ord(char)
    if char in "\\'":
        return "\\" + char
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02x}"
    if visible(char) != char:  # C1 controls, bidi overrides: a Unicode escape, not a byte
        return f"\\u{code:04x}"
    return char


def tool_list(names: frozenset[str]) -> str:
    """Return `names` as an `--ask-before` value, in the built-ins' order (`none` if empty)."""
    order = BUILTIN_NAMES_TEXT.split(", ")
    return ",".join(sorted(names, key=lambda name: (order.index(name), name))) or NO_TOOLS


@dataclass(frozen=True, kw_only=True)
class ContinueWith:
    """The options of the printed commands that run a paused turn on.

    Args:
        model: the `--model` spec of the command that prints them; None when not known.
        model_placeholder: print `--model SPEC` when `model` is None (no default model
            applies, as in `pending`); False when a default model applies.
        ask_before: the tools that ask in the printing command (printed as `--ask-before`);
            None: not known, not printed (the continuing command's default applies).
        auto_approve: the `--auto-approve` tools of the printing command.
        keep_going: print `approve`/`deny` with `--continue`; False prints them without,
            then the `resume` command that continues.
        mcp: the `--mcp` servers of the printing command (docs/cli.md#mcp-servers).
    """

    model: str | None = None
    model_placeholder: bool = False
    ask_before: frozenset[str] | None = None
    auto_approve: frozenset[str] = frozenset()
    keep_going: bool = True
    mcp: str | None = None

    def options(self) -> list[str]:
        """Return the options (quoted) that a command running the turn on carries."""
        words: list[str] = []
        if self.model is not None:
            words += ["--model", shell_word(self.model)]
        elif self.model_placeholder:
            words += ["--model", "SPEC"]
        if self.ask_before is not None:
            words += ["--ask-before", tool_list(self.ask_before)]
        if self.auto_approve:
            words += ["--auto-approve", tool_list(self.auto_approve)]
        if self.mcp:
            words += ["--mcp", shell_word(self.mcp)]
        return words


def command_line(words: Sequence[str], arguments: Sequence[str], options: Sequence[str]) -> str:
    """Return a shell command: `words`, the quoted `arguments`, then `options`.

    An argument that starts with `-` would read as an option: then the options come
    first and `--` ends them.

    Args:
        words: the command's words (`duraloop`, `approve`).
        arguments: positional values, each quoted with `shell_word`.
        options: the options, already quoted where needed.

    Returns:
        The command line, with the `--store` in use appended to the options.
    """
    store = opened_store_text()
    opts = [*options, *([] if store is None else ["--store", shell_word(store)])]
    quoted = [shell_word(value) for value in arguments]
    if any(value.startswith("-") for value in arguments):
        return " ".join([*words, *opts, "--", *quoted])
    return " ".join([*words, *quoted, *opts])


def _call_argument(call_id: str) -> tuple[str, ...]:
    """The call id as a command's argument; none for an id too long to print."""
    return () if len(call_id) > MAX_ID_CHARS else (call_id,)


def approve_command(session_id: str, call_id: str, how: ContinueWith | None = None) -> str:
    """Return `duraloop approve ID CALL [--continue ...]` (with the `--store` in use)."""
    how = how or ContinueWith()
    options = ["--continue", *how.options()] if how.keep_going else []
    return command_line(("duraloop", "approve"), (session_id, *_call_argument(call_id)), options)


def deny_command(session_id: str, call_id: str, how: ContinueWith | None = None) -> str:
    """Return `duraloop deny ID CALL --reason TEXT [--continue ...]` (with the `--store`)."""
    how = how or ContinueWith()
    options = ["--reason", "TEXT", *(["--continue", *how.options()] if how.keep_going else [])]
    return command_line(("duraloop", "deny"), (session_id, *_call_argument(call_id)), options)


def resume_command(session_id: str, how: ContinueWith | None = None) -> str:
    """Return `duraloop resume ID [--model ...]` (with the `--store` in use)."""
    return command_line(("duraloop", "resume"), (session_id,), (how or ContinueWith()).options())


def pending_json_command() -> str:
    """Return `duraloop pending --json` (with the `--store` in use): it prints asks whole."""
    return command_line(("duraloop", "pending"), (), ("--json",))


def call_text(pending: PendingApproval) -> str:
    """Return `call ID (TOOL)`, escaped and bounded."""
    return (
        f"call {ident(pending.call_id, MAX_NAME_CHARS)} "
        f"({ident(pending.tool_name, MAX_NAME_CHARS)})"
    )


def arguments_text(arguments: str) -> str:
    """Return a waiting call's arguments for a person deciding: whole, escaped, bounded.

    Up to `MAX_ARGUMENTS_CHARS` characters are shown as written (control characters, line
    breaks and tabs as escapes, no whitespace folded); past that the text says how many
    more there are and which command prints the whole ask.
    """
    text = arguments or "{}"
    shown = ident(text[:MAX_ARGUMENTS_CHARS], sys.maxsize)
    if len(text) <= MAX_ARGUMENTS_CHARS:
        return shown
    more = len(text) - MAX_ARGUMENTS_CHARS
    return (
        f"{shown}… [{more:,} more characters not shown; `{pending_json_command()}` prints "
        "the whole ask]"
    )


def _notes(session_id: str, call_id: str) -> list[str]:
    """Notes under the commands: an id spelled `$'...'`, a call id left out (`""`: none)."""
    notes = []
    if len(call_id) > MAX_ID_CHARS:
        notes.append("the call id is too long to print: the commands decide the call that waits")
    if any(shell_word(value).startswith("$'") for value in (session_id, call_id)):
        notes.append(
            "an id holds control characters: the commands spell it $'...' (bash, zsh); "
            "copy them as printed"
        )
    return notes


def pending_lines(
    session_id: str,
    pending: PendingApproval,
    *,
    indent: str = "",
    how: ContinueWith | None = None,
) -> list[Text]:
    """Return the lines that show a paused turn's ask and how to decide or continue it.

    Args:
        session_id: the paused session.
        pending: its ask (`PendingApproval`, decided or not).
        indent: put before every line.
        how: the options of the printed commands that run the turn on.

    Returns:
        The lines: what waits, the arguments and reason, then the commands.
    """
    how = how or ContinueWith()
    lines: list[Text] = []
    if pending.decided:
        feedback = (
            f" with feedback: {short_text(pending.feedback, MAX_REASON_CHARS)}"
            if pending.feedback
            else ""
        )
        lines.append(
            styled(
                indent,
                (f"paused: {call_text(pending)} is decided ", "yellow"),
                (ident(pending.outcome, MAX_NAME_CHARS), "bold"),
                feedback,
                (" (the turn has not gone on yet)", "yellow"),
            )
        )
    else:
        lines.append(styled(indent, (f"paused: {call_text(pending)} waits for approval", "yellow")))
    lines.append(styled(indent, "  arguments: ", arguments_text(pending.arguments)))
    lines.append(styled(indent, "  reason: ", short_text(pending.reason or "-", MAX_REASON_CHARS)))
    if pending.decided:
        lines.append(styled(indent, "  continue: ", resume_command(session_id, how)))
    else:
        call_id = pending.call_id
        lines.append(styled(indent, "  approve: ", approve_command(session_id, call_id, how)))
        lines.append(styled(indent, "  deny:    ", deny_command(session_id, call_id, how)))
        if not how.keep_going:
            lines.append(styled(indent, "  then:    ", resume_command(session_id, how)))
    named = "" if pending.decided else pending.call_id  # `resume` names no call
    lines += [styled(indent, (f"  ({note})", "dim")) for note in _notes(session_id, named)]
    return lines


def print_pending(
    console: Console,
    session_id: str,
    pending: PendingApproval,
    *,
    indent: str = "",
    how: ContinueWith | None = None,
) -> None:
    """Print `pending_lines` to `console`."""
    for line in pending_lines(session_id, pending, indent=indent, how=how):
        console.print(line)


def pending_json(session_id: str, pending: PendingApproval) -> dict[str, object]:
    """Return a paused session's ask for `duraloop pending --json`: every field, whole."""
    return {
        "session": session_id,
        "turn": pending.turn,
        "step": pending.step,
        "askId": pending.ask_id,
        "callId": pending.call_id,
        "toolName": pending.tool_name,
        "arguments": pending.arguments,
        "reason": pending.reason,
        "outcome": pending.outcome,
        "feedback": pending.feedback,
    }
