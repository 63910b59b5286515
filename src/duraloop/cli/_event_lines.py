"""`duraloop show --events`: one line per event, surface edits and re-runs spelled out."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from rich.console import Console

from ..log.vocabulary import SURFACE_APPEND
from ._render import MAX_NAME_CHARS, ident, payload_text, styled
from ._rerun_lines import outcome_word

if TYPE_CHECKING:
    from ..log import Event, RerunCall

MAX_PAYLOAD_CHARS = 160
"""Most characters of an event's payload a line shows (then cut with `…`)."""


def print_events(console: Console, events: Iterable[Event]) -> None:
    """Print one line per event: seq, type, a note, and the payload as compact JSON (bounded).

    The note says what the payload's first characters may not: a surface edit other than
    `append` (`replace S..E src [..]`), a re-run `tool/call` (`re-run of seq N`), and a
    re-run's replacement (`re-run of NAME call ID: succeeded`; its `isError` and error stay
    the unknown result's, docs/recovery.md#re-running-outcome-unknown-calls).
    """
    reruns: dict[int, RerunCall] = {}
    for event in events:
        console.print(
            styled(
                (f"{event.seq:>5}", "dim"),
                f" {ident(event.type, MAX_NAME_CHARS)} ",
                (_note(event, reruns), "yellow"),
                payload_text(event.data, MAX_PAYLOAD_CHARS),
            )
        )


def _note(event: Event, reruns: dict[int, RerunCall]) -> str:
    from ..log import rerun_call, rerun_result  # not at import: `duraloop --help` stays light

    call = rerun_call(event)
    if call is not None:
        reruns[event.seq] = call
        return f"(re-run of seq {call.retry_of}) "
    parts = []
    op = event.surface_op
    if isinstance(op, dict):
        parts.append(f"{ident(op.get('op'), MAX_NAME_CHARS)} {op.get('start')}..{op.get('end')}")
    elif op is not None and op != SURFACE_APPEND:
        parts.append(ident(op, MAX_NAME_CHARS))
    if op is not None and op != SURFACE_APPEND and event.source_event_seqs:
        parts.append(f"src {list(event.source_event_seqs)}")
    result = rerun_result(event, reruns)
    if result is not None:
        name = ident(result.call.name, MAX_NAME_CHARS)
        of = ident(result.call.original_call_id, MAX_NAME_CHARS)
        parts.append(f"(re-run of {name} call {of}: {outcome_word(result)})")
    return " ".join(parts) + " " if parts else ""
