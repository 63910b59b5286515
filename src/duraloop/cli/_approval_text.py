"""How the CLI shows a call that waits for approval, and the commands that decide it.

`run`, `resume`, `chat` and `pending` print the same block: the waiting call (tool, call
id, its arguments cut to `MAX_ARGUMENTS_CHARS` and escaped, the reason), then the exact
commands that approve or deny it (with the `--store` in use), or, once decided, the one that
continues the turn. Every value in it comes from the model or the log: untrusted, so each
goes through `ident` or `styled` (control characters shown as escapes, never markup).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from rich.console import Console
from rich.text import Text

from ..log.vocabulary import APPROVAL_ASKED, APPROVAL_POLICY
from ._render import MAX_NAME_CHARS, ident, short_text, styled
from ._stores import opened_store_text

if TYPE_CHECKING:
    from ..log import PendingApproval

MAX_ARGUMENTS_CHARS: Final = 200
"""Most characters of a waiting call's arguments shown (whitespace folded, then cut)."""
MAX_REASON_CHARS: Final = 300
"""Most characters of an ask's reason or a rejection's feedback shown on one line."""


def command_line(words: Sequence[str], arguments: Sequence[str], options: Sequence[str]) -> str:
    """Return a shell command: `words`, the quoted `arguments`, then `options`.

    An argument that starts with `-` would read as an option: then the options come
    first and `--` ends them.

    Args:
        words: the command's words (`duraloop`, `approve`).
        arguments: positional values, each quoted for a POSIX shell.
        options: the options, already quoted where needed.

    Returns:
        The command line, with the `--store` in use appended to the options.
    """
    store = opened_store_text()
    opts = [*options, *([] if store is None else ["--store", shlex.quote(store)])]
    quoted = [shlex.quote(value) for value in arguments]
    if any(value.startswith("-") for value in arguments):
        return " ".join([*words, *opts, "--", *quoted])
    return " ".join([*words, *quoted, *opts])


def approve_command(session_id: str, call_id: str) -> str:
    """Return `duraloop approve ID CALL --continue` (with the `--store` in use)."""
    return command_line(("duraloop", "approve"), (session_id, call_id), ("--continue",))


def deny_command(session_id: str, call_id: str) -> str:
    """Return `duraloop deny ID CALL --reason TEXT --continue` (with the `--store` in use)."""
    return command_line(
        ("duraloop", "deny"), (session_id, call_id), ("--reason", "TEXT", "--continue")
    )


def resume_command(session_id: str) -> str:
    """Return `duraloop resume ID` (with the `--store` in use)."""
    return command_line(("duraloop", "resume"), (session_id,), ())


def call_text(pending: PendingApproval) -> str:
    """Return `call ID (TOOL)`, escaped and bounded."""
    return (
        f"call {ident(pending.call_id, MAX_NAME_CHARS)} "
        f"({ident(pending.tool_name, MAX_NAME_CHARS)})"
    )


def pending_lines(session_id: str, pending: PendingApproval, *, indent: str = "") -> list[Text]:
    """Return the lines that show a paused turn's ask and how to decide or continue it.

    Args:
        session_id: the paused session.
        pending: its ask (`PendingApproval`, decided or not).
        indent: put before every line.

    Returns:
        The lines: what waits, the arguments and reason, then the commands.
    """
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
    lines.append(
        styled(indent, "  arguments: ", short_text(pending.arguments or "{}", MAX_ARGUMENTS_CHARS))
    )
    lines.append(styled(indent, "  reason: ", short_text(pending.reason or "-", MAX_REASON_CHARS)))
    if pending.decided:
        lines.append(styled(indent, "  continue: ", resume_command(session_id)))
    else:
        lines.append(styled(indent, "  approve: ", approve_command(session_id, pending.call_id)))
        lines.append(styled(indent, "  deny:    ", deny_command(session_id, pending.call_id)))
    return lines


def print_pending(
    console: Console, session_id: str, pending: PendingApproval, *, indent: str = ""
) -> None:
    """Print `pending_lines` to `console`."""
    for line in pending_lines(session_id, pending, indent=indent):
        console.print(line)


class ApprovalLines:
    """The lines of `approval/*` events (transcript and live); a decision names its call."""

    def __init__(self) -> None:
        self._calls: dict[str, tuple[str, str]] = {}  # ask id -> (call id, tool name)

    def line(self, kind: str, data: dict[str, Any]) -> Text:
        """Return the line of one `approval/asked`, `approval/decided` or `approval/policy`."""
        if kind == APPROVAL_POLICY:
            return styled(
                (f"── approval policy: {ident(data.get('policy'), MAX_NAME_CHARS)}", "dim")
            )
        if kind == APPROVAL_ASKED:
            call = (str(data.get("callId")), str(data.get("toolName")))
            self._calls[str(data.get("id"))] = call
            reason = short_text(str(data.get("reason") or "-"), MAX_REASON_CHARS)
            return styled(
                ("  ? ", "yellow"),
                f"{ident(call[1], MAX_NAME_CHARS)} ({ident(call[0], MAX_NAME_CHARS)}) asks for "
                f"approval: {reason}",
            )
        asked = self._calls.get(str(data.get("id")))  # None: asked before this renderer saw
        feedback = data.get("feedback")
        told = f": {short_text(str(feedback), MAX_REASON_CHARS)}" if feedback else ""
        called = (
            ""
            if asked is None
            else f" for {ident(asked[1], MAX_NAME_CHARS)} ({ident(asked[0], MAX_NAME_CHARS)})"
        )
        outcome = ident(data.get("outcome"), MAX_NAME_CHARS)
        return styled(("  ! ", "yellow"), f"approval {outcome}{called}{told}")
