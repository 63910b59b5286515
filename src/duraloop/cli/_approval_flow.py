"""What `pending`, `approve`, `deny` and `resume` do with a paused session.

A turn whose call waits for a person's approval is paused: it stays open in the log and the
process may exit (`run` exits 3). Any later process can list it (`pending`, read-only, no
writer lock), decide it (`approve`/`deny`: under the session's single writer lock, durable
when the command says so) and run the turn on (`--continue` here, or `duraloop resume ID`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import anyio
import typer

from ..errors import ApprovalError, CorruptLogError, SessionLockedError, SessionNotFoundError
from ..log import pending_approval
from ._approval_options import asked_tools
from ._approval_text import MAX_REASON_CHARS, call_text, print_pending, resume_command
from ._console import err, out
from ._options import TurnOptions
from ._render import MAX_NAME_CHARS, ident, repair_text, safe, short_text, styled
from ._runner import EXIT_PAUSED, exit_code_for, run_live, utf8_argument
from ._stores import StoreSpec, default_store_spec, name_the_store, open_store

if TYPE_CHECKING:
    from ..llm import ModelRequest, StreamChunk
    from ..log import Event, PendingApproval
    from ..loop import AgentLoop, SessionSetup, TurnResult
    from ..store import RepairReport, SessionStore

EXIT_USAGE = 2


def usage_exit(exc: Exception) -> NoReturn:
    """Print `exc` as the CLI's one-line `Type: message` report and exit 2 (a usage error).

    Raises:
        typer.Exit: always, with status 2.
    """
    err.print(styled((type(exc).__name__, "red"), ": ", name_the_store(str(exc))))
    raise typer.Exit(EXIT_USAGE)


def not_paused_error(session_id: str) -> ApprovalError:
    """Return the error refusing a decision for a session whose turn is not paused."""
    return ApprovalError(
        f'session "{session_id}" is not paused: no call waits for approval; '
        "`duraloop pending` lists the sessions that wait"
    )


def paused_prompt_error(session_id: str, pending: PendingApproval) -> ApprovalError:
    """Return the error refusing a new prompt while the session's turn is paused."""
    if pending.decided:
        todo = f"continue the paused turn first with `{resume_command(session_id)}`"
    else:
        todo = (
            f"decide it first (`duraloop approve {session_id}` or `duraloop deny {session_id}`, "
            "with --continue to run the turn on)"
        )
    return ApprovalError(
        f'session "{session_id}" is paused: {call_text(pending)} waits for approval, so no new '
        f"turn can start; {todo}, then run a new prompt"
    )


def refuse_prompt_while_paused(loop: AgentLoop) -> None:
    """Refuse to run a new turn on a paused session, naming how to go on.

    Raises:
        ApprovalError: if `loop` is paused.
    """
    if loop.paused is not None:
        raise paused_prompt_error(loop.session.id, loop.paused)


def finish_turn(loop: AgentLoop, result: TurnResult) -> int:
    """Print a paused turn's ask (if it paused) and return the command's exit status."""
    if result.approval is not None:
        print_pending(out, loop.session.id, result.approval)
    return exit_code_for(result.kind)


async def continue_live(loop: AgentLoop) -> int:
    """Continue `loop`'s decided paused turn live, as `run` runs one; return the exit status."""
    if loop.paused is not None:
        out.print(styled((f"── turn {loop.paused.turn} goes on", "bold")))
    try:
        result = await run_live(loop, loop.continue_turn, console=out, errors=err)
        return finish_turn(loop, result)
    finally:
        out.print(styled("session: ", ident(loop.session.id)))


def resume_paused(
    session_id: str,
    events: list[Event],
    pending: PendingApproval,
    *,
    turn: TurnOptions,
    sessions: SessionStore,
    cwd: Path | None,
) -> int:
    """`duraloop resume ID` of a paused session: show a waiting ask, or continue a decided one.

    Args:
        session_id: the session.
        events: its log, for the tools it asked about (`ApprovalFlags.asking`).
        pending: its paused ask.
        turn: the command's options (the model, for a decided ask).
        sessions: the store.
        cwd: `--cwd`.

    Returns:
        The exit status: `EXIT_PAUSED` for an undecided ask, else the continued turn's.
        Another writer of the session prints one line and exits 2.
    """
    if not pending.decided:
        print_pending(out, session_id, pending)
        return EXIT_PAUSED
    setup = turn.session_setup(sessions, cwd=cwd, asked_before=asked_tools(events))
    loop, repair = _resume(session_id, setup)
    err.print(safe(f"{ident(session_id)}: {repair_text(repair)}"))
    with loop:
        return anyio.run(continue_live, loop)


class _NoModel:
    """The model of a loop that only records a decision: it never sends a request."""

    provider = "none"
    model = "none"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """Refuse: a loop that records a decision runs no turn (a bug if this is reached)."""
        raise ApprovalError("this loop only records a decision; pass --continue to run a turn")
        yield  # pragma: no cover - makes this an async generator


def _resume(session_id: str, setup: SessionSetup) -> tuple[AgentLoop, RepairReport]:
    """`resume_session`, with another writer of the session reported as a usage error (2)."""
    from ..loop import resume_session

    try:
        return resume_session(session_id, setup)
    except SessionLockedError as exc:
        usage_exit(exc)


def decide(
    session_id: str,
    call_id: str | None,
    *,
    allow: bool,
    feedback: str | None,
    keep_going: bool,
    turn: TurnOptions,
    store: StoreSpec | None,
    cwd: Path | None,
) -> int:
    """Record a decision for a paused session's waiting call; with `keep_going`, continue.

    Args:
        session_id: the paused session.
        call_id: the waiting call; None for the one that waits.
        allow: approve (True) or reject (False).
        feedback: with a rejection, what the model is told.
        keep_going: `--continue`: run the turn on, live.
        turn: the command's options (the model, for `--continue`).
        store: `--store`.
        cwd: `--cwd`.

    Returns:
        0 once recorded; with `keep_going`, the continued turn's status (`exit_code_for`).
        Usage errors (not paused, not the waiting call, already decided, another writer)
        print one line and exit 2.
    """
    try:
        if not keep_going:
            turn.refuse_model_flags(
                when="with --continue (when the turn runs on)",
                instead="add --continue to run the turn now, or drop {them} to only record "
                "the decision",
            )
        sessions = open_store(store)
        header, events = sessions.read(session_id)
        if pending_approval(events) is None:
            raise not_paused_error(session_id)
        if not keep_going and cwd is None and header.cwd and not Path(header.cwd).is_dir():
            cwd = Path.cwd()  # no tool runs: a session made on another machine can be decided
        if keep_going:
            setup = turn.session_setup(sessions, cwd=cwd, asked_before=asked_tools(events))
        else:
            from ..loop import SessionSetup
            from ..tools import builtin_tools

            setup = SessionSetup(store=sessions, model=_NoModel(), tools=builtin_tools(), cwd=cwd)
        loop, _repair = _resume(session_id, setup)
        with loop:
            return anyio.run(_decide_live, loop, call_id, allow, feedback, keep_going)
    except ApprovalError as exc:
        usage_exit(exc)


async def _decide_live(
    loop: AgentLoop, call_id: str | None, allow: bool, feedback: str | None, keep_going: bool
) -> int:
    session_id = loop.session.id
    pending = loop.paused
    if pending is None:  # continued by another process between the read and the lock
        raise not_paused_error(session_id)
    decided = await loop.decide(
        call_id if call_id is not None else pending.call_id, allow=allow, feedback=feedback
    )
    told = (
        f"; the model is told: {short_text(decided.feedback, MAX_REASON_CHARS)}"
        if decided.feedback
        else ""
    )
    out.print(
        styled(
            ("recorded: ", "green"),
            f"{call_text(decided)} of session {ident(session_id)} is ",
            (ident(decided.outcome, MAX_NAME_CHARS), "bold"),
            told,
        )
    )
    if not keep_going:
        out.print(styled("continue the turn with: ", resume_command(session_id)))
        return 0
    return await continue_live(loop)


def feedback_of(reason: str | None) -> str | None:
    """Return `deny --reason` as the rejection's feedback (None when not given or blank).

    Raises:
        UsageError: if the text is not UTF-8.
    """
    if reason is None:
        return None
    text = utf8_argument(reason, source="the --reason text", fix="pass the feedback as UTF-8")
    return text if text.strip() else None


def list_paused(sessions: SessionStore) -> list[tuple[str, PendingApproval]]:
    """Return each paused session of the store with its ask, oldest first.

    Read-only: no writer lock is taken, nothing is repaired. Only sessions listed as
    paused are read; one that changed or broke since the listing is skipped with a
    line on stderr.
    """
    found: list[tuple[str, PendingApproval]] = []
    for summary in sessions.list():
        if summary.damaged is not None or summary.turn_count == 0:
            continue
        if summary.last_turn_end != "paused":
            continue
        try:
            events = sessions.read(summary.id)[1]
        except (CorruptLogError, SessionNotFoundError) as exc:
            err.print(styled((f"skipped {ident(summary.id)}: ", "yellow"), str(exc)))
            continue
        ask = pending_approval(events)
        if ask is not None:
            found.append((summary.id, ask))
    return found


def print_paused(spec: StoreSpec | None, paused: list[tuple[str, PendingApproval]]) -> None:
    """Print `duraloop pending`: each paused session and its ask, or that there is none."""
    if not paused:  # on stderr, naming the store, as `ls` says it has no sessions
        where = spec if spec is not None else default_store_spec()
        err.print(styled((f"no paused sessions in {where}", "yellow")))
        return
    for index, (session_id, ask) in enumerate(paused):
        if index:
            out.print()
        out.print(styled((f"session {ident(session_id)}", "bold"), f" (turn {ask.turn})"))
        print_pending(out, session_id, ask, indent="  ")
