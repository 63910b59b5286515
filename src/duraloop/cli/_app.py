"""The `duraloop` commands: fork, show, check, ls, demo, and the others' modules.

run, chat and resume are in `_turn_commands`; pending, approve and deny in
`_approval_commands`.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .. import log as _log
from .. import store as _store
from ..errors import CorruptLogError, SessionForkError, UsageError
from . import _turn_commands  # noqa: F401 - registers run, chat and resume first

# isort: split
from . import _approval_commands  # noqa: F401 - then pending, approve and deny

# isort: split
from . import _compact_command  # noqa: F401 - then compact

# isort: split
from . import _db_command  # noqa: F401 - then db init

# isort: split
from . import _worker_commands  # noqa: F401 - then submit and worker

# isort: split
from . import _view_command  # noqa: F401 - then view

# isort: split
from ._console import app, err, out
from ._event_lines import print_events
from ._options import (
    JsonOption,
    StoreOption,
    json_option,
)
from ._render import (
    events_jsonl,
    ident,
    messages_json,
    print_header,
    print_json,
    print_messages,
    print_sessions,
    show_view,
    styled,
)
from ._stores import (
    StoreSpec,
    no_sessions_text,
    open_store,
    opened_store_text,
    session_log_file,
)
from ._transcript import render_transcript

if TYPE_CHECKING:
    from ..log import Event, SessionHeader


@app.command()
def fork(
    session_id: Annotated[str, typer.Argument(help="The session to fork.")],
    at: Annotated[
        int | None,
        typer.Option(
            "--at",
            help=(
                "Last inherited seq; a cut inside a turn is closed as crash repair closes one "
                "[default: the last event, or the last closed turn's end]."
            ),
        ),
    ] = None,
    new_id: Annotated[
        str | None, typer.Option("--id", help="The child's id [default: a new UUID].")
    ] = None,
    store: StoreOption = None,
) -> None:
    """Fork a session (the source is never changed) and print the new session id."""
    sessions = open_store(store)
    try:
        child = sessions.fork(session_id, boundary=at, child_id=new_id)
    except SessionForkError as exc:
        if exc.code == "OPEN_TURN" and at is None:
            from ._approval_flow import paused_fork_error

            paused = paused_fork_error(sessions, session_id)
            if paused is not None:
                raise paused from exc
        raise
    out.print(styled(ident(child)))


def _read(target: str, store: StoreSpec | None) -> tuple[SessionHeader, list[Event]]:
    path = session_log_file(target)
    if path is not None:
        return _store.read_log_file(path)
    return open_store(store).read(target)


@app.command()
def show(
    target: Annotated[
        str,
        typer.Argument(
            help="A session id, or a session log file (ours or a dsh JSONL) or its session folder."
        ),
    ],
    events: Annotated[bool, typer.Option("--events", help="Show the raw events.")] = False,
    messages: Annotated[
        bool,
        typer.Option("--messages", help="Show the derived messages (the next request's history)."),
    ] = False,
    as_json: Annotated[
        bool,
        json_option(
            "Machine output: JSONL events (alone or with --events), or a JSON array of messages "
            "(with --messages)."
        ),
    ] = False,
    store: StoreOption = None,
) -> None:
    """Show a session (never writes); an open final turn is shown as open."""
    view = show_view(events=events, messages=messages, as_json=as_json)
    header, log = _read(target, store)
    if view == "messages":
        from ..log import Session

        derived = Session(
            header.id, seed=log, header=header, check_invariants=False
        ).derive_messages()
        if as_json:
            sys.stdout.write(messages_json(derived) + "\n")
        else:
            print_messages(out, derived)
    elif view == "events":
        if as_json:
            sys.stdout.write(events_jsonl(log))
        else:
            print_events(out, log)
    else:
        from ._config_file import config_path  # the [prices] table alone, for the cost
        from ._prices import load_prices

        print_header(out, header)
        prices = load_prices(config_path(os.environ))
        render_transcript(out, log, prices=prices, session_id=header.id)


@app.command()
def check(
    target: Annotated[
        str, typer.Argument(help="A session id, or a session log file or its session folder.")
    ],
    as_json: JsonOption = False,
    store: StoreOption = None,
) -> None:
    """Check invariants and provider pairing (never writes); exit 1 with a report if invalid."""
    try:
        if (path := session_log_file(target)) is not None:
            header, log = _store.read_log_file(path)
            session_id, report = header.id, _log.check_log(header.id, log)
        else:
            session_id, report = target, open_store(store).check(target)
    except CorruptLogError as exc:
        # Damage is a finding of `check`, reported like any other problem (not a crash).
        if as_json:
            print_json({"session": target, "valid": False, "problems": [str(exc)]})
        else:
            out.print(styled(target, ": INVALID (the log cannot be read)"))
            out.print(styled("  - ", str(exc)))
        raise typer.Exit(1) from None
    rescue = None
    if report.rescue_seq is not None:
        rescue = _log.rescue_command(session_id, report.rescue_seq, store=opened_store_text())
        library = _log.rescue_command(session_id, report.rescue_seq)
        report = replace(report, problems=[p.replace(library, rescue) for p in report.problems])
    if as_json:
        print_json({"session": session_id, **report.to_json(), "rescue": rescue})
        raise typer.Exit(0 if report.valid else 1)
    status = "valid" if report.valid else "INVALID"
    out.print(
        styled(
            ident(session_id),
            f": {status} ({report.event_count} events, {report.turn_count} turns)",
        )
    )
    if report.open_turn is not None and report.closers_needed == 0:  # nothing to close
        out.print(
            f"  turn {report.open_turn} is paused: a call waits for approval (resume keeps the "
            "turn open; `duraloop pending` lists it)"
        )
    elif report.open_turn is not None:
        out.print(
            f"  turn {report.open_turn} is open (the log ends inside it): resume appends "
            f"{report.closers_needed} closer(s)"
        )
    if report.torn_tail_bytes:
        out.print(
            f"  the log ends in a torn tail of {report.torn_tail_bytes} bytes (resume truncates it)"
        )
    for problem in report.problems:
        out.print(styled("  - ", problem))
    if rescue is not None:
        out.print(
            styled("  rescue: ", rescue, "  (a new session keeps the history before the damage)")
        )
    raise typer.Exit(0 if report.valid else 1)


@app.command(name="ls")
def list_sessions(as_json: JsonOption = False, store: StoreOption = None) -> None:
    """List sessions: id, created, turns, the last turn's end reason."""
    summaries = open_store(store).list()
    if as_json:
        print_json([summary.to_json() for summary in summaries])
        return
    if not summaries:  # said on stderr, naming the store: a mistyped --store is seen at once
        err.print(styled((no_sessions_text(store), "yellow")))
        return
    print_sessions(out, summaries)


@app.command()
def demo(
    keep: Annotated[
        Path | None,
        typer.Option(
            "--dir", help="Put the demo workspace and store here [default: a new temp dir]."
        ),
    ] = None,
    approvals: Annotated[
        bool,
        typer.Option(
            "--approvals",
            help="Show approvals instead: a turn pauses on a write, `duraloop pending` lists "
            "it, a second process approves it, and the turn finishes.",
        ),
    ] = False,
    mcp: Annotated[
        bool,
        typer.Option(
            "--mcp",
            help="Show MCP tools instead: a bundled stdio MCP server's three read-only tools "
            "run in parallel and its destructive one alone (needs the mcp extra).",
        ),
    ] = False,
) -> None:
    """Run an offline demo: parallel tools, a failed step recovered, a resumed turn."""
    if approvals and mcp:
        raise UsageError("--approvals and --mcp are two demos; pass one of them")
    if mcp:
        from ._demo_mcp import run_mcp_demo

        run_mcp_demo(out, base=keep)
        return
    if approvals:
        from ._demo_approvals import run_approvals_demo

        run_approvals_demo(out, base=keep)
        return
    from ._demo import run_demo

    run_demo(out, err, base=keep)
