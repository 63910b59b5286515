"""The lines `show` and the live stream print for a re-run of an outcome-unknown call.

See docs/recovery.md#re-running-outcome-unknown-calls. A re-run is read from its `tool/call`
(`retryOf`) and the `tool/result` replacement citing it (`duraloop.log.rerun_result`); the
names, ids and output are untrusted and shown bounded through `styled`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from ._render import MAX_NAME_CHARS, ident, short_text, styled

if TYPE_CHECKING:
    from ..log import RerunCall, RerunResult

MAX_RERUN_OUTPUT_CHARS = 160
"""Most characters of a re-run's output a transcript line shows (as for any tool result)."""

_WHY = "(its outcome was unknown; same idempotency key)"


def outcome_word(result: RerunResult) -> str:
    """Return `succeeded`, `failed again`, or `ended (...)` for a text duraloop did not write."""
    if result.succeeded is None:
        return "ended (its outcome text is not one duraloop writes)"
    return "succeeded" if result.succeeded else "failed again"


def _label(call: RerunCall) -> str:
    name = ident(call.name, MAX_NAME_CHARS)
    return f"{name} call {ident(call.original_call_id, MAX_NAME_CHARS)}"


def transcript_rerun_lines(result: RerunResult) -> list[Text]:
    """Return the transcript lines of a finished re-run: what was re-run and how, its output.

    Args:
        result: the re-run read back from its replacement.

    Returns:
        `↻ re-ran NAME call ID (its outcome was unknown; same idempotency key): succeeded`
        (or `failed again`), then the output, indented, cut at `MAX_RERUN_OUTPUT_CHARS`.
    """
    style = "green" if result.succeeded else "red"
    head = styled(
        ("  ↻ ", style), f"re-ran {_label(result.call)} {_WHY}: ", (outcome_word(result), style)
    )
    output = short_text(result.output, MAX_RERUN_OUTPUT_CHARS)
    return [head, styled("    ", output)] if output else [head]


def transcript_unanswered_line(call: RerunCall) -> Text:
    """Return the transcript line of a re-run that wrote no result (a crash or a cancel)."""
    return styled(
        ("  ↻ ", "yellow"),
        f"re-ran {_label(call)} {_WHY}: ",
        ("no result was recorded; its outcome is still unknown", "yellow"),
    )


def live_started_line(call: RerunCall, at_seconds: float) -> Text:
    """Return the live line of a re-run that starts: `⏵ NAME (re-run of ID) ARGS started +Ts`."""
    name = ident(call.name, MAX_NAME_CHARS)
    of = ident(call.original_call_id, MAX_NAME_CHARS)
    return styled(
        (f"  ⏵ {name} (re-run of {of})", "cyan"),
        " ",
        short_text(call.arguments),
        (f"  started +{at_seconds:.2f}s", "dim"),
    )


def live_result_line(result: RerunResult, duration_ms: int) -> Text:
    """Return the live line of a finished re-run: `✓ NAME (re-run) N ms OUTPUT` or `✗ … failed`.

    Args:
        result: the re-run read back from its replacement.
        duration_ms: milliseconds from its `tool/call` to its result.

    Returns:
        The line; a failed re-run reads `✗ NAME (re-run) failed again N ms OUTPUT`.
    """
    name = ident(result.call.name, MAX_NAME_CHARS)
    output = short_text(result.output)
    if result.succeeded:
        mark, how, style = "✓", "", "green"
    else:
        mark, how, style = "✗", f" {outcome_word(result)}", "red"
    return styled(
        (f"  {mark} {name} (re-run){how}", style), " ", (f"{duration_ms} ms", "dim"), "  ", output
    )
