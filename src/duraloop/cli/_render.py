"""Render a session for people: the live stream of a running turn, and a transcript."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape

from ..log import Event
from ..log._vocabulary import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    END_SEED,
    LLM_RETRY,
    STEP_START,
    SURFACE_APPEND,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)

_MAX_ARGS_CHARS = 80


def _short(text: str, limit: int = _MAX_ARGS_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _result_text(data: dict[str, Any]) -> str:
    blocks = data.get("message", {}).get("content", [{}])[0].get("content", [])
    return "".join(b.get("text", "") for b in blocks if isinstance(b, dict))


def reason_text(reason: dict[str, Any]) -> str:
    """Return a one-line description of a `turn/end` reason."""
    kind = str(reason.get("kind"))
    if kind == "error":
        error = reason.get("error", {})
        return f"error [{error.get('code')}]: {error.get('message')}"
    if kind == "aborted":
        return f"aborted ({reason.get('reason', {}).get('kind', 'user')})"
    if kind == "blocked" and reason.get("message"):
        return f"blocked: {reason['message']}"
    return kind


class LiveRenderer:
    """Print a running turn as a session observer.

    Shows text as it streams, each tool call with its state and duration (milliseconds),
    and the turn's end.

    Args:
        console: where the stream goes (stdout).
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self._mid_line = False
        self._call_started: dict[str, tuple[int, str]] = {}
        self._call_names: dict[str, str] = {}
        self._turn_started_ms = 0

    def _newline(self) -> None:
        if self._mid_line:
            self.console.file.write("\n")
            self._mid_line = False

    def __call__(self, event: Event) -> None:
        """Render one committed event."""
        kind = event.type
        data = event.data if isinstance(event.data, dict) else {}
        if kind == ASSISTANT_CHUNK:
            chunk = data.get("chunk", {})
            if chunk.get("type") == "text-delta":
                self.console.file.write(chunk.get("text", ""))
                self.console.file.flush()
                self._mid_line = True
        elif kind == TURN_START:
            self._turn_started_ms = event.time
            self._newline()
            self.console.print(f"[bold]── turn {data.get('turn')}[/bold]")
        elif kind == STEP_START and data.get("step", 1) > 1:
            self._newline()
        elif kind == TOOL_CALL:
            self._newline()
            name = str(data.get("name"))
            self._call_started[str(data.get("callId"))] = (event.time, name)
            at = (event.time - self._turn_started_ms) / 1000
            self.console.print(
                f"  [cyan]⏵ {escape(name)}[/cyan] {escape(_short(str(data.get('arguments', ''))))}"
                f"  [dim]started +{at:.2f}s[/dim]"
            )
        elif kind == TOOL_RESULT:
            self._render_result(event, data)
        elif kind == ASSISTANT_MESSAGE:
            for block in data.get("message", {}).get("content", []):
                if block.get("type") == "tool-call":
                    self._call_names[str(block.get("id"))] = str(block.get("name"))
            if data.get("interrupted"):
                self._newline()
                self.console.print("  [yellow](stream interrupted; the visible prefix is kept)[/yellow]")
        elif kind == LLM_RETRY:
            self._newline()
            failure = data.get("failure") or {}
            budget = f"/{data['maxRetries']}" if "maxRetries" in data else ""
            self.console.print(
                f"  [yellow]↻ model request failed [{escape(str(failure.get('code')))}]: "
                f"{escape(_short(str(failure.get('message', '')), 120))}; retry "
                f"{data.get('retry')}{budget} in {int(data.get('delayMs', 0)) / 1000:g} s[/yellow]"
            )
        elif kind == TURN_END:
            self._newline()
            reason = data.get("reason", {})
            style = "green" if reason.get("kind") == "completed" else "red"
            self.console.print(f"[{style}]── turn {data.get('turn')} {escape(reason_text(reason))}[/{style}]")

    def _render_result(self, event: Event, data: dict[str, Any]) -> None:
        self._newline()
        call_id = str(data.get("message", {}).get("source", {}).get("callId"))
        started, name = self._call_started.pop(call_id, (event.time, self._call_names.get(call_id, "tool")))
        duration = event.time - started
        error = data.get("error") or {}
        is_error = bool(data.get("message", {}).get("content", [{}])[0].get("isError"))
        text = escape(_short(_result_text(data)))
        if not is_error:
            self.console.print(f"  [green]✓ {escape(name)}[/green] [dim]{duration} ms[/dim]  {text}")
            return
        code = error.get("code")
        label = f"[{code}] " if code else ""
        self.console.print(f"  [red]✗ {escape(name)} {escape(label)}[/red][dim]{duration} ms[/dim]  {text}")


def render_transcript(console: Console, events: Sequence[Event], *, running: bool = False) -> None:
    """Print a readable transcript: turns, messages, tool calls and results as written.

    Reads append-origin events, so text later shadowed by a surface replace still shows.
    An open final turn is shown as open, or as running when `running` (a live chat's).
    """
    open_turn: int | None = None
    for event in events:
        data = event.data if isinstance(event.data, dict) else {}
        kind = event.type
        if kind == TURN_START:
            open_turn = data.get("turn")
            console.print(f"\n[bold]── turn {open_turn}[/bold]")
        elif kind == TURN_END:
            open_turn = None
            console.print(f"[bold]── turn {data.get('turn')} {escape(reason_text(data.get('reason', {})))}[/bold]")
        elif kind == END_SEED:
            console.print("[dim]── session resumed here (session/end-seed)[/dim]")
        elif kind == USER_MESSAGE and event.surface_op == SURFACE_APPEND:
            text = "".join(b.get("text", "") for b in data.get("content", []) if isinstance(b, dict))
            who = "user" if data.get("source", {}).get("kind") == "user" else data.get("source", {}).get("kind")
            console.print(f"[bold blue]{escape(str(who))}:[/bold blue] {escape(text)}")
        elif kind == ASSISTANT_MESSAGE and event.surface_op == SURFACE_APPEND:
            for block in data.get("message", {}).get("content", []):
                if block.get("type") == "text":
                    console.print(f"[bold magenta]assistant:[/bold magenta] {escape(block.get('text', ''))}")
                elif block.get("type") == "reasoning":
                    console.print(f"[dim]thinking: {escape(_short(block.get('text', ''), 200))}[/dim]")
                elif block.get("type") == "tool-call":
                    console.print(
                        f"  [cyan]→ {escape(block.get('name', ''))}[/cyan] "
                        f"{escape(_short(block.get('arguments', '')))} [dim]({escape(block.get('id', ''))})[/dim]"
                    )
            if data.get("interrupted"):
                console.print("  [yellow](interrupted)[/yellow]")
        elif kind == TOOL_RESULT and event.surface_op == SURFACE_APPEND:
            error = data.get("error") or {}
            code = f" [{error.get('code')}]" if error.get("code") else ""
            call_id = data.get("message", {}).get("source", {}).get("callId")
            is_error = bool(data.get("message", {}).get("content", [{}])[0].get("isError"))
            mark = "[red]✗[/red]" if is_error else "[green]✓[/green]"
            console.print(f"  {mark} {escape(str(call_id))}{escape(code)} {escape(_short(_result_text(data), 160))}")
    if open_turn is not None and running:
        console.print(f"[yellow]── turn {open_turn} is running[/yellow]")
    elif open_turn is not None:
        console.print(f"[yellow]── turn {open_turn} is open (the log ends inside it; `duraloop resume` closes it)[/yellow]")


def events_jsonl(events: Sequence[Event]) -> str:
    """Return the events as JSONL in seq order (dsh key names)."""
    from ..log import encode_events_lines

    return encode_events_lines(list(events)).decode()


def messages_json(messages: Sequence[Any]) -> str:
    """Return derived messages as one JSON array."""
    return json.dumps(list(messages), ensure_ascii=False)
