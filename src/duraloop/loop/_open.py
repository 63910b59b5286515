"""Open an AgentLoop over a stored session: start a new one, continue one, or resume one.

Resume loads the log with crash repair committed (a torn tail is truncated, an interrupted
final turn gets its closers), seeds a `Session` (which appends `session/end-seed`), opens
the single writer and makes the marker durable before anything else happens.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from pathlib import Path

from ..errors import SessionNotFoundError, UsageError
from ..llm import Model
from ..log import Session, SessionHeader, now_ms
from ..store import RepairReport, SessionStore
from ..tools import Tool, ToolHooks, ToolRegistry
from ._agent import AgentLoop
from ._config import LoopConfig
from ._hooks import LoopHooks

logger = logging.getLogger(__name__)


def _workspace(cwd: Path | str | None) -> Path:
    """Resolve a workspace directory, refusing one that does not exist (before any write)."""
    workspace = Path(cwd if cwd is not None else ".").resolve()
    if not workspace.is_dir():
        raise UsageError(f"workspace {workspace} is not a directory; create it or pass another cwd")
    return workspace


def new_session_id() -> str:
    """Return a fresh session id (a UUID4 string)."""
    return str(uuid.uuid4())


def start_session(
    *,
    store: SessionStore,
    model: Model,
    tools: ToolRegistry | Sequence[Tool] = (),
    cwd: Path | str,
    session_id: str | None = None,
    config: LoopConfig | None = None,
    tool_hooks: ToolHooks | None = None,
    hooks: LoopHooks | None = None,
) -> AgentLoop:
    """Create a new session in `store` and return a loop that writes it.

    Args:
        store: where the log is persisted.
        model: the model to request.
        tools: the tools the model may call.
        cwd: the workspace directory; recorded in the session header.
        session_id: the id to use; a fresh UUID when None.
        config: loop options.
        tool_hooks: pre- and post-execute hooks.
        hooks: the loop-level hooks (pre-step, request, turn-stopping).

    Returns:
        An `AgentLoop` owning the session's writer; call `close()` when done.

    Raises:
        SessionExistsError: if `session_id` already has a stored log (resume it instead).
        SessionLockedError: if another process writes that session.
    """
    workspace = _workspace(cwd)
    sid = session_id or new_session_id()
    header = SessionHeader(id=sid, created_at=now_ms(), cwd=str(workspace))
    session = Session(sid, header=header)
    writer = store.open_writer(session)
    return AgentLoop(
        session, model=model, tools=tools, cwd=workspace, config=config,
        durability=writer, tool_hooks=tool_hooks, hooks=hooks,
    )


def resume_session(
    session_id: str,
    *,
    store: SessionStore,
    model: Model,
    tools: ToolRegistry | Sequence[Tool] = (),
    cwd: Path | str | None = None,
    config: LoopConfig | None = None,
    tool_hooks: ToolHooks | None = None,
    hooks: LoopHooks | None = None,
) -> tuple[AgentLoop, RepairReport]:
    """Load a stored session with crash repair and return a loop that continues it.

    Args:
        session_id: the stored session.
        store: where it is persisted.
        model: the model to request.
        tools: the tools the model may call.
        cwd: the workspace; defaults to the session header's cwd.
        config: loop options.
        tool_hooks: pre- and post-execute hooks.
        hooks: the loop-level hooks (pre-step, request, turn-stopping).

    Returns:
        The loop (turn numbering continues; messages pending in the inbox are pending
        again, but nothing runs until `run_turn()`) and what repair did on load.

    Raises:
        SessionNotFoundError: if the session is not in the store.
        SessionLockedError: if another process writes it.
        CorruptLogError: if its committed region is damaged or breaks a rule `duraloop
            check` enforces; nothing is written.
        UnpairedHistoryError: if a closed step of its history left tool calls unanswered
            (no provider would accept a request); nothing is written, and the message names
            the rescue (`fork_session(..., boundary=SEQ)`, `duraloop fork ID --at SEQ`).
    """
    loaded, session = store.prepare(session_id)
    recorded = loaded.header.cwd
    workspace = _workspace(cwd if cwd is not None else recorded)
    if cwd is not None and recorded is not None and workspace != Path(recorded):
        logger.warning(
            "session %s was created in workspace %s; this loop works in %s instead",
            session_id, recorded, workspace,
        )
    writer = store.open_writer(session)
    loop = AgentLoop(
        session, model=model, tools=tools, cwd=workspace, config=config,
        durability=writer, tool_hooks=tool_hooks, hooks=hooks,
    )
    loop.flush()
    return loop, loaded.repair


def open_session(
    session_id: str,
    *,
    store: SessionStore,
    model: Model,
    tools: ToolRegistry | Sequence[Tool] = (),
    cwd: Path | str | None = None,
    config: LoopConfig | None = None,
    tool_hooks: ToolHooks | None = None,
    hooks: LoopHooks | None = None,
) -> tuple[AgentLoop, RepairReport | None]:
    """Resume `session_id` if it is stored, else create it with that id.

    Args:
        session_id: the session to continue or create.
        store: where it is persisted.
        model: the model to request.
        tools: the tools the model may call.
        cwd: the workspace; None means the session's recorded one when it exists, else the
            current directory.
        config: loop options.
        tool_hooks: pre- and post-execute hooks.
        hooks: the loop-level hooks (pre-step, request, turn-stopping).

    Returns:
        The loop, and the repair report (None for a new session).

    Raises:
        UsageError: if the workspace is not an existing directory.
        SessionLockedError: if another process writes the session.
        CorruptLogError: as `resume_session`.
        UnpairedHistoryError: as `resume_session`; nothing is written.
    """
    try:
        return resume_session(
            session_id, store=store, model=model, tools=tools, cwd=cwd, config=config,
            tool_hooks=tool_hooks, hooks=hooks,
        )
    except SessionNotFoundError:
        loop = start_session(
            store=store, model=model, tools=tools, cwd=cwd if cwd is not None else Path.cwd(),
            session_id=session_id,
            config=config, tool_hooks=tool_hooks, hooks=hooks,
        )
        return loop, None


def fork_session(
    source_id: str,
    *,
    store: SessionStore,
    model: Model,
    boundary: int | None = None,
    child_id: str | None = None,
    tools: ToolRegistry | Sequence[Tool] = (),
    cwd: Path | str | None = None,
    config: LoopConfig | None = None,
    tool_hooks: ToolHooks | None = None,
    hooks: LoopHooks | None = None,
) -> AgentLoop:
    """Fork a stored session and return a loop on the child.

    The child is persisted first (`SessionStore.fork`, session-spec 5.2: the parent's
    events through `boundary`, then `session/end-seed`); the parent is not changed and may
    keep running in another loop. The child continues the parent's turn numbering. A
    boundary inside a turn is closed with crash repair's closers: this is how a session
    whose closed history has unanswered calls is rescued (`UnpairedHistoryError.rescue_seq`).

    Args:
        source_id: the session to fork.
        store: where both sessions are persisted.
        model: the model the child's loop requests.
        boundary: the last inherited seq (inclusive); None means the parent's last event,
            or its last closed turn's `turn/end` while its final turn is open.
        child_id: the child's id; a UUID4 when None.
        tools: the tools the model may call.
        cwd: the workspace; defaults to the parent's recorded one.
        config: loop options.
        tool_hooks: pre- and post-execute hooks.
        hooks: the loop-level hooks.

    Returns:
        A loop on the child session (`loop.session.id` is the child id).

    Raises:
        SessionForkError: `SESSION_ALREADY_EXISTS`, `SESSION_NOT_FOUND`,
            `INVALID_BOUNDARY` or `OPEN_TURN` (a default fork of a session whose only turn
            is open).
        SessionLockedError: if `boundary` lies inside the parent's open final turn while a
            writer holds the parent.
        UnpairedHistoryError: if the inherited prefix holds a step closed with calls
            unanswered (the message names the boundary that rescues it).
    """
    child = store.fork(source_id, boundary=boundary, child_id=child_id)
    loop, _repair = resume_session(
        child, store=store, model=model, tools=tools, cwd=cwd, config=config,
        tool_hooks=tool_hooks, hooks=hooks,
    )
    return loop
