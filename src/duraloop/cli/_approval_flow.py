"""What `pending`, `approve`, `deny` and `resume` do with a paused session.

A turn whose call waits for a person's approval is paused: it stays open in the log and the
process may exit (`run` exits 3). Any later process can list it (`pending`, read-only, no
writer lock), decide it (`approve`/`deny`: under the session's single writer lock, durable
when the command says so) and run the turn on (`--continue` here, or `duraloop resume ID`).
Whether a turn goes on is the library's answer: it does when `loop.pending_approvals()` is
empty (the ask is decided, or this command's policy or allow-list answers it).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer

from ..errors import (
    ApprovalError,
    SessionForkError,
    SessionLockedError,
    UsageError,
)
from ..log import MAX_FEEDBACK_CHARS, pending_approval
from ._approval_lines import MAX_REASON_CHARS
from ._approval_text import (
    ContinueWith,
    approve_command,
    call_text,
    command_line,
    deny_command,
    print_pending,
    resume_command,
)
from ._console import err, out
from ._decision import (
    NoModel,
    not_paused_error,
    queue_continuation,
    record_decision,
    recording_setup,
)
from ._mcp_config import parse_mcp_names
from ._mcp_run import mcp_configs, run_with_mcp
from ._options import TurnOptions
from ._render import MAX_NAME_CHARS, ident, repair_text, safe, short_text, styled
from ._runner import EXIT_PAUSED, exit_code_for, run_live, utf8_argument
from ._stores import StoreSpec, name_the_store, open_store

if TYPE_CHECKING:
    from ..log import PendingApproval
    from ..loop import AgentLoop, SessionSetup, TurnResult
    from ..store import RepairReport, SessionStore
    from ._otel import Tracing

EXIT_USAGE = 2


def usage_exit(exc: Exception) -> NoReturn:
    """Print `exc` as the CLI's one-line `Type: message` report and exit 2 (a usage error).

    Raises:
        typer.Exit: always, with status 2.
    """
    err.print(styled((type(exc).__name__, "red"), ": ", name_the_store(str(exc))))
    raise typer.Exit(EXIT_USAGE)


def continue_with(turn: TurnOptions, setup: SessionSetup | None) -> ContinueWith:
    """Return the options of the commands a command prints to run a paused turn on.

    Args:
        turn: the printing command's options: its `--model` (printed when given; else
            `--model SPEC` unless a default model applies) and `--auto-approve`.
        setup: its setup, whose tools that ask are printed as `--ask-before`; None when
            it opened no tools (then `--ask-before` is printed only when given).
    """
    if setup is not None:
        asking: frozenset[str] | None = frozenset(
            tool.name for tool in setup.tools if tool.requires_approval is True
        )
    else:
        asking = None if turn.approval.ask_before is None else turn.approval.asking()
    return ContinueWith(
        model=turn.model,
        model_placeholder=not turn.model_given(),
        ask_before=asking,
        auto_approve=turn.approval.auto_approved(),
        mcp=None if turn.mcp is None else ",".join(parse_mcp_names(turn.mcp)),
    )


def paused_prompt_error(
    session_id: str, pending: PendingApproval, how: ContinueWith | None = None
) -> ApprovalError:
    """Return the error refusing a new prompt while the session's turn is paused."""
    if pending.decided:
        state = (
            f"is decided ({ident(pending.outcome, MAX_NAME_CHARS)}) but not carried out yet, "
            f"so no new turn can start; continue the paused turn first with "
            f"`{resume_command(session_id, how)}`"
        )
    else:
        state = (
            "waits for approval, so no new turn can start; decide it first with "
            f"`{approve_command(session_id, pending.call_id, how)}` or "
            f"`{deny_command(session_id, pending.call_id, how)}`"
        )
    return ApprovalError(
        f'session "{session_id}" is paused: {call_text(pending)} {state}, then run a new prompt'
    )


def refuse_prompt_while_paused(loop: AgentLoop, how: ContinueWith | None = None) -> None:
    """Refuse to run a new turn on a paused session, naming how to go on.

    Raises:
        ApprovalError: if `loop` is paused.
    """
    if loop.paused is not None:
        raise paused_prompt_error(loop.session.id, loop.paused, how)


def paused_fork_error(sessions: SessionStore, session_id: str) -> SessionForkError | None:
    """Return the error of a default fork of a paused session without a closed turn, or None."""
    pending = pending_approval(sessions.read(session_id)[1])
    if pending is None:
        return None
    resume = resume_command(session_id, ContinueWith(model_placeholder=True))
    if pending.decided:
        state, todo = "is decided, not yet carried out", f"continue it (`{resume}`)"
    else:
        approve = approve_command(session_id, pending.call_id, ContinueWith(keep_going=False))
        deny = deny_command(session_id, pending.call_id, ContinueWith(keep_going=False))
        state = "waits for approval"
        todo = f"decide it (`{approve}` or `{deny}`) and continue it (`{resume}`)"
    show = command_line(("duraloop", "show"), (session_id,), ("--events",))
    return SessionForkError(
        f'session "{session_id}" has no closed turn to fork yet: its only turn {pending.turn} '
        f"is paused ({call_text(pending)} {state}); {todo}, then fork; or fork inside it now "
        f"with --at SEQ, a seq before the ask (`{show}` lists each event's seq)",
        code="OPEN_TURN",
    )


def finish_turn(loop: AgentLoop, result: TurnResult, how: ContinueWith | None = None) -> int:
    """Print a paused turn's ask (if it paused) and return the command's exit status."""
    if result.approval is not None:
        print_pending(out, loop.session.id, result.approval, how=how)
    return exit_code_for(result.kind)


async def continue_live(loop: AgentLoop, how: ContinueWith | None = None) -> int:
    """Continue `loop`'s paused turn live, as `run` runs one; return the exit status.

    An ask no one here answers (`loop.pending_approvals()`) is printed instead (exit 3).
    """
    pending = loop.paused
    try:
        if pending is not None and loop.pending_approvals():
            print_pending(out, loop.session.id, pending, how=how)
            return EXIT_PAUSED
        if pending is not None:
            out.print(styled((f"── turn {pending.turn} goes on", "bold")))
        result = await run_live(loop, loop.continue_turn, console=out, errors=err)
        return finish_turn(loop, result, how)
    finally:
        out.print(styled("session: ", ident(loop.session.id)))


def resume_paused(
    session_id: str,
    *,
    turn: TurnOptions,
    sessions: SessionStore,
    cwd: Path | None,
    tracing: Tracing | None = None,
) -> int:
    """`duraloop resume ID` of a paused session: go on if it can, else show what waits.

    The turn goes on when no person must answer its ask (`loop.pending_approvals()` is
    empty: it is decided, or this command's policy or allow-list answers it); that needs a
    model. Otherwise the ask and the commands that decide it are printed.

    Args:
        session_id: the session.
        turn: the command's options.
        sessions: the store.
        cwd: `--cwd`.
        tracing: traces the loop (`--otel`), or None.

    Returns:
        `EXIT_PAUSED` while a person must answer, else the continued turn's status.
        Another writer of the session prints one line and exits 2.

    Raises:
        UsageError: if the turn can go on but no model is given anywhere.
    """
    placeholder = None if turn.model_given() else NoModel()
    setup = turn.session_setup(sessions, cwd=cwd, session_id=session_id, model=placeholder)
    loop, repair = _resume(session_id, setup)
    if tracing is not None:
        tracing.attach(loop)
    with loop:
        goes_on = loop.paused is not None and not loop.pending_approvals()
        if goes_on and placeholder is not None:
            no_model(turn)
        if goes_on:
            err.print(safe(f"{ident(session_id)}: {repair_text(repair)}"))
        how = continue_with(turn, setup)
        servers = mcp_configs(turn.mcp) if goes_on else []
        return run_with_mcp(servers, setup.tools, functools.partial(continue_live, loop, how))


def no_model(turn: TurnOptions) -> NoReturn:
    """Raise the error of a command that must run a turn and has no model anywhere.

    Raises:
        UsageError: always (`build_model`'s message: where a model can be given).
    """
    from ._config import build_model

    build_model(turn.model, env=os.environ)
    raise UsageError("no model given: pass --model SPEC")  # pragma: no cover - raised above


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
    """Record a person's decision for a paused session's waiting call; with `keep_going`, go on.

    The decision is the person's whatever the approval options say: `--approval-policy` and
    `--auto-approve` only answer later asks of the continued turn.

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
        servers = mcp_configs(turn.mcp) if keep_going else []  # checked before any write
        if keep_going:
            setup = turn.session_setup(sessions, cwd=cwd, session_id=session_id)
            how = continue_with(turn, setup)
        else:
            setup = recording_setup(sessions, header, cwd)
            how = continue_with(turn, None)
        loop, _repair = _resume(session_id, setup)
        with loop:
            workers = not keep_going and store is not None and store.kind == "postgresql"
            decided = functools.partial(
                _decide_live, loop, call_id, allow, feedback, keep_going, how, workers
            )
            code = run_with_mcp(servers, setup.tools, decided)
        if workers and store is not None:
            _queue_continuation(store, session_id)
        return code
    except ApprovalError as exc:
        usage_exit(exc)


def _queue_continuation(store: StoreSpec, session_id: str) -> None:
    """On a PostgreSQL store the workers carry the decision out: queue the continuation."""
    submission = queue_continuation(store, session_id)
    out.print(safe(f"queued the turn's continuation for the workers (submission {submission})"))


async def _decide_live(
    loop: AgentLoop,
    call_id: str | None,
    allow: bool,
    feedback: str | None,
    keep_going: bool,
    how: ContinueWith,
    workers_continue: bool = False,
) -> int:
    session_id = loop.session.id
    decided = await record_decision(loop, call_id, allow=allow, feedback=feedback, how=how)
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
        if not workers_continue:  # on a PostgreSQL store a worker continues it (queued next)
            out.print(styled("continue the turn with: ", resume_command(session_id, how)))
        return 0
    return await continue_live(loop, how)


def feedback_of(reason: str | None) -> str | None:
    """Return `deny --reason` as the rejection's feedback (None when not given or blank).

    Raises:
        UsageError: if the text is not UTF-8.
        typer.Exit: status 2 (one line said why) if it is longer than the log keeps
            (`MAX_FEEDBACK_CHARS`): nothing is recorded, rather than a cut reason.
    """
    if reason is None:
        return None
    text = utf8_argument(reason, source="the --reason text", fix="pass the feedback as UTF-8")
    if len(text) > MAX_FEEDBACK_CHARS:
        usage_exit(
            ApprovalError(
                f"the --reason text is {len(text):,} characters; a decision keeps at most "
                f"{MAX_FEEDBACK_CHARS:,}: shorten it (nothing was recorded)"
            )
        )
    return text if text.strip() else None
