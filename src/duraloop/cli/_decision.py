"""Recording a person's decision on a paused call: the one way `approve`, `deny` and `view` do.

See docs/approvals.md#the-command-line. A decision is recorded by a loop resumed on the session
(under its single writer lock) with no model and the built-in tools: nothing runs, the
`approval/decided` is appended durably. On a PostgreSQL store the workers carry it out, so
the turn's continuation is queued for them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ApprovalError
from ._approval_text import ContinueWith, call_text, resume_command
from ._render import MAX_NAME_CHARS, ident

if TYPE_CHECKING:
    from ..llm import ModelRequest, StreamChunk
    from ..log import PendingApproval, SessionHeader
    from ..loop import AgentLoop, SessionSetup
    from ..store import SessionStore
    from ._stores import StoreSpec


class NoModel:
    """The model of a loop that runs no turn (records a decision, shows an ask)."""

    provider = "none"
    model = "none"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """Refuse: a loop that records a decision runs no turn (a bug if this is reached)."""
        raise ApprovalError("this loop only records a decision; pass --continue to run a turn")
        yield  # pragma: no cover - makes this an async generator


def not_paused_error(session_id: str) -> ApprovalError:
    """Return the error refusing a decision for a session whose turn is not paused."""
    return ApprovalError(
        f'session "{session_id}" is not paused: no call waits for approval; '
        "`duraloop pending` lists the sessions that wait"
    )


def recording_setup(
    sessions: SessionStore, header: SessionHeader, cwd: Path | None
) -> SessionSetup:
    """Return the setup of a loop that only records a decision (no model, built-in tools).

    A session made on another machine (its recorded workspace missing here) is decided
    from the current directory: no tool runs.
    """
    from ..loop import SessionSetup
    from ..tools import builtin_tools

    if cwd is None and header.cwd and not Path(header.cwd).is_dir():
        cwd = Path.cwd()
    return SessionSetup(store=sessions, model=NoModel(), tools=builtin_tools(), cwd=cwd)


async def record_decision(
    loop: AgentLoop,
    call_id: str | None,
    *,
    allow: bool,
    feedback: str | None,
    how: ContinueWith | None = None,
) -> PendingApproval:
    """Record the decision for `loop`'s waiting call (None: the one that waits), durably.

    Returns:
        The approval, now decided.

    Raises:
        ApprovalError: if the session is not paused (anymore), the call is already
            decided, or `call_id` is not the waiting call.
    """
    session_id = loop.session.id
    pending = loop.paused
    if pending is None:  # continued by another process between the read and the lock
        raise not_paused_error(session_id)
    if pending.decided and call_id in (None, pending.call_id):
        raise ApprovalError(
            f'{call_text(pending)} of session "{session_id}" is already decided '
            f"({ident(pending.outcome, MAX_NAME_CHARS)}); "
            f"`{resume_command(session_id, how)}` carries it out"
        )
    return await loop.decide(
        call_id if call_id is not None else pending.call_id, allow=allow, feedback=feedback
    )


def queue_continuation(store: StoreSpec, session_id: str) -> str:
    """On a PostgreSQL store the workers carry a decision out: queue the turn's continuation.

    Returns:
        The submission id.
    """
    from ..worker import submit_continuation
    from ._postgres_url import split_schema

    url, schema = split_schema(store.url)
    return submit_continuation(url, session_id, schema=schema)
