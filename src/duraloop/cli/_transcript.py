"""The readable transcript of a session that `show` and `chat` print (never writes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from ..log import RerunCall, rerun_call, rerun_result, result_call_id
from ..log.vocabulary import (
    APPROVAL_ASKED,
    APPROVAL_DECIDED,
    APPROVAL_POLICY,
    ASSISTANT_MESSAGE,
    BLOCK_REASONING,
    BLOCK_TEXT,
    BLOCK_TOOL_CALL,
    COMPACTION_END,
    COMPACTION_SUMMARY,
    END_SEED,
    SURFACE_APPEND,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from ._approval_lines import ApprovalLines
from ._approval_text import call_text, command_line
from ._render import (
    MAX_NAME_CHARS,
    code_label,
    ident,
    reason_text,
    result_text,
    safe,
    short_text,
    styled,
)
from ._rerun_lines import transcript_rerun_lines, transcript_unanswered_line
from ._usage_text import TurnUsageLines

if TYPE_CHECKING:
    from ..log import Event, PendingApproval, Price

MAX_CALL_ARGUMENTS_CHARS = 200
"""Most characters of a tool call's arguments a transcript shows (then marked as cut)."""


def render_transcript(
    console: Console,
    events: Sequence[Event],
    *,
    running: bool = False,
    prices: Mapping[str, Price] | None = None,
    session_id: str | None = None,
) -> None:
    """Print a readable transcript: turns, messages, tool calls and results as written.

    Reads append-origin events, so text later shadowed by a surface replace still shows.
    An open final turn is shown as open, or as running when `running` (a live chat's). Each
    turn's end is followed by its usage, with its cost when `prices` are given. Approval
    asks and decisions are shown where they happened, and an open final turn that waits
    for approval is shown as paused; a `session/end-seed` right after another is not said
    twice. A tool call's arguments are cut to `MAX_CALL_ARGUMENTS_CHARS`, marked
    `…[+N chars]`, and a last line then names the command that prints them whole (with
    `session_id`, the session's). A re-run of an outcome-unknown call is shown in the turn
    that re-ran it, with how it ended and its output (the earlier turn still shows the
    unknown result, as written). Untrusted text is shown through `visible`.
    """
    open_turn: int | None = None
    usage = TurnUsageLines(prices or {})
    asks = ApprovalLines()
    cut = False
    resumed_here = False  # the last line printed is "session resumed here"
    shadowed: tuple[int, object] | None = None  # the open compaction's summary, once written
    reruns: dict[int, RerunCall] = {}
    answered = _answered_reruns(events)
    for event in events:
        data = event.data if isinstance(event.data, dict) else {}
        kind = event.type
        spent = usage.feed(event)
        if kind == END_SEED:
            if not resumed_here:
                console.print(styled(("── session resumed here (session/end-seed)", "dim")))
            resumed_here = True
            continue
        resumed_here = resumed_here and kind not in _PRINTED
        if kind == TURN_START:
            open_turn = data.get("turn")
            console.print(styled("\n", (f"── turn {open_turn}", "bold")))
        elif kind == TURN_END:
            open_turn = None
            console.print(
                safe(f"── turn {data.get('turn')} {reason_text(data.get('reason', {}))}", "bold")
            )
            if spent is not None:
                console.print(safe(f"   {spent}", "dim"))
        elif kind == USER_MESSAGE and event.surface_op == SURFACE_APPEND:
            text = "".join(
                b.get("text", "") for b in data.get("content", []) if isinstance(b, dict)
            )
            source = str(data.get("source", {}).get("kind"))
            who = "user" if source == "user" else ident(source, MAX_NAME_CHARS)
            console.print(styled((f"{who}:", "bold blue"), " ", text))
        elif kind == ASSISTANT_MESSAGE and event.surface_op == SURFACE_APPEND:
            cut = _print_assistant(console, data) or cut
        elif kind == TOOL_RESULT and event.surface_op == SURFACE_APPEND:
            error = data.get("error") or {}
            code = f" {code_label(error).strip()}" if error.get("code") else ""
            call_id = ident(result_call_id(data.get("message", {})), MAX_NAME_CHARS)
            is_error = bool(data.get("message", {}).get("content", [{}])[0].get("isError"))
            mark = ("✗", "red") if is_error else ("✓", "green")
            console.print(
                styled("  ", mark, f" {call_id}{code} {short_text(result_text(data), 160)}")
            )
        elif kind == TOOL_RESULT and (rerun := rerun_result(event, reruns)) is not None:
            for line in transcript_rerun_lines(rerun):
                console.print(line)
        elif kind == TOOL_CALL and (call := rerun_call(event)) is not None:
            reruns[event.seq] = call
            if event.seq not in answered:
                console.print(transcript_unanswered_line(call))
        elif kind in (APPROVAL_ASKED, APPROVAL_DECIDED, APPROVAL_POLICY):
            console.print(asks.line(kind, data))
        elif kind == COMPACTION_SUMMARY:
            shadowed = (len(data.get("shadowedSeqs") or ()), data.get("shadowedTokenCount"))
        elif kind == COMPACTION_END:
            console.print(_compaction_line(data, shadowed))
            shadowed = None
    paused = _paused(events) if open_turn is not None else None
    if paused is not None and not running:
        state = (
            f"is decided ({ident(paused.outcome, MAX_NAME_CHARS)}); `duraloop resume` goes on"
            if paused.decided
            else "waits for approval (`duraloop pending` lists it)"
        )
        console.print(
            styled((f"── turn {open_turn} is paused: {call_text(paused)} {state}", "yellow"))
        )
    elif open_turn is not None and running:
        console.print(styled((f"── turn {open_turn} is running", "yellow")))
    elif open_turn is not None:
        console.print(
            styled(
                (
                    f"── turn {open_turn} is open (the log ends inside it; `duraloop resume` "
                    "closes it)",
                    "yellow",
                )
            )
        )
    if cut:
        whole = (
            "duraloop show ID --events --json"
            if session_id is None
            else command_line(("duraloop", "show"), (session_id,), ("--events", "--json"))
        )
        console.print(
            styled(
                (
                    f"── arguments marked …[+N chars] are cut here; `{whole}` prints them whole",
                    "dim",
                )
            )
        )


def _compaction_line(data: dict[str, Any], shadowed: tuple[int, object] | None) -> Text:
    """The line of a closed compaction: what it replaced, or why it failed (untrusted text)."""
    if "error" in data:
        return styled(("── compaction failed: ", "yellow"), short_text(str(data["error"]), 160))
    if shadowed is None:
        return styled(("── compaction closed", "dim"))
    count, tokens = shadowed
    return styled((f"── compacted {count} history items (~{tokens} tokens)", "dim"))


def _answered_reruns(events: Sequence[Event]) -> set[int]:
    """The seqs of the re-run `tool/call`s a replacement answers."""
    calls: dict[int, RerunCall] = {}
    answered: set[int] = set()
    for event in events:
        call = rerun_call(event)
        if call is not None:
            calls[event.seq] = call
        elif (result := rerun_result(event, calls)) is not None:
            answered.add(result.call.seq)
    return answered


_PRINTED = frozenset(
    {TURN_START, TURN_END, USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT}
    | {APPROVAL_ASKED, APPROVAL_DECIDED, APPROVAL_POLICY}
)
"""The event types a transcript prints a line for (`session/end-seed` is said once)."""


def cut_arguments(text: str, limit: int = MAX_CALL_ARGUMENTS_CHARS) -> tuple[str, bool]:
    """Return arguments on one line (whitespace folded), cut past `limit` as `…[+N chars]`.

    Returns:
        The text, and whether it was cut.
    """
    text = " ".join(text.split())
    if len(text) <= limit:
        return text, False
    return f"{text[:limit]}…[+{len(text) - limit:,} chars]", True


def _print_assistant(console: Console, data: dict[str, Any]) -> bool:
    """Print an assistant message's blocks; return whether some arguments were cut."""
    cut = False
    for block in data.get("message", {}).get("content", []):
        if block.get("type") == BLOCK_TEXT:
            console.print(styled(("assistant:", "bold magenta"), " ", str(block.get("text", ""))))
        elif block.get("type") == BLOCK_REASONING:
            console.print(
                styled(("thinking: " + short_text(str(block.get("text", "")), 200), "dim"))
            )
        elif block.get("type") == BLOCK_TOOL_CALL:
            name = ident(block.get("name", ""), MAX_NAME_CHARS)
            call_id = ident(block.get("id", ""), MAX_NAME_CHARS)
            arguments, was_cut = cut_arguments(str(block.get("arguments", "")))
            cut = cut or was_cut
            console.print(styled((f"  → {name}", "cyan"), " ", arguments, (f" ({call_id})", "dim")))
    if data.get("interrupted"):
        console.print(styled(("  (interrupted)", "yellow")))
    return cut


def _paused(events: Sequence[Event]) -> PendingApproval | None:
    from ..log import pending_approval  # the log's readers load when a transcript is shown

    return pending_approval(events)
