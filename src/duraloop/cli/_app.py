"""The `duraloop` command line: run, chat, resume, fork, show, check, ls, demo."""

from __future__ import annotations

import functools
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import anyio
import typer
from rich.console import Console

from .. import log as _log
from .. import loop as _loop
from .. import store as _store
from ..errors import CorruptLogError
from ._help import DuraloopTyper, PlainHelpGroup, root_options
from ._options import (
    BaseUrlOption,
    CwdOption,
    EachTurnMaxStepsOption,
    JsonOption,
    MaxParallelOption,
    MaxStepsOption,
    MaxTokensOption,
    ModelOption,
    ReasoningEffortOption,
    StoreOption,
    SystemOption,
    TurnOptions,
    json_option,
)
from ._render import (
    events_jsonl,
    ident,
    messages_json,
    print_events,
    print_header,
    print_json,
    print_messages,
    print_sessions,
    render_transcript,
    repair_text,
    safe,
    show_view,
    styled,
)
from ._runner import exit_code_for, require_prompt, run_turn_live
from ._stores import (
    StoreSpec,
    no_sessions_text,
    open_store,
    opened_store_text,
    session_log_file,
)

if TYPE_CHECKING:
    from ..log import Event, SessionHeader

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


@app.command()
def run(
    prompt: Annotated[str, typer.Argument(help="The user's prompt for this turn.")],
    model: ModelOption = None,
    store: StoreOption = None,
    cwd: CwdOption = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help="Run in this session: continued if it exists, created with this id if not.",
        ),
    ] = None,
    max_parallel: MaxParallelOption = 10,
    max_steps: MaxStepsOption = 100,
    system: SystemOption = None,
    base_url: BaseUrlOption = None,
    max_tokens: MaxTokensOption = None,
    reasoning_effort: ReasoningEffortOption = None,
) -> None:
    """Run one turn and print the session id; exit 0 when the turn completes."""
    require_prompt(prompt)
    turn = TurnOptions(
        model=model,
        system=system,
        max_parallel=max_parallel,
        max_steps=max_steps,
        base_url=base_url,
        max_tokens=max_tokens,
        reasoning_effort=reasoning_effort,
    )
    setup = turn.session_setup(store, cwd=cwd)
    if session is None:
        loop = _loop.start_session(setup)
    else:
        # An existing session keeps its recorded workspace unless --cwd says otherwise.
        loop, repair = _loop.open_session(session, setup)
        if repair is not None and repair.closers:
            err.print(safe(f"repaired {ident(loop.session.id)}: {repair_text(repair)}", "yellow"))
    with loop:
        try:
            result = anyio.run(
                functools.partial(run_turn_live, loop, prompt, console=out, errors=err)
            )
        finally:
            out.print(styled("session: ", ident(loop.session.id)))
    raise typer.Exit(exit_code_for(result.kind))


@app.command(
    help="Chat interactively: a line starts a turn, typing during a turn steers it, Ctrl-C "
    "cancels it."
)
def chat(
    model: ModelOption = None,
    store: StoreOption = None,
    cwd: CwdOption = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help=(
                "Chat in this session: resumed (with repair) if it exists, created with this id "
                "if not."
            ),
        ),
    ] = None,
    max_parallel: MaxParallelOption = 10,
    max_steps: EachTurnMaxStepsOption = 100,
    system: SystemOption = None,
    base_url: BaseUrlOption = None,
    max_tokens: MaxTokensOption = None,
    reasoning_effort: ReasoningEffortOption = None,
) -> None:
    """Chat interactively: a line starts a turn, typing during a turn steers it.

    Ctrl-C cancels it. (The `help=` above keeps the command's help one paragraph.)
    """
    from ._chat import run_chat

    turn = TurnOptions(
        model=model,
        system=system,
        max_parallel=max_parallel,
        max_steps=max_steps,
        base_url=base_url,
        max_tokens=max_tokens,
        reasoning_effort=reasoning_effort,
    )
    setup = turn.session_setup(store, cwd=cwd)
    repair = None
    if session is None:
        loop = _loop.start_session(setup)
    else:
        loop, repair = _loop.open_session(session, setup)
    with loop:
        out.print(styled("session: ", ident(loop.session.id)))
        if repair is not None:
            err.print(safe(f"resumed {ident(loop.session.id)}: {repair_text(repair)}"))
        chat_turns = functools.partial(
            run_chat, loop, setup.store, console=out, errors=err, resumed=repair is not None
        )
        code = anyio.run(chat_turns)
    raise typer.Exit(code)


@app.command()
def resume(
    session_id: Annotated[str, typer.Argument(help="The session to resume.")],
    prompt: Annotated[
        str | None, typer.Argument(help="A prompt for a new turn (optional).")
    ] = None,
    model: ModelOption = None,
    store: StoreOption = None,
    cwd: CwdOption = None,
    max_parallel: MaxParallelOption = 10,
    max_steps: MaxStepsOption = 100,
    system: SystemOption = None,
    base_url: BaseUrlOption = None,
    max_tokens: MaxTokensOption = None,
    reasoning_effort: ReasoningEffortOption = None,
) -> None:
    """Load a session with crash repair, say what repair did, optionally run a turn."""
    turn = TurnOptions(
        model=model,
        system=system,
        max_parallel=max_parallel,
        max_steps=max_steps,
        base_url=base_url,
        max_tokens=max_tokens,
        reasoning_effort=reasoning_effort,
    )
    sessions = open_store(store)
    if prompt is None:
        turn.refuse_model_flags()
        loaded = sessions.prepare(session_id)[0]  # repair only: the prefix stays on disk
        out.print(safe(f"{ident(session_id)}: {repair_text(loaded.repair)}"))
        return
    require_prompt(prompt)
    loop, repair = _loop.resume_session(session_id, turn.session_setup(sessions, cwd=cwd))
    err.print(safe(f"{ident(session_id)}: {repair_text(repair)}"))
    with loop:
        result = anyio.run(functools.partial(run_turn_live, loop, prompt, console=out, errors=err))
        out.print(styled("session: ", ident(session_id)))
    raise typer.Exit(exit_code_for(result.kind))


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
    child = open_store(store).fork(session_id, boundary=at, child_id=new_id)
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
        print_header(out, header)
        render_transcript(out, log)


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
    if report.open_turn is not None:
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
) -> None:
    """Run an offline demo: parallel tools, a failed step recovered, a resumed turn."""
    from ._demo import run_demo

    run_demo(out, err, base=keep)
