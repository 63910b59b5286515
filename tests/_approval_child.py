"""A child process driving one phase of a paused-approval session (run as a script).

    python tests/_approval_child.py PLAN_JSON

The plan (`Plan`, as JSON) names the phase, the store and the kill point. The session's one
turn has a first step of `before` parallel `p` calls, one `danger` call (`requires_approval`)
and `after` more `p` calls, then a text step. Each tool body appends its call id to
`WORKSPACE/marker`, so the parent counts how often a body ran. Phases:

- `run`: start the session and run the turn; print `PAUSED <call id>`, or `ENDED <kind>`.
- `hold`: as `run`, then wait for a line on stdin before closing; print `CLOSED`.
- `probe`: resume; print `LOCKED` on `SessionLockedError` (exit 3), else `RESUMED` and close.
- `decide`: resume, decide the waiting call (`allow`, `feedback`), print `ACK`, close.
- `continue`: resume, `continue_turn()`, print `ENDED <kind>` and `REQUEST <json>` (the
  last model request's messages).
- `decide-continue`: `decide` then `continue` in one process.

At `kill` the process SIGKILLs itself (`KILL_POINTS`); stdout is flushed first, so a parent
sees `ACK` exactly when `decide()` returned. The parent test also imports this module to
resume in its own process (`setup`, `open_store`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from duraloop.errors import SessionLockedError
from duraloop.llm import ScriptedModel
from duraloop.log import Event
from duraloop.loop import AgentLoop, LoopConfig, SessionSetup, resume_session, start_session
from duraloop.store import JsonlStore, SessionStore, SqliteStore
from duraloop.tools import ToolContext, tool

SESSION = "appr"
DANGER_ID = "d1"
ACK = "ACK"
KILL_POINTS = (
    "ask-appended",  # `approval/asked` committed in memory, before the flush that stores it
    "paused",  # `run_turn()` returned paused, before `close()`
    "decided-appended",  # `approval/decided` committed in memory, before `decide()` flushes
    "continue-begins",  # `decide()` returned (ACK printed), before `continue_turn()`
    "call-appended",  # the decided call's `tool/call` committed, before the flush of it
    "body",  # inside the approved body, right after it wrote its marker line
)
_kill_in_body = False


@dataclass(frozen=True)
class Plan:
    """One child run: the phase, where the session lives, the step's shape, the kill point."""

    phase: str
    store_kind: str
    store_path: str
    workspace: str
    before: int = 1
    after: int = 0
    allow: bool = True
    feedback: str | None = None
    kill: str | None = None
    warm: bool = False
    """Run a text-only turn first (a snapshot is written after every closed turn)."""


def _mark(ctx: ToolContext) -> None:
    with (ctx.cwd / "marker").open("a", encoding="utf-8") as file:
        file.write(f"{ctx.call_id}\n")
        file.flush()


@tool(parallel=True)
async def p(ctx: ToolContext, x: int = 0) -> str:
    """Record that this body ran.

    Args:
        x: a number echoed back.
    """
    _mark(ctx)
    return f"p{x}"


@tool(requires_approval=True)
async def danger(ctx: ToolContext, path: str) -> str:
    """Delete a path (only records that it ran).

    Args:
        path: what to delete.
    """
    _mark(ctx)
    if _kill_in_body:
        _die()
    return f"deleted {path}"


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def open_store(kind: str, path: str | Path) -> SessionStore:
    """The store of `kind` (`jsonl`: a directory; `sqlite`: a database file) at `path`."""
    if kind == "jsonl":
        return JsonlStore(Path(path))
    if kind == "sqlite":
        return SqliteStore(Path(path))
    raise SystemExit(f"unknown store kind {kind!r}")


def first_script(before: int, after: int, *, warm: bool = False) -> list[dict[str, Any]]:
    """The first process's script: the warm-up turn if `warm`, the tool step, a text step."""
    calls: list[dict[str, Any]] = [
        {"id": f"b{i}", "name": "p", "arguments": {"x": i}} for i in range(before)
    ]
    calls.append({"id": DANGER_ID, "name": "danger", "arguments": {"path": "build"}})
    calls += [{"id": f"a{i}", "name": "p", "arguments": {"x": 10 + i}} for i in range(after)]
    warm_up: list[dict[str, Any]] = [{"text": "warmed up"}] if warm else []
    return [*warm_up, {"text": "", "tool_calls": calls}, {"text": "done"}]


REST_OF_SCRIPT: list[dict[str, Any]] = [{"text": "done"}]
"""What a loop continuing the paused turn requests: the text step after the tool step."""


def setup(store: SessionStore, workspace: str | Path, script: list[dict[str, Any]]) -> SessionSetup:
    """A setup over `store` with the two tools and a scripted model playing `script`.

    A snapshot is written after every closed turn, so a resume after a warm-up turn loads
    through it (docs/store.md#snapshots).
    """
    return SessionSetup(
        store=store,
        model=ScriptedModel(script),
        tools=[p, danger],
        cwd=Path(workspace),
        config=LoopConfig(snapshot_every=1),
    )


def _kill_on(loop: AgentLoop, kind: str, call_id: str | None = None) -> None:
    """SIGKILL this process as soon as an event of `kind` (of `call_id`) is committed."""

    def observer(event: Event) -> None:
        if event.type == kind and (call_id is None or event.data.get("callId") == call_id):
            _die()

    loop.session.observe(observer)


def _say(text: str) -> None:
    print(text, flush=True)


async def _run(plan: Plan, store: SessionStore) -> None:
    loop = start_session(
        setup(store, plan.workspace, first_script(plan.before, plan.after, warm=plan.warm)),
        session_id=SESSION,
    )
    with loop:
        if plan.warm:
            assert (await loop.run_turn("warm up")).kind == "completed"
        if plan.kill == "ask-appended":
            _kill_on(loop, "approval/asked")
        result = await loop.run_turn("go")
        if plan.kill == "paused":
            _die()
        if result.kind == "paused" and result.approval is not None:
            _say(f"PAUSED {result.approval.call_id}")
        else:
            _say(f"ENDED {result.kind}")
        if plan.phase == "hold":
            sys.stdin.readline()
    _say("CLOSED")


async def _decide(plan: Plan, loop: AgentLoop) -> None:
    if plan.kill == "decided-appended":
        _kill_on(loop, "approval/decided")
    await loop.decide(DANGER_ID, allow=plan.allow, feedback=plan.feedback)
    _say(ACK)


async def _continue(plan: Plan, loop: AgentLoop) -> None:
    if plan.kill == "continue-begins":
        _die()
    if plan.kill == "call-appended":
        _kill_on(loop, "tool/call", DANGER_ID)
    result = await loop.continue_turn()
    _say(f"ENDED {result.kind}")
    model = loop.model
    assert isinstance(model, ScriptedModel)
    messages = [dict(m) for m in model.requests[-1].messages] if model.requests else []
    _say("REQUEST " + json.dumps(messages, default=str))


async def main(plan: Plan) -> int:
    """Run one phase of `plan`; return the exit code."""
    global _kill_in_body
    _kill_in_body = plan.kill == "body"
    store = open_store(plan.store_kind, plan.store_path)
    if plan.phase in ("run", "hold"):
        await _run(plan, store)
        return 0
    try:
        loop, report = resume_session(SESSION, setup(store, plan.workspace, REST_OF_SCRIPT))
    except SessionLockedError:
        _say("LOCKED")
        return 3
    with loop:
        paused = loop.paused
        _say(f"RESUMED {paused.call_id if paused else '-'} closers={len(report.closers)}")
        if plan.phase in ("decide", "decide-continue"):
            await _decide(plan, loop)
        if plan.phase in ("continue", "decide-continue"):
            await _continue(plan, loop)
    return 0


def run_child(plan: Plan) -> list[str]:
    """The argv running this module as a child process for `plan`."""
    return [sys.executable, __file__, json.dumps(dataclasses.asdict(plan))]


if __name__ == "__main__":
    sys.exit(anyio.run(main, Plan(**json.loads(sys.argv[1]))))
