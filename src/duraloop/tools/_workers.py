"""The worker tasks that run tool dispatches, kept for a whole turn.

See docs/scheduler.md#running-a-group. Spawning a task costs more than running a no-op tool,
so the dispatches run on parked workers: a worker runs one job, then parks until it is handed
another. The loop opens one `tool_workers()` per turn, so a step reuses the workers of the
steps before it; `execute_tool_calls` without one opens its own for the call. The scheduler
alone decides how many jobs run at once (the cap); here a job is handed to an idle worker,
or to a new one when none is idle, so there are never more workers than the most jobs that
ran at once.

A worker keeps the context (`contextvars`) of the task that spawned it, as before: a body
sees the context of the first group that needed its worker.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskGroup

Job = Callable[[], Awaitable[None]]
"""A dispatch to run; it must contain its own failures (the scheduler's do)."""


class _Parked:
    """A parked worker: `wake(job)` hands it a job, `wake(None)` tells it to return."""

    __slots__ = ("event", "job")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.job: Job | None = None

    def wake(self, job: Job | None) -> None:
        self.job = job
        self.event.set()


class ToolWorkers:
    """Worker tasks in one task group; obtain them from `tool_workers()`.

    Args:
        task_group: the task group the workers run in.
    """

    def __init__(self, task_group: TaskGroup) -> None:
        self._task_group = task_group
        self._idle: list[_Parked] = []
        self._closed = False

    def submit(self, job: Job) -> None:
        """Run `job` on an idle worker now, or on a new one.

        Args:
            job: the dispatch; it starts when the caller next yields to the event loop.

        Raises:
            RuntimeError: if the workers are closed.
        """
        if self._closed:
            raise RuntimeError("the tool workers are closed")
        if self._idle:
            self._idle.pop().wake(job)
        else:
            self._task_group.start_soon(self._work, job)

    def close(self) -> None:
        """Let every idle worker return, and each busy one once its job is done."""
        self._closed = True
        for parked in self._idle:
            parked.wake(None)
        self._idle.clear()

    async def _work(self, job: Job) -> None:
        next_job: Job | None = job
        while next_job is not None:
            await next_job()
            if self._closed:
                return
            parked = _Parked()
            self._idle.append(parked)
            await parked.event.wait()
            next_job = parked.job


@asynccontextmanager
async def tool_workers() -> AsyncIterator[ToolWorkers]:
    """Open worker tasks for a turn (or one `execute_tool_calls`); close them on exit.

    What the block raises is raised as it is (not in an exception group), after the workers
    returned; the scheduler drains every dispatch it started before it returns or raises, so
    no job is running then.

    Yields:
        The workers.
    """
    raised: BaseException | None = None
    async with anyio.create_task_group() as task_group:
        workers = ToolWorkers(task_group)
        try:
            yield workers
        except BaseException as exc:  # noqa: BLE001 - raised unwrapped once the workers returned
            raised = exc
        finally:
            workers.close()
    if raised is not None:
        raise raised
