"""The worker's DBOS registration: one partitioned queue, one workflow, one step.

See docs/workers.md#on-dbos. DBOS Transact keeps the queue and every workflow's state in
PostgreSQL (its system schema is `<store schema>_dbos`, beside the store's tables):

- the queue `duraloop-turns` is partitioned by session id with `partition_concurrency=1`,
  so at most one drive of a session runs at a time across every worker (the lease is the
  store's own guarantee behind it), and each worker dequeues at most `--concurrency`;
- the workflow `duraloop.drive_session(session_id)` is one step, `run_queued_turns`,
  which `_drive.drive_session` implements. DBOS re-executes the step of a worker that
  died; the step is written to be re-executed (a resume with repair, never a tool re-run).

The step needs the process's worker (`Runtime`, set by `run_worker` before DBOS launches):
DBOS itself is one instance per process, so the worker is too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
from dbos import DBOS

from ._drive import DriveControl, LoopObserver, SetupFactory, drive_session

if TYPE_CHECKING:
    from ..store import PostgresStore

from ._dbos_client import APPLICATION, QUEUE, WORKFLOW, system_schema

__all__ = ["APPLICATION", "QUEUE", "WORKFLOW", "Runtime", "install", "system_schema"]

logger = logging.getLogger(__name__)


@dataclass
class Runtime:
    """What the step needs in this process: the store, the session setup, the policy.

    `running`, `finished`, `continued` and `taken_over` count this worker's drives, the
    submissions it finished, the continuations it ran and the workflows it recovered.
    """

    store: PostgresStore
    setup: SetupFactory
    executor: str
    on_takeover: Literal["continue", "stop"]
    progress: Callable[[Runtime], None] | None = None
    observe: LoopObserver | None = None
    running: int = 0
    finished: int = 0
    continued: int = 0
    taken_over: int = 0
    queued: int = 0
    control: DriveControl = field(default_factory=DriveControl)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def report(self) -> None:
        """Tell `progress` how things stand (a failing callback only logs)."""
        if self.progress is None:
            return
        try:
            self.progress(self)
        except Exception:
            logger.exception("the worker's progress callback failed")


_RUNTIME: list[Runtime] = []


def install(runtime: Runtime) -> None:
    """Make `runtime` the one the step uses (before `DBOS.launch`)."""
    _RUNTIME[:] = [runtime]


@DBOS.step(name="duraloop.run_queued_turns", retries_allowed=False)
def run_queued_turns(session_id: str) -> dict[str, Any]:
    """Drive `session_id` in this worker (the workflow's one step)."""
    runtime = _RUNTIME[0]
    with runtime.lock:
        runtime.running += 1
    runtime.report()
    try:
        with runtime.store.postgres.connection() as connection:
            report = anyio.run(
                lambda: drive_session(
                    runtime.store,
                    connection,
                    session_id,
                    runtime.setup,
                    executor=runtime.executor,
                    on_takeover=runtime.on_takeover,
                    control=runtime.control,
                    observe=runtime.observe,
                )
            )
    finally:
        with runtime.lock:
            runtime.running -= 1
    with runtime.lock:
        runtime.finished += report.finished
        runtime.continued += report.continued
    runtime.report()
    return {"turns": report.turns, "continued": report.continued, "finished": report.finished}


@DBOS.workflow(name=WORKFLOW)
def drive_session_workflow(session_id: str) -> dict[str, Any]:
    """The workflow "drive session X": its queued turns, under its lease."""
    return run_queued_turns(session_id)
