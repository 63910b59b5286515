"""Open an AgentLoop over a stored session: start a new one, continue one, or resume one.

The four entry points (`start_session`, `resume_session`, `open_session`, `fork_session`)
take one `SessionSetup`: what every loop over a session needs (store, model, tools,
workspace, options, hooks), documented once there. A setup is frozen, so the same one can
start a session, resume it after a crash and fork it; `dataclasses.replace(setup, model=...)`
changes one part.

Resume loads the log with crash repair committed (a torn tail is truncated, an interrupted
final turn gets its closers), seeds a `Session` (which appends `session/end-seed`; a
snapshot makes this read only the events after it, docs/store.md#snapshots) and opens the
single writer; the marker becomes durable with the next batch.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, SessionNotFoundError, UsageError
from ..llm import Model
from ..log import Session, SessionHeader, now_ms
from ..store import RepairReport, SessionStore
from ..tools import Approver, Tool, ToolHooks, ToolRegistry
from ._agent import AgentLoop
from ._config import LoopConfig
from ._hooks import LoopHooks

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class SessionSetup:
    """What a loop over a stored session is built from; the same for every entry point.

    Build one and pass it to `start_session`, `resume_session`, `open_session` or
    `fork_session`; nothing is opened or checked until then.

    Args:
        store: where the log is persisted (a fork's parent and child both live here).
        model: the model to request.
        tools: the tools the model may call (a registry, or a sequence of tools).
        cwd: the workspace directory the tools are confined to; it must exist when a
            session is opened (`UsageError` otherwise, before anything is written). None
            means the session header's recorded workspace for a stored session (`resume`,
            `open`, `fork`), and the current directory for a new one. A new session
            records it in its header.
        config: loop options; None means `LoopConfig()`.
        tool_hooks: pre- and post-execute hooks around each tool call.
        hooks: the loop-level hooks (pre-step, request, request error, turn-stopping).
        approver: answers approval asks in this process (sync or async; a `Decision`, or
            None to pause); None pauses the turn on each ask (docs/approvals.md).

    Raises:
        ConfigError: at construction, if a part has the wrong type (a path instead of a
            store, a model string instead of a model, a plain function instead of a `Tool`,
            a dict instead of `LoopConfig`, `LoopHooks` or `ToolHooks`); the message names the
            part and what to pass. Nothing is opened or written.
    """

    store: SessionStore
    model: Model
    tools: ToolRegistry | Sequence[Tool] = ()
    cwd: Path | str | None = None
    config: LoopConfig | None = None
    tool_hooks: ToolHooks | None = None
    hooks: LoopHooks | None = None
    approver: Approver | None = None

    def __post_init__(self) -> None:
        _check_setup(self)


def _refuse(part: str, value: object, expected: str) -> ConfigError:
    """The `ConfigError` for a `SessionSetup` part of the wrong type."""
    return ConfigError(f"SessionSetup({part}=...) got {type(value).__name__}; pass {expected}")


def _check_setup(setup: SessionSetup) -> None:
    """Refuse a `SessionSetup` part of the wrong type (style rule D23: checked once, at build)."""
    if not isinstance(setup.store, SessionStore):
        raise _refuse("store", setup.store, "a store such as duraloop.JsonlStore(path)")
    if not callable(getattr(setup.model, "stream", None)):
        hint = (
            " (a model string: build the model with duraloop.llm.parse_model_spec)"
            if isinstance(setup.model, str)
            else ""
        )
        raise _refuse("model", setup.model, f"a model object with stream(){hint}")
    tools = setup.tools
    if not isinstance(tools, ToolRegistry):
        if isinstance(tools, str | bytes | dict) or not isinstance(tools, Sequence):
            raise _refuse("tools", tools, "a ToolRegistry or a list of duraloop.tools.Tool")
        wrong = next((tool for tool in tools if not isinstance(tool, Tool)), None)
        if wrong is not None:
            raise _refuse(
                "tools", wrong, "Tool objects in tools: decorate a function with @duraloop.tool"
            )
    if setup.cwd is not None and not isinstance(setup.cwd, str | Path):
        raise _refuse("cwd", setup.cwd, "a directory path (str or pathlib.Path)")
    if setup.approver is not None and not callable(setup.approver):
        raise _refuse("approver", setup.approver, "a callable taking an ApprovalRequest")
    parts: tuple[tuple[str, object, type], ...] = (
        ("config", setup.config, LoopConfig),
        ("tool_hooks", setup.tool_hooks, ToolHooks),
        ("hooks", setup.hooks, LoopHooks),
    )
    for part, value, kind in parts:
        if value is not None and not isinstance(value, kind):
            raise _refuse(part, value, f"a duraloop {kind.__name__} or None")


def _workspace(cwd: Path | str | None) -> Path:
    """Resolve a workspace directory, refusing one that does not exist (before any write)."""
    workspace = Path(cwd if cwd is not None else ".").resolve()
    if not workspace.is_dir():
        raise UsageError(f"workspace {workspace} is not a directory; create it or pass another cwd")
    return workspace


def _loop(session: Session, setup: SessionSetup, workspace: Path) -> AgentLoop:
    """Open the session's single writer in `setup.store` and build the loop over it."""
    writer = setup.store.open_writer(session)
    try:
        return AgentLoop(
            session,
            model=setup.model,
            tools=setup.tools,
            cwd=workspace,
            config=setup.config,
            durability=writer,
            tool_hooks=setup.tool_hooks,
            hooks=setup.hooks,
            approver=setup.approver,
        )
    except BaseException:
        writer.close()  # a loop that was never built must not keep the session's writer
        raise


def new_session_id() -> str:
    """Return a fresh session id (a UUID4 string)."""
    return str(uuid.uuid4())


def start_session(setup: SessionSetup, *, session_id: str | None = None) -> AgentLoop:
    """Create a new session in `setup.store` and return a loop that writes it.

    Args:
        setup: the store, model, tools, workspace (None: the current directory), options
            and hooks (see `SessionSetup`).
        session_id: the id to use; a fresh UUID when None.

    Returns:
        An `AgentLoop` owning the session's writer; call `close()` when done.

    Raises:
        UsageError: if the workspace is not an existing directory.
        SessionExistsError: if `session_id` already has a stored log (resume it instead).
        SessionLockedError: if another process writes that session.
    """
    workspace = _workspace(setup.cwd)
    sid = session_id or new_session_id()
    header = SessionHeader(id=sid, created_at=now_ms(), cwd=str(workspace))
    return _loop(Session(sid, header=header), setup, workspace)


def resume_session(session_id: str, setup: SessionSetup) -> tuple[AgentLoop, RepairReport]:
    """Load a stored session with crash repair and return a loop that continues it.

    Args:
        session_id: the stored session.
        setup: the store it is persisted in, model, tools, workspace (None: the session
            header's), options and hooks (see `SessionSetup`).

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
    loaded, session = setup.store.prepare(session_id)
    recorded = loaded.header.cwd
    cwd = setup.cwd
    workspace = _workspace(cwd if cwd is not None else recorded)
    if cwd is not None and recorded is not None and workspace != Path(recorded):
        logger.warning(
            "session %s was created in workspace %s; this loop works in %s instead",
            session_id,
            recorded,
            workspace,
        )
    # The `session/end-seed` joins the next durable batch (the first step's, a send's, or
    # close's) instead of paying an fsync of its own: lost in a crash before then, it is
    # appended again by the next resume, and nothing else happened in between.
    return _loop(session, setup, workspace), loaded.repair


def open_session(session_id: str, setup: SessionSetup) -> tuple[AgentLoop, RepairReport | None]:
    """Resume `session_id` if it is stored, else create it with that id.

    Args:
        session_id: the session to continue or create.
        setup: see `SessionSetup`; a None workspace means the session's recorded one when
            it exists, else the current directory.

    Returns:
        The loop, and the repair report (None for a new session).

    Raises:
        UsageError: if the workspace is not an existing directory.
        SessionLockedError: if another process writes the session.
        CorruptLogError: as `resume_session`.
        UnpairedHistoryError: as `resume_session`; nothing is written.
    """
    try:
        return resume_session(session_id, setup)
    except SessionNotFoundError:
        return start_session(setup, session_id=session_id), None


def fork_session(
    source_id: str,
    setup: SessionSetup,
    *,
    boundary: int | None = None,
    child_id: str | None = None,
) -> AgentLoop:
    """Fork a stored session and return a loop on the child.

    The child is persisted first (`SessionStore.fork`, docs/recovery.md#fork: the parent's
    events through `boundary`, then `session/end-seed`); the parent is not changed and may
    keep running in another loop. The child continues the parent's turn numbering. A
    boundary inside a turn is closed with crash repair's closers: this is how a session
    whose closed history has unanswered calls is rescued (`UnpairedHistoryError.rescue_seq`).

    Args:
        source_id: the session to fork.
        setup: the store both sessions live in, and the child loop's model, tools,
            workspace (None: the parent's recorded one), options and hooks (see
            `SessionSetup`).
        boundary: the last inherited seq (inclusive); None means the parent's last event,
            or its last closed turn's `turn/end` while its final turn is open.
        child_id: the child's id; a UUID4 when None.

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
    child = setup.store.fork(source_id, boundary=boundary, child_id=child_id)
    loop, _repair = resume_session(child, setup)
    return loop
