"""The `duraloop` command line: run, chat, resume, fork, show, check, ls, demo."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import anyio
import typer
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from ..errors import CorruptLogError, DuraloopError, UsageError
from ..log import Event, SessionHeader, check_log
from ..loop import LoopConfig, open_session, resume_session, start_session
from ..store import read_log_file
from ..tools import builtin_tools
from ._chat import run_chat
from ._config import build_model
from ._render import events_jsonl, messages_json, render_transcript
from ._runner import refuse_model_flags_without_prompt, require_prompt, run_turn_live
from ._stores import StoreSpec, open_store, store_option

app = typer.Typer(
    name="duraloop",
    help="A durable agent loop: every tool call answered, every crash repairable.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)
# soft_wrap: a line is never broken at the console width (a piped `session: <id>` line or a
# one-line error must stay one line; the terminal wraps long lines itself).
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

StoreOption = Annotated[
    StoreSpec | None,
    typer.Option(
        "--store",
        envvar="DURALOOP_STORE",
        parser=store_option,
        metavar="STORE",
        help="Session store: jsonl:DIR (or DIR; an existing root keeps its encoding, a new one is raw), "
        "jsonl+zstd:DIR or sqlite:PATH \\[default: $DURALOOP_HOME/sessions, ~/.duraloop/sessions].",
    ),
]
CwdOption = Annotated[
    Path | None, typer.Option("--cwd", help="Workspace directory the tools are confined to \\[default: current directory].")
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        envvar="DURALOOP_MODEL",
        help="Model spec: scripted:PATH, replay:PATH (a session log, ours or dsh's), openai:MODEL, deepseek:MODEL "
        "or anthropic:MODEL \\[default: default_model in $DURALOOP_HOME/config.toml].",
    ),
]
BaseUrlOption = Annotated[
    str | None,
    typer.Option("--base-url", help="The provider's API root, over *_BASE_URL and the config file (openai:, deepseek:, anthropic: only)."),
]
MaxTokensOption = Annotated[
    int | None,
    typer.Option("--max-tokens", min=1, help="Output token cap per model request, over the config file (openai:, deepseek:, anthropic: only)."),
]
ReasoningEffortOption = Annotated[
    str | None,
    typer.Option(
        "--reasoning-effort",
        help="The provider's reasoning effort, e.g. deepseek: off|low|high|max, over the config file (openai:, deepseek:, anthropic: only).",
    ),
]


JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def _print_json(value: object) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")


def _system(text: str | None) -> str | None:
    if text is not None and text.startswith("@"):
        path = Path(text[1:])
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else f"not UTF-8 text ({exc.reason})"
            raise UsageError(
                f"cannot read the system prompt file {str(path)!r} (from --system {text}): "
                f"{reason}; pass the prompt text itself, or @FILE naming a readable UTF-8 file"
            ) from exc
    return text


def _exit_for(kind: str) -> int:
    return 0 if kind in ("completed", "max-tokens") else 1


@app.command()
def run(
    prompt: Annotated[str, typer.Argument(help="The user's prompt for this turn.")],
    model: ModelOption = None,
    store: StoreOption = None,
    cwd: CwdOption = None,
    session: Annotated[str | None, typer.Option("--session", help="Run in this session: continued if it exists, created with this id if not.")] = None,
    max_parallel: Annotated[int, typer.Option("--max-parallel", min=1, help="Most tool calls running at once (at least 1).")] = 10,
    max_steps: Annotated[int, typer.Option("--max-steps", min=1, help="Most steps (model requests) in the turn (at least 1).")] = 100,
    system: Annotated[str | None, typer.Option("--system", help="System prompt text, or @FILE to read it.")] = None,
    base_url: BaseUrlOption = None,
    max_tokens: MaxTokensOption = None,
    reasoning_effort: ReasoningEffortOption = None,
) -> None:
    """Run one turn and print the session id; exit 0 when the turn completes."""
    require_prompt(prompt)
    llm = build_model(model, env=os.environ, base_url=base_url, max_tokens=max_tokens, reasoning_effort=reasoning_effort)
    config = LoopConfig(max_parallel_tool_calls=max_parallel, max_steps=max_steps, system_prompt=_system(system))
    sessions = open_store(store)
    if session is None:
        workspace = (cwd or Path.cwd()).resolve()
        loop = start_session(store=sessions, model=llm, tools=builtin_tools(), cwd=workspace, config=config)
    else:
        # An existing session keeps its recorded workspace unless --cwd says otherwise.
        loop, repair = open_session(session, store=sessions, model=llm, tools=builtin_tools(), cwd=cwd, config=config)
        if repair is not None and repair.closers:
            err.print(f"[yellow]repaired {loop.session.id}: {_repair_text(repair)}[/yellow]")
    with loop:
        try:
            result = anyio.run(functools.partial(run_turn_live, loop, prompt, console=out, errors=err))
        finally:
            out.print(f"session: {loop.session.id}")
    raise typer.Exit(_exit_for(result.kind))


@app.command()
def chat(
    model: ModelOption = None,
    store: StoreOption = None,
    cwd: CwdOption = None,
    session: Annotated[str | None, typer.Option("--session", help="Chat in this session: resumed (with repair) if it exists, created with this id if not.")] = None,
    max_parallel: Annotated[int, typer.Option("--max-parallel", min=1, help="Most tool calls running at once (at least 1).")] = 10,
    max_steps: Annotated[int, typer.Option("--max-steps", min=1, help="Most steps (model requests) in each turn (at least 1).")] = 100,
    base_url: BaseUrlOption = None,
    max_tokens: MaxTokensOption = None,
    reasoning_effort: ReasoningEffortOption = None,
) -> None:
    """Chat interactively: a line starts a turn, typing during a turn steers it, Ctrl-C cancels it."""
    llm = build_model(model, env=os.environ, base_url=base_url, max_tokens=max_tokens, reasoning_effort=reasoning_effort)
    config = LoopConfig(max_parallel_tool_calls=max_parallel, max_steps=max_steps)
    sessions = open_store(store)
    repair = None
    if session is None:
        loop = start_session(store=sessions, model=llm, tools=builtin_tools(), cwd=(cwd or Path.cwd()).resolve(), config=config)
    else:
        loop, repair = open_session(session, store=sessions, model=llm, tools=builtin_tools(), cwd=cwd, config=config)
    with loop:
        out.print(f"session: {loop.session.id}")
        if repair is not None:
            err.print(f"resumed {loop.session.id}: {_repair_text(repair)}")
        code = anyio.run(functools.partial(run_chat, loop, sessions, console=out, errors=err, resumed=repair is not None))
    raise typer.Exit(code)


def _repair_text(repair: object) -> str:
    closers: list[Event] = list(getattr(repair, "closers", []))
    truncated = int(getattr(repair, "truncated_bytes", 0) or 0)
    parts = []
    if truncated:
        parts.append(f"truncated a torn tail of {truncated} bytes{getattr(repair, 'cut_text', '')}")
    if closers:
        kinds = []
        for event in closers:
            if event.type == "tool/result":
                kinds.append(f"tool/result {event.data['error']['code']} for {event.data['message']['source']['callId']}")
            elif event.type == "turn/end":
                kinds.append("turn/end interrupted")
            else:
                kinds.append(event.type)
        parts.append("appended " + ", ".join(kinds))
    return "; ".join(parts) if parts else "the log was balanced; nothing to repair"


@app.command()
def resume(
    session_id: Annotated[str, typer.Argument(help="The session to resume.")],
    prompt: Annotated[str | None, typer.Argument(help="A prompt for a new turn (optional).")] = None,
    model: ModelOption = None,
    store: StoreOption = None,
    cwd: CwdOption = None,
    max_parallel: Annotated[int, typer.Option("--max-parallel", min=1, help="Most tool calls running at once (at least 1).")] = 10,
    max_steps: Annotated[int, typer.Option("--max-steps", min=1, help="Most steps (model requests) in the turn (at least 1).")] = 100,
    base_url: BaseUrlOption = None,
    max_tokens: MaxTokensOption = None,
    reasoning_effort: ReasoningEffortOption = None,
) -> None:
    """Load a session with crash repair, say what repair did, optionally run a turn."""
    sessions = open_store(store)
    if prompt is None:
        refuse_model_flags_without_prompt(model=model, base_url=base_url, max_tokens=max_tokens, reasoning_effort=reasoning_effort)
        loaded = sessions.load(session_id)
        out.print(f"{session_id}: {_repair_text(loaded.repair)}")
        return
    require_prompt(prompt)
    llm = build_model(model, env=os.environ, base_url=base_url, max_tokens=max_tokens, reasoning_effort=reasoning_effort)
    config = LoopConfig(max_parallel_tool_calls=max_parallel, max_steps=max_steps)
    loop, repair = resume_session(session_id, store=sessions, model=llm, tools=builtin_tools(), cwd=cwd, config=config)
    err.print(f"{session_id}: {_repair_text(repair)}")
    with loop:
        result = anyio.run(functools.partial(run_turn_live, loop, prompt, console=out, errors=err))
        out.print(f"session: {session_id}")
    raise typer.Exit(_exit_for(result.kind))


@app.command()
def fork(
    session_id: Annotated[str, typer.Argument(help="The session to fork.")],
    at: Annotated[int | None, typer.Option("--at", help="Last inherited seq (a turn/end or a between-turn event) \\[default: the last event].")] = None,
    new_id: Annotated[str | None, typer.Option("--id", help="The child's id \\[default: a new UUID].")] = None,
    store: StoreOption = None,
) -> None:
    """Fork a session at a closed-turn boundary and print the new session id."""
    child = open_store(store).fork(session_id, boundary=at, child_id=new_id)
    out.print(child)


def _read(target: str, store: StoreSpec | None) -> tuple[SessionHeader, list[Event]]:
    path = Path(target)
    if path.is_file():
        return read_log_file(path)
    return open_store(store).read(target)


@app.command()
def show(
    target: Annotated[str, typer.Argument(help="A session id, or the path of a session log file (ours or a dsh JSONL).")],
    events: Annotated[bool, typer.Option("--events", help="Show the raw events.")] = False,
    messages: Annotated[bool, typer.Option("--messages", help="Show the derived messages (the next request's history).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine output: JSONL events or a JSON array of messages.")] = False,
    store: StoreOption = None,
) -> None:
    """Show a session (never writes); an open final turn is shown as open."""
    header, log = _read(target, store)
    if messages:
        from ..log import Session

        derived = Session(header.id, seed=log, header=header, check_invariants=False).derive_messages()
        if as_json:
            sys.stdout.write(messages_json(derived) + "\n")
        else:
            for message in derived:
                out.print(f"[bold]{message['role']}[/bold] {messages_json([message])[:300]}")
        return
    if events:
        if as_json:
            sys.stdout.write(events_jsonl(log))
        else:
            for event in log:
                out.print(f"[dim]{event.seq:>5}[/dim] {event.type} {messages_json([event.data])[:160]}")
        return
    out.print(f"[bold]session {header.id}[/bold] created {_when(header.created_at)} cwd {header.cwd or '-'}")
    render_transcript(out, log)


def _when(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


@app.command()
def check(
    target: Annotated[str, typer.Argument(help="A session id, or the path of a session log file.")],
    as_json: JsonOption = False,
    store: StoreOption = None,
) -> None:
    """Check invariants and provider pairing (never writes); exit 1 with a report if invalid."""
    torn_bytes = 0
    try:
        if Path(target).is_file():
            header, log = read_log_file(Path(target))
        else:
            inspected = open_store(store).inspect(target)
            header, torn_bytes = inspected.header, inspected.repair.truncated_bytes
            log = inspected.events[: len(inspected.events) - len(inspected.repair.closers)]
    except CorruptLogError as exc:
        # Damage is a finding of `check`, reported like any other problem (not a crash).
        if as_json:
            _print_json({"session": target, "valid": False, "problems": [str(exc)]})
        else:
            out.print(f"{target}: INVALID (the log cannot be read)")
            out.print(f"  - {escape(str(exc))}")
        raise typer.Exit(1) from None
    report = check_log(header.id, log)
    if as_json:
        _print_json(
            {
                "session": header.id,
                "valid": report.valid,
                "events": report.event_count,
                "turns": report.turn_count,
                "openTurn": report.open_turn,
                "closersNeeded": report.closers_needed,
                "tornTailBytes": torn_bytes,
                "problems": report.problems,
            }
        )
        raise typer.Exit(0 if report.valid else 1)
    status = "valid" if report.valid else "INVALID"
    out.print(f"{header.id}: {status} ({report.event_count} events, {report.turn_count} turns)")
    if report.open_turn is not None:
        out.print(
            f"  turn {report.open_turn} is open (the log ends inside it): resume appends "
            f"{report.closers_needed} closer(s)"
        )
    if torn_bytes:
        out.print(f"  the log ends in a torn tail of {torn_bytes} bytes (resume truncates it)")
    for problem in report.problems:
        out.print(f"  - {problem}")
    raise typer.Exit(0 if report.valid else 1)


@app.command(name="ls")
def list_sessions(as_json: JsonOption = False, store: StoreOption = None) -> None:
    """List sessions: id, created, turns, the last turn's end reason."""
    summaries = open_store(store).list()
    if as_json:
        _print_json(
            [
                {
                    "id": summary.id,
                    "createdAt": summary.created_at,
                    "cwd": summary.cwd,
                    "turns": summary.turn_count,
                    "lastTurnEnd": summary.last_turn_end,
                    "events": summary.event_count,
                    "parentSession": summary.parent_session,
                    **({"damaged": summary.damaged} if summary.damaged is not None else {}),
                }
                for summary in summaries
            ]
        )
        return
    table = Table()
    table.add_column("id", overflow="fold")
    for column in ("created", "turns", "last turn"):
        table.add_column(column)
    for summary in summaries:
        if summary.damaged is not None:
            created = _when(summary.created_at) if summary.created_at else "-"
            table.add_row(summary.id, created, "-", f"[red]{escape(summary.status)}[/red]")
        else:
            table.add_row(summary.id, _when(summary.created_at), str(summary.turn_count), summary.last_turn_end)
    # Ids are never cut: a piped listing gets the table's full width, not 80 columns.
    needed = Measurement.get(out, out.options.update(max_width=10_000), table).maximum
    with _width_at_least(needed):
        out.print(table)


@contextlib.contextmanager
def _width_at_least(width: int) -> Iterator[None]:
    saved = out.width
    if not out.is_terminal and width > saved:
        out.width = width
    try:
        yield
    finally:
        out.width = saved


@app.command()
def demo(
    keep: Annotated[Path | None, typer.Option("--dir", help="Put the demo workspace and store here \\[default: a new temp dir].")] = None,
) -> None:
    """Run an offline demo: parallel tools, a failed step recovered, a resumed turn."""
    from ._demo import run_demo

    run_demo(out, err, base=keep)


def main() -> None:
    """Run the CLI; a DuraloopError prints one line `Type: message` and exits 1."""
    # A plain handler: one unpadded line per warning (rich's log handler pads each line to
    # the console width).
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    try:
        app()
    except DuraloopError as exc:
        err.print(f"[red]{type(exc).__name__}[/red]: {escape(str(exc))}")
        sys.exit(1)
