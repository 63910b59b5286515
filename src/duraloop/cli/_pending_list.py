"""`duraloop pending`: every paused session of a store, with its ask (read-only)."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

from ..errors import CorruptLogError, SessionNotFoundError
from ..log import pending_approval
from ._approval_text import ContinueWith, pending_json, print_pending
from ._console import err, out
from ._options import model_given
from ._render import ident, styled
from ._stores import StoreSpec, default_store_spec

if TYPE_CHECKING:
    from ..log import PendingApproval
    from ..store import SessionStore


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


def print_paused(
    spec: StoreSpec | None, paused: list[tuple[str, PendingApproval]], *, as_json: bool = False
) -> None:
    """Print `duraloop pending`: each paused session and its ask, or that there is none.

    With `as_json`, one JSON array of the asks, every field whole (`pending_json`).
    """
    if as_json:
        # ASCII escapes: an argument's C1 control or bidi override never reaches a terminal.
        asks = [pending_json(session_id, ask) for session_id, ask in paused]
        sys.stdout.write(json.dumps(asks, ensure_ascii=True) + "\n")
        return
    if not paused:  # on stderr, naming the store, as `ls` says it has no sessions
        where = spec if spec is not None else default_store_spec()
        err.print(styled((f"no paused sessions in {where}", "yellow")))
        return
    how = ContinueWith(model_placeholder=not model_given(os.environ.get("DURALOOP_MODEL")))
    for index, (session_id, ask) in enumerate(paused):
        if index:
            out.print()
        out.print(styled((f"session {ident(session_id)}", "bold"), f" (turn {ask.turn})"))
        print_pending(out, session_id, ask, indent="  ", how=how)
