"""A worker process: DBOS over the store's PostgreSQL, heartbeats, takeover, drain.

See docs/workers.md. `run_worker` launches DBOS with this process's executor id, registers
the queue (at most `concurrency` drives here, one per session everywhere), and runs a
heartbeat thread that, every `takeover_seconds / 3`:

- renews this worker's heartbeat (`workers.expires_at`, `takeover_seconds` ahead);
- finds workers whose heartbeat expired without a clean stop and recovers their pending
  workflows through DBOS's recovery for their executor ids (re-enqueued on the same
  partition, idempotent: a workflow another live worker already took is left alone), so a
  dead worker's sessions run again within about `takeover_seconds` plus their lease;
- re-enqueues the drive of a session with unfinished submissions and no live workflow
  (a `submit` that died between its row and its enqueue).

A stop (SIGTERM, SIGINT, or `stop.set()`) drains: no new turn starts (a drive dequeued now
leaves its submissions queued, and another worker's sweep re-enqueues them), running turns
get `drain_seconds` to finish, then are cancelled durably (they end `aborted`, recorded),
DBOS is shut down, the heartbeat is marked stopped and the leases released. A second
SIGTERM/SIGINT exits at once (status 130), as a crash: the others take the drives over.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..store import PostgresStore
from ._dbos import APPLICATION, QUEUE, Runtime, install, system_schema
from ._dbos_client import migrate
from ._drive import LoopObserver, SetupFactory
from ._tables import (
    beat,
    count_queued,
    dead_workers,
    ensure_tables,
    forget_worker,
    queued_sessions,
    stop_beating,
)

if TYPE_CHECKING:
    import psycopg

logger = logging.getLogger(__name__)


@dataclass
class WorkerConfig:
    """How a worker runs.

    Args:
        url: the PostgreSQL URL of the store (libpq form; no `schema=` parameter).
        setup: builds the `SessionSetup` (model, tools, workspace, loop config) for a
            session, given the store and the session id.
        schema: the store's PostgreSQL schema.
        concurrency: the most sessions this worker drives at once.
        takeover_seconds: a worker silent this long is dead to the others, which then
            recover its sessions; also the store's lease period.
        drain_seconds: on stop, how long running turns get to finish.
        on_takeover: after a takeover, `continue` runs a turn telling the model the
            previous one was interrupted by a worker failure; `stop` only closes it.
        executor_id: this worker's DBOS executor id (default `host:pid:random`).
        progress: called (from the worker's threads) after each heartbeat and each drive
            with the counts: drives running here, submissions queued in the store,
            finished here, continuations run here, workflows taken over by this worker.
        observe: called with each loop this worker opens, returning the function that stops
            observing it (called before the loop closes); e.g.
            `lambda loop: duraloop.telemetry.instrument(loop, tracer_provider=provider)`
            traces every turn the worker runs (docs/telemetry.md#cli).
    """

    url: str
    setup: SetupFactory
    schema: str = "duraloop"
    concurrency: int = 4
    takeover_seconds: float = 30.0
    drain_seconds: float = 30.0
    on_takeover: Literal["continue", "stop"] = "continue"
    executor_id: str = field(
        default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    )
    progress: Callable[[Runtime], None] | None = None
    observe: LoopObserver | None = None


def run_worker(config: WorkerConfig, *, stop: threading.Event | None = None) -> None:
    """Run a worker until `stop` is set or the process gets SIGTERM/SIGINT, then drain.

    Raises:
        StoreError: if the store cannot be opened.
    """
    from dbos import DBOS

    stop = stop or threading.Event()
    store = PostgresStore(
        config.url,
        schema=config.schema,
        lease_seconds=config.takeover_seconds,
        owner=config.executor_id,
        pool_size=config.concurrency + 2,
    )
    with store.postgres.connection() as connection:
        ensure_tables(connection, config.schema)
    runtime = Runtime(
        store,
        config.setup,
        config.executor_id,
        config.on_takeover,
        progress=config.progress,
        observe=config.observe,
    )
    install(runtime)
    migrate(config.url, config.schema)  # serialized with other workers' and submits'
    DBOS(
        config={
            "name": APPLICATION,
            "system_database_url": config.url,
            "dbos_system_schema": system_schema(config.schema),
            "executor_id": config.executor_id,
            "log_level": "WARNING",
            "run_migrations": False,
        }
    )
    DBOS.launch()
    DBOS.register_queue(
        QUEUE,
        worker_concurrency=config.concurrency,
        partition_concurrency=1,
        polling_interval_sec=0.2,
        on_conflict="always_update",
    )
    with _signals(stop):
        heart = threading.Thread(
            target=_heartbeat,
            args=(config, runtime, stop),
            name="duraloop-heartbeat",
            daemon=True,
        )
        heart.start()
        stop.wait()
        logger.warning(
            "worker stopping: no new turns; running turns get %.0f s (a second signal exits now)",
            config.drain_seconds,
        )
        _drain(config, runtime)  # inside: a second signal during the drain exits at once
    heart.join(timeout=5)
    if runtime.running:  # not stopped cleanly: the others take these drives over
        logger.warning("worker stopping with %d drives still running", runtime.running)
        return  # the store stays open under them until the process exits
    with store.postgres.connection() as connection:
        stop_beating(connection, config.schema, config.executor_id)
    store.close()


def _drain(config: WorkerConfig, runtime: Runtime) -> None:
    """Stop starting turns, give running ones `drain_seconds`, then cancel them durably."""
    from dbos import DBOS

    runtime.control.stopping.set()
    deadline = time.monotonic() + config.drain_seconds
    while runtime.running and time.monotonic() < deadline:
        time.sleep(0.05)
    if runtime.running:
        asked = runtime.control.cancel_all()
        logger.warning("drain: cancelling %d running turns (they end aborted)", asked)
        cancelled = time.monotonic() + 10
        while runtime.running and time.monotonic() < cancelled:
            time.sleep(0.05)
    DBOS.destroy(workflow_completion_timeout_sec=1)


def _heartbeat(config: WorkerConfig, runtime: Runtime, stop: threading.Event) -> None:
    import psycopg
    from dbos import DBOS

    period = config.takeover_seconds / 3
    swept: dict[str, float] = {}
    while True:
        try:
            with runtime.store.postgres.connection() as connection:
                beat(connection, config.schema, config.executor_id, config.takeover_seconds)
                for dead in dead_workers(connection, config.schema):
                    if dead == config.executor_id:
                        continue
                    # DBOS's recovery for an executor id (the entry its Conductor calls):
                    # re-enqueues that executor's PENDING workflows, idempotently.
                    handles = DBOS._recover_pending_workflows([dead])
                    logger.warning("worker %s is dead: recovered %d workflows", dead, len(handles))
                    with runtime.lock:
                        runtime.taken_over += len(handles)
                    forget_worker(connection, config.schema, dead)
                _requeue_lost(connection, config, swept)
                runtime.queued = count_queued(connection, config.schema)
        except psycopg.Error as exc:  # the next beat retries; a missed one only delays takeover
            logger.warning("worker heartbeat failed: %s", exc)
        runtime.report()
        if stop.wait(period):
            return


def _requeue_lost(
    connection: psycopg.Connection[Any], config: WorkerConfig, swept: dict[str, float]
) -> None:
    """Enqueue a drive for sessions whose queued submissions waited a whole takeover period.

    A `submit` that died between its row and its enqueue leaves such a row; an extra drive
    is harmless (one per session runs at a time; one with nothing queued does nothing).
    A row also waits that long when every worker is busy: `swept` (session -> when) keeps
    this worker from enqueueing more than one extra drive per session per period.
    """
    from dbos import DBOS, SetEnqueueOptions

    from ._dbos import drive_session_workflow

    queue = DBOS.retrieve_queue(QUEUE)
    if queue is None:  # registered at launch; None only while shutting down
        return
    now = time.monotonic()
    for session_id in queued_sessions(connection, config.schema, config.takeover_seconds):
        if now - swept.get(session_id, -math.inf) < config.takeover_seconds:
            continue
        swept[session_id] = now
        with SetEnqueueOptions(queue_partition_key=session_id):
            queue.enqueue(drive_session_workflow, session_id)


@contextlib.contextmanager
def _signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set `stop` while the worker runs (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def on_signal(*_: object) -> None:
        if stop.is_set():  # the second one: leave now (others take the drives over)
            os._exit(130)
        stop.set()

    for sig in previous:
        signal.signal(sig, on_signal)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
