"""What `duraloop chat`'s `/` commands and its resumed history print (`/show`, `/fork`, help)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Final

from rich.console import Console

from ..log import Event, last_turn_end, turn_count, turn_starts
from ..loop import AgentLoop
from ..store import SessionStore
from ._approval_text import ContinueWith
from ._render import ident, safe, styled
from ._stores import name_the_store, opened_store_text
from ._transcript import render_transcript

HISTORY_TURNS: Final = 2
"""How many of the latest turns a resumed chat shows before its first prompt."""

HELP: Final = (
    "while idle a line starts a turn; while a turn runs a line steers it. "
    "Commands: /show (the transcript), /fork (a new session at the last closed turn), "
    "/compact (summarize the history so far into one checkpoint), "
    "/quit (cancel a running turn durably and exit). Ctrl-C cancels the turn; twice exits."
)


def last_closed_turn_seq(events: Sequence[Event]) -> int | None:
    """Return the seq of the last `turn/end`, or None before the first turn closed."""
    end = last_turn_end(events, before=len(events))
    return None if end is None else events[end].seq


def recent_history(events: Sequence[Event], turns: int = HISTORY_TURNS) -> list[Event]:
    """Return the events from the start of the last `turns` turns on."""
    starts = turn_starts(events)
    if not starts:
        return []
    return list(events[starts[-turns] if len(starts) >= turns else starts[0] :])


def show_history(console: Console, loop: AgentLoop) -> None:
    """Print the latest turns of a resumed session."""
    events = loop.session.events
    recent = recent_history(events)
    if not recent:
        return
    total = turn_count(events)
    shown = turn_count(recent)
    console.print(
        safe(
            f"── recent history: the last {shown} of {total} turn(s); "
            + name_the_store(f"`duraloop show {shlex.quote(ident(loop.session.id))}` prints all"),
            "dim",
        )
    )
    render_transcript(console, recent, session_id=loop.session.id)


def show(console: Console, loop: AgentLoop, *, running: bool) -> None:
    """`/show`: print the session's transcript (a running turn shown as running)."""
    console.print(styled((f"session {ident(loop.session.id)}", "bold")))
    render_transcript(console, loop.session.events, running=running, session_id=loop.session.id)


def fork(
    console: Console,
    errors: Console,
    store: SessionStore,
    loop: AgentLoop,
    how: ContinueWith | None = None,
) -> None:
    """`/fork`: fork the session at its last closed turn and say how to chat in the child.

    The printed command carries the chat's `--mcp` servers (`how.mcp`), if any.
    """
    boundary = last_closed_turn_seq(loop.session.events)
    if boundary is None:
        errors.print(styled(("nothing to fork yet: no turn has closed in this session", "yellow")))
        return
    child = store.fork(loop.session.id, boundary=boundary)
    console.print(styled("forked: ", ident(child)))
    where = "" if (spec := opened_store_text()) is None else f" --store {shlex.quote(spec)}"
    if how is not None and how.mcp:
        where += f" --mcp {shlex.quote(how.mcp)}"
    console.print(
        styled("continue it with: duraloop chat --session ", ident(shlex.quote(child)), where)
    )


async def compact(console: Console, errors: Console, loop: AgentLoop, running: bool) -> None:
    """`/compact`: compact the history between turns and say what it did (docs/compaction.md).

    While a turn runs it only says so. A compaction that cannot run (a paused turn) or fails
    (the summary request) is printed as one line; the chat goes on, the history unchanged.
    """
    from ..errors import CompactionError, LlmError, UsageError
    from ._compact_command import compaction_text

    if running:
        errors.print(styled(("a turn is running: /compact between turns", "yellow")))
        return
    try:
        result = await loop.compact()
    except (CompactionError, LlmError, UsageError) as exc:
        errors.print(styled(("compaction failed: ", "red"), str(exc)))
    else:
        console.print(styled((compaction_text(result), "dim")))
