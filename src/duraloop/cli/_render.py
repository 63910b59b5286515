r"""Render a session for people: a transcript, listings, what repair did, machine JSON.

This module is the CLI's one rendering boundary for untrusted text; the live stream of a
running turn (`LiveRenderer`, in `_live.py`) and chat's status line print through it too.
Session ids, paths, prompts, model text, tool names, arguments and output, and log payloads
are never read as Rich markup and never reach the terminal as control sequences: every
piece goes through `visible` (control characters shown as `\xNN`) and is printed as a Rich
`Text`, built by `safe` or `styled`. Nothing here passes an untrusted string to a
markup-parsing call.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from ..errors import UsageError
from ..log import result_call_id
from ..log.vocabulary import (
    REASON_ABORTED,
    REASON_BLOCKED,
    REASON_ERROR,
    TOOL_RESULT,
    TURN_END,
)

if TYPE_CHECKING:
    from ..log import Event, SessionHeader
    from ..store import RepairReport, SessionSummary

_MAX_ARGS_CHARS = 80
MAX_NAME_CHARS = 64
"""Most characters of a tool name, call id or code shown on one line."""
MAX_ID_CHARS = 200
"""Most characters of a session id shown on one line (every valid id fits)."""
_MAX_MESSAGE_CHARS = 300


def _control_escapes() -> dict[int, str]:
    # C0 controls but newline and tab, DEL, C1 controls (0x9b is a one-byte CSI), lone
    # surrogates (the encoder would fail on them) and the bidirectional overrides and
    # isolates (they reorder what the terminal shows).
    table = {code: f"\\x{code:02x}" for code in [*range(0x20), 0x7F, *range(0x80, 0xA0)]}
    del table[ord("\n")], table[ord("\t")]
    for code in [*range(0x202A, 0x202F), *range(0x2066, 0x206A), *range(0xD800, 0xE000)]:
        table[code] = f"\\u{code:04x}"
    return table


_ESCAPES = _control_escapes()


def visible(text: str) -> str:
    r"""Return `text` with every terminal control character shown as an escape.

    `ESC` becomes the four characters `\x1b`, so `\x1b[2J` cannot clear the screen and an
    OSC title sequence cannot retitle the window; C1 controls, `\r`, backspace, BEL, lone
    surrogates and bidirectional overrides are shown the same way. Newline and tab are kept.

    Args:
        text: untrusted text (from a model, a tool, a log or the command line).

    Returns:
        The text, safe to write to a terminal.
    """
    return text.translate(_ESCAPES)


def short_text(text: str, limit: int = _MAX_ARGS_CHARS) -> str:
    """Return `text` on one line (whitespace runs folded), cut with `…` past `limit` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def safe(value: object, style: str = "", *, limit: int | None = None) -> Text:
    """Return `value` as a Rich `Text` that prints exactly as written (no markup, no controls).

    Args:
        value: untrusted text, or any value (shown with `str`).
        style: a Rich style for the whole text.
        limit: most characters on one line; whitespace runs are folded and an over-long
            value is cut with `…`. None keeps the text whole (line breaks included).

    Returns:
        The text, ready for `Console.print` or a table cell.
    """
    text = str(value)
    return Text(visible(text if limit is None else short_text(text, limit)), style=style)


def styled(*parts: object | tuple[object, str]) -> Text:
    """Return one `Text` made of parts: each a value, or a `(value, style)` pair.

    Every part, literal or not, goes through `visible`; none is read as markup.

    Returns:
        The assembled text.
    """
    text = Text()
    for part in parts:
        value, style = part if isinstance(part, tuple) else (part, "")
        text.append(visible(str(value)), style=style)
    return text


def ident(value: object, limit: int = MAX_ID_CHARS) -> str:
    """Return an id or name for one line: `visible`, line breaks and tabs escaped too, bounded.

    Unlike `safe(..., limit=...)` whitespace is not folded, so a shown id is the id.

    Args:
        value: an untrusted id (a session id, a call id) or name.
        limit: most characters; a longer value is cut with `…`.

    Returns:
        The text to print.
    """
    text = visible(str(value)).replace("\n", "\\x0a").replace("\t", "\\x09")
    return text if len(text) <= limit else text[: limit - 1] + "…"


class VisibleFormatter(logging.Formatter):
    """Format a log record for a terminal: control characters shown as escapes (`visible`)."""

    def format(self, record: logging.LogRecord) -> str:
        """Return the formatted record, safe to write to a terminal."""
        return visible(super().format(record))


def result_text(data: dict[str, Any]) -> str:
    """Return the text blocks of a `tool/result` payload's content, joined."""
    blocks = data.get("message", {}).get("content", [{}])[0].get("content", [])
    return "".join(b.get("text", "") for b in blocks if isinstance(b, dict))


def reason_text(reason: dict[str, Any]) -> str:
    """Return a one-line description of a `turn/end` reason (untrusted: print it with `safe`)."""
    kind = ident(reason.get("kind"), MAX_NAME_CHARS)
    if kind == REASON_ERROR:
        error = reason.get("error", {})
        code = ident(error.get("code"), MAX_NAME_CHARS)
        return f"error [{code}]: {short_text(str(error.get('message')), _MAX_MESSAGE_CHARS)}"
    if kind == REASON_ABORTED:
        return f"aborted ({ident(reason.get('reason', {}).get('kind', 'user'), MAX_NAME_CHARS)})"
    if kind == REASON_BLOCKED and reason.get("message"):
        return f"blocked: {short_text(str(reason['message']), _MAX_MESSAGE_CHARS)}"
    return kind


def code_label(error: dict[str, Any]) -> str:
    """Return `[CODE] ` for a result error with a code, else the empty string."""
    code = error.get("code")
    return f"[{ident(code, MAX_NAME_CHARS)}] " if code else ""


class ShowFlagsError(UsageError):
    """Raised when `duraloop show` is given two views at once (`--events` and `--messages`)."""


def show_view(*, events: bool, messages: bool, as_json: bool) -> str:
    """Choose what `duraloop show` prints: `transcript`, `events` or `messages`.

    `--json` alone means the events (JSONL); `--messages --json` is the messages' JSON array.

    Args:
        events: `--events` was given.
        messages: `--messages` was given.
        as_json: `--json` was given.

    Returns:
        The view's name.

    Raises:
        ShowFlagsError: for `--events` with `--messages`.
    """
    if events and messages:
        raise ShowFlagsError(
            "--events and --messages are two different views; pass one of them (with --json for "
            "machine output)"
        )
    if messages:
        return "messages"
    return "events" if events or as_json else "transcript"


def payload_text(value: object, limit: int) -> str:
    """Return `value` as compact JSON on one line, cut with `…` past `limit` characters."""
    return short_text(json.dumps(value, ensure_ascii=False), limit)


def print_messages(console: Console, messages: Iterable[Any]) -> None:
    """Print one line per derived message: its role, then the message as compact JSON (bounded)."""
    for message in messages:
        role = ident(message.get("role"), MAX_NAME_CHARS) if isinstance(message, dict) else "?"
        console.print(styled((role, "bold"), " ", payload_text(message, 300)))


def when_text(epoch_ms: int) -> str:
    """Return an epoch-milliseconds time as `YYYY-MM-DD HH:MM:SSZ` (UTC)."""
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def print_header(console: Console, header: SessionHeader) -> None:
    """Print the transcript's first line: the session id, when it was created, its cwd."""
    console.print(
        styled(
            (f"session {ident(header.id)}", "bold"),
            f" created {when_text(header.created_at)} cwd {header.cwd or '-'}",
        )
    )


def print_sessions(console: Console, summaries: Iterable[SessionSummary]) -> None:
    """Print the `duraloop ls` table: id, created, turns, the last turn's end.

    Cells print as written; ids up to 200 characters are never cut, even when piped (the
    table gets its full width, not 80 columns).
    """
    table = Table()
    table.add_column("id", overflow="fold")
    for column in ("created", "turns", "last turn"):
        table.add_column(column)
    for summary in summaries:
        session_id = Text(ident(summary.id))
        if summary.damaged is not None:
            created = when_text(summary.created_at) if summary.created_at else "-"
            table.add_row(
                session_id, created, "-", safe(summary.status, "red", limit=_MAX_MESSAGE_CHARS)
            )
        else:
            last = safe(summary.last_turn_end, limit=MAX_NAME_CHARS)
            table.add_row(session_id, when_text(summary.created_at), str(summary.turn_count), last)
    needed = Measurement.get(console, console.options.update(max_width=10_000), table).maximum
    saved = console.width
    if not console.is_terminal and needed > saved:
        console.width = needed
    try:
        console.print(table)
    finally:
        console.width = saved


def events_jsonl(events: Sequence[Event]) -> str:
    """Return the events as JSONL in seq order (dsh key names)."""
    from ..log import encode_events_lines

    return encode_events_lines(list(events)).decode()


def messages_json(messages: Sequence[Any]) -> str:
    """Return derived messages as one JSON array."""
    return json.dumps(list(messages), ensure_ascii=False)


def repair_text(repair: RepairReport) -> str:
    """Return what a load's crash repair did, on one line (untrusted: print it with `safe`).

    Args:
        repair: the load's report.

    Returns:
        `truncated a torn tail of N bytes...; appended tool/result CODE for ID, ...`, or
        `the log was balanced; nothing to repair`.
    """
    parts = []
    if repair.truncated_bytes:
        parts.append(f"truncated a torn tail of {repair.truncated_bytes} bytes{repair.cut_text}")
    if repair.closers:
        kinds = []
        for event in repair.closers:
            if event.type == TOOL_RESULT:
                kinds.append(
                    f"tool/result {event.data['error']['code']} for "
                    f"{result_call_id(event.data['message'])}"
                )
            elif event.type == TURN_END:
                kinds.append("turn/end interrupted")
            else:
                kinds.append(event.type)
        parts.append("appended " + ", ".join(kinds))
    return "; ".join(parts) if parts else "the log was balanced; nothing to repair"


def print_json(value: object) -> None:
    """Write `value` to stdout as one line of JSON (non-ASCII kept), for `--json`."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")
