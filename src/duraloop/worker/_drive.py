"""Drive one session: run its queued turns, each exactly once (docs/workers.md#exactly-once).

The DBOS workflow "drive session X" runs this as its one step. DBOS re-executes a step whose
worker died, so this is written to be re-executed at any point:

1. take the session's lease and load it with crash repair (`resume_session`): a turn the
   dead worker left open is closed now, its recorded calls answered `TOOL_OUTCOME_UNKNOWN`
   and its unstarted ones `TOOL_NOT_STARTED`; no tool body runs again;
2. for each unfinished submission, oldest first:
   - `running` with turn T: the previous attempt started it. If T ended on its own (the
     worker died after the turn but before marking it), it is marked done with that end.
     If T was closed by repair (`interrupted`), a continuation turn tells the model so
     (`WorkerConfig.on_takeover` `continue`, the default) and the submission is done as
     `continued`; with `stop` it is done as `interrupted`. If T never reached the log
     (the worker died between marking and writing), it runs now as a fresh turn.
   - `queued`: it is marked `running` with the next turn number (under the lease, so no
     other writer can take that number), then the turn runs, then it is marked done; a
     `continue` submission continues the paused turn instead (its approval was decided),
     or is done as `not-paused` when nothing waits. A turn that pauses on an approval is
     done as `paused`: the session is closed, so a paused session holds no lease.
3. release the lease.

Marking `running` before the turn and `done` after it, both under the lease, is what makes
every queued turn run once: the log says whether turn T happened, the row says which
submission it was.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import anyio
import anyio.from_thread
import anyio.lowlevel

from ..errors import DuraloopError, SessionLockedError, SessionNotFoundError, StoreError
from ..log.vocabulary import REASON_INTERRUPTED, TURN_END
from ..loop import SessionSetup, resume_session, start_session
from ._tables import Submission, mark, unfinished

if TYPE_CHECKING:
    import psycopg

    from ..loop import AgentLoop
    from ..store import PostgresStore

logger = logging.getLogger(__name__)

TAKEOVER_TEXT = (
    "[duraloop] The previous turn was interrupted by a worker failure and closed by recovery: "
    "its tool calls that were running are recorded with the outcome unknown "
    "(TOOL_OUTCOME_UNKNOWN: they may or may not have taken effect, and were not run again), "
    "and the ones not started as not started. Check what is done before repeating anything, "
    "then continue the task."
)
"""The prompt of the continuation turn after a takeover (`on_takeover="continue"`)."""

SetupFactory = Callable[["PostgresStore", str], SessionSetup]
"""Builds the `SessionSetup` (model, tools, workspace, config) a worker runs a session with."""

LoopObserver = Callable[["AgentLoop"], Callable[[], None]]
"""Called with each loop a worker opens; returns the function that stops observing it (e.g.
`duraloop.telemetry.instrument`, which returns its detach)."""


@dataclass
class DriveControl:
    """How a worker stops its drives, from any thread.

    `stopping` set means no new turn starts; `cancel_all` cancels the running turns
    durably (they end `aborted`, recorded).
    """

    stopping: threading.Event = field(default_factory=threading.Event)
    _loops: dict[int, tuple[object, AgentLoop]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def enter(self, loop: AgentLoop) -> int:
        """Register a drive's loop (called on its event loop); return its key."""
        with self._lock:
            key = id(loop)
            self._loops[key] = (anyio.lowlevel.current_token(), loop)
            return key

    def leave(self, key: int) -> None:
        """Forget a drive's loop."""
        with self._lock:
            self._loops.pop(key, None)

    def cancel_all(self) -> int:
        """Cancel every registered drive's running turn; return how many were asked."""
        with self._lock:
            loops = list(self._loops.values())
        for token, loop in loops:
            try:
                anyio.from_thread.run_sync(
                    loop.cancel,
                    {"kind": "worker-drain"},
                    token=token,  # type: ignore[arg-type]
                )
            except RuntimeError:  # its event loop already ended: nothing runs there
                continue
        return len(loops)


@dataclass(frozen=True)
class DriveReport:
    """What one drive did: turns run, takeovers continued, submissions finished."""

    turns: int = 0
    continued: int = 0
    finished: int = 0


async def drive_session(
    store: PostgresStore,
    connection: psycopg.Connection[object],
    session_id: str,
    setup: SetupFactory,
    *,
    executor: str,
    on_takeover: Literal["continue", "stop"] = "continue",
    control: DriveControl | None = None,
    observe: LoopObserver | None = None,
) -> DriveReport:
    """Run the session's unfinished submissions under its lease (see the module docstring).

    Raises:
        SessionLockedError: if another writer holds the session (DBOS's partition keeps one
            drive per session; a stalled worker may still hold the lease until it expires:
            the workflow fails and is recovered later).
        WriterFencedError: if this worker's lease is taken over mid-turn.

    `observe`, when given, is called with the loop once it is open and returns the function
    that stops observing it, called before the loop closes (`WorkerConfig.observe`).
    """
    schema = store.postgres.schema
    pending = unfinished(connection, schema, session_id)
    if not pending:
        return DriveReport()
    control = control or DriveControl()
    if control.stopping.is_set():
        return DriveReport()  # draining: the submissions stay queued for another worker
    built = setup(store, session_id)
    loop = _open(store, session_id, built)
    stop_observing = observe(loop) if observe is not None else None
    key = control.enter(loop)
    turns = continued = finished = 0
    try:
        for submission in pending:
            if control.stopping.is_set():
                break
            outcome, ran, took_over = await _run(
                loop, submission, on_takeover, connection, schema, executor
            )
            mark(connection, schema, submission.id, state="done", outcome=outcome)
            turns += ran
            continued += took_over
            finished += 1
    finally:
        control.leave(key)
        if stop_observing is not None:
            stop_observing()
        loop.close()
        aclose = getattr(built.model, "aclose", None)
        if aclose is not None:  # the adapters' HTTP clients belong to this drive's event loop
            await aclose()
    return DriveReport(turns, continued, finished)


def _open(store: PostgresStore, session_id: str, setup: SessionSetup) -> AgentLoop:
    """Resume the session (or start it), waiting out a dead or stalled holder's lease.

    A drive recovered from a dead worker can start before that worker's lease expires (its
    heartbeat and its lease are renewed apart): it waits up to two lease periods.

    Raises:
        SessionLockedError: if the lease is still held after that (a live writer).
    """
    deadline = time.monotonic() + 2 * store.postgres.lease_seconds
    while True:
        try:
            loop, report = resume_session(session_id, setup)
            break
        except SessionNotFoundError:
            return start_session(setup, session_id=session_id)
        except SessionLockedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(min(0.2, store.postgres.lease_seconds / 10))
    if report.repaired:
        logger.warning(
            "session %s: repaired on takeover (%d closers appended, %d bytes of torn tail cut)",
            session_id,
            len(report.closers),
            report.truncated_bytes,
        )
    return loop


async def _run(
    loop: AgentLoop,
    submission: Submission,
    on_takeover: str,
    connection: psycopg.Connection[object],
    schema: str,
    executor: str,
) -> tuple[str, int, int]:
    """Run one submission; return (outcome, turns run, takeovers continued)."""
    if submission.state == "running" and submission.turn is not None:
        end = _turn_end(loop, submission.turn)
        if end is not None and end != REASON_INTERRUPTED:
            return end, 0, 0
        if end == REASON_INTERRUPTED:
            if on_takeover == "stop":
                return REASON_INTERRUPTED, 0, 0
            return await _turn(loop, TAKEOVER_TEXT, continued="continued"), 1, 1
    if submission.kind == "continue":
        if loop.paused is None:  # continued already (by `approve --continue`, or before)
            return "not-paused", 0, 0
        mark(connection, schema, submission.id, state="running", turn=loop.last_turn)
        return await _turn(loop, None), 1, 0
    turn = loop.last_turn + 1
    mark(connection, schema, submission.id, state="running", turn=turn, executor=executor)
    return await _turn(loop, submission.prompt), 1, 0


async def _turn(loop: AgentLoop, prompt: str | None, *, continued: str | None = None) -> str:
    """Run one turn, or continue the paused one (`prompt` None); return its end kind.

    `continued` replaces the kind of a takeover's continuation turn that ended.

    A failure the turn recorded (a provider error, a budget) ends the submission as
    `error`; a store failure (a fenced or lost writer) propagates: the workflow fails and
    the session's next drive finds the turn in the log.
    """
    try:
        result = await (loop.continue_turn() if prompt is None else loop.run_turn(prompt))
    except StoreError:
        raise
    except DuraloopError as exc:
        logger.warning("session %s: turn failed: %s", loop.session.id, exc)
        return "error"
    return continued or result.kind


def _turn_end(loop: AgentLoop, turn: int) -> str | None:
    """The reason kind of turn `turn`'s `turn/end` in the log, or None if it never ended."""
    for event in reversed(loop.session.events):
        data = event.data
        if event.type == TURN_END and isinstance(data, dict) and data.get("turn") == turn:
            reason = data.get("reason")
            return str(reason.get("kind")) if isinstance(reason, dict) else None
    return None
