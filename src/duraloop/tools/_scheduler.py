"""The tool-call scheduler: groups, a rolling pool, model-order commits.

See docs/scheduler.md#planning-and-groups.

Calls are planned in model order. A parallel-safe call starts a group of all remaining calls
(cut short when a later call reclassifies as exclusive); an exclusive call is a one-call
barrier. Within a group at most `max_parallel_tool_calls` dispatches are in flight; each
call's `tool/call` is appended when it starts, after its pre-execute hooks, and is made
durable (`ensure_durable`) before any body runs. Results commit strictly in model order; a
committed result is made durable by the next group commit, started at once while siblings
still run (a crash then loses no committed result), and left to the step's next durable
boundary when every started call is committed (calls finishing together share one fsync).
A call that asks for approval is a barrier too (docs/approvals.md#the-barrier): when a
person must answer, every started call settles and commits, `approval/asked` is made
durable, and with no one to answer here the scheduler returns `paused`.

Abort stops new starts, drains and commits the started calls, and answers every unstarted
call with a `tool/call` + `ABORTED_BEFORE_DISPATCH` pair. Any other failure stops new
starts, drains every started dispatch (their results are discarded) and re-raises the first
failure; the driver then writes recovery results (docs/loop.md#unanswered-tool-results). The
scheduler never writes `step/end` or `turn/end`. Each committed result's
`additional_contexts` go to `accept_context` right after it (B11); a committed success with
`concludes_turn` is reported as `concluded`.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

import anyio
from anyio.abc import TaskGroup

from ..log import Message, Session, ToolCallBlock
from ..log.vocabulary import UNAVAILABLE_TEXT
from ._approval import ApprovalGate
from ._outcome import ToolOutcome
from ._pipeline import Prepared, ToolPipeline
from ._request import ToolCallRequest, planned_calls
from ._scheduler_events import append_call, append_skipped_pair, commit_result
from ._signal import CancelSignal
from ._workers import ToolWorkers, tool_workers


@dataclass(frozen=True)
class SchedulerOutcome:
    """What `execute_tool_calls` did.

    Args:
        aborted: whether cancellation stopped the calls (every call is still answered).
        concluded: whether a committed result asked to conclude the turn
            (docs/scheduler.md#running-a-group).
        paused: whether a call waits for a person's approval (docs/approvals.md).
    """

    aborted: bool
    concluded: bool = False
    paused: bool = False


async def execute_tool_calls(
    session: Session,
    calls: Sequence[ToolCallBlock],
    *,
    turn: int,
    step: int,
    pipeline: ToolPipeline,
    signal: CancelSignal,
    max_parallel_tool_calls: int | Callable[[], int] = 10,
    ensure_durable: Callable[[int], Awaitable[None]] | None = None,
    accept_context: Callable[[Message], None] | None = None,
    workers: ToolWorkers | None = None,
    approvals: ApprovalGate | None = None,
) -> SchedulerOutcome:
    """Run an assistant message's tool calls and commit their results in model order.

    Args:
        session: the session to append `tool/call` and `tool/result` events to.
        calls: the assistant's tool-call blocks, in content (model) order.
        turn: the open turn.
        step: the open step.
        pipeline: prepares, dispatches and finalizes each call.
        signal: the turn's cancellation signal.
        max_parallel_tool_calls: the cap on dispatches in flight, or a getter read once per
            group (so a settings change applies at the next group).
        ensure_durable: awaited with a `tool/call`'s seq right before that call's body may
            run; it must make the log durable through that seq (Law 5). Calls started
            together share one flush (group commit): the first makes every buffered
            `tool/call` durable, the others find their seq already covered.
        accept_context: called with each of a result's `additional_contexts`, in order,
            right after that `tool/result` is appended (also while aborting: the contexts
            of committed results are accepted). A raise is a scheduler failure. None
            drops the contexts.
        workers: the worker tasks the dispatches run on (the loop passes the turn's, so a
            step spawns none anew); None opens workers for this call alone.
        approvals: answers the calls that ask for approval; None answers them `unavailable`.

    Returns:
        Whether the calls were aborted or paused, and whether a committed result concluded
        the turn. Every call has exactly one `tool/result` unless this raises or pauses.

    Raises:
        Exception: the first scheduler failure (a vetoed append, a durability failure, an
            internal pipeline fault), after every started dispatch has settled.
    """
    planned = planned_calls(calls, turn=turn, step=step)
    async with AsyncExitStack() as stack:
        if workers is None:  # no turn's workers: open our own for this call
            workers = await stack.enter_async_context(tool_workers())
        return await _run_groups(
            session,
            planned,
            pipeline,
            signal,
            max_parallel_tool_calls,
            ensure_durable,
            accept_context,
            workers,
            approvals,
        )


async def _run_groups(
    session: Session,
    planned: list[ToolCallRequest],
    pipeline: ToolPipeline,
    signal: CancelSignal,
    cap_setting: int | Callable[[], int],
    ensure_durable: Callable[[int], Awaitable[None]] | None,
    accept_context: Callable[[Message], None] | None,
    workers: ToolWorkers,
    approvals: ApprovalGate | None,
) -> SchedulerOutcome:
    """Run the planned calls group by group (docs/scheduler.md#planning-and-groups)."""
    next_index = 0
    concluded = False
    while next_index < len(planned):
        parallel = pipeline.is_parallel(planned[next_index])
        group = planned[next_index:] if parallel else [planned[next_index]]
        cap = cap_setting() if callable(cap_setting) else cap_setting
        runner = _GroupRunner(
            session,
            group,
            pipeline,
            signal,
            cap,
            parallel=parallel,
            ensure_durable=ensure_durable,
            workers=workers,
            accept_context=accept_context,
            approvals=approvals,
        )
        consumed, aborted = await runner.run()
        concluded = concluded or runner.concluded
        if runner.paused:
            return SchedulerOutcome(aborted=False, concluded=concluded, paused=True)
        next_index += consumed
        if aborted:
            for call in planned[next_index:]:
                append_skipped_pair(session, call)
            return SchedulerOutcome(aborted=True, concluded=concluded)
    return SchedulerOutcome(aborted=False, concluded=concluded)


@dataclass(slots=True)
class _Slot:
    outcome: ToolOutcome
    needs_post: bool


@dataclass
class _GroupRunner:
    """State of one group run (docs/scheduler.md#running-a-group).

    Dispatches run on `workers` (the turn's, docs/scheduler.md#running-a-group), so a group
    spawns no task per call. Settled dispatches are queued for the commit loop, which wakes
    on an event.
    """

    session: Session
    group: list[ToolCallRequest]
    pipeline: ToolPipeline
    signal: CancelSignal
    cap: int
    parallel: bool
    ensure_durable: Callable[[int], Awaitable[None]] | None
    workers: ToolWorkers
    accept_context: Callable[[Message], None] | None = None
    approvals: ApprovalGate | None = None
    paused: bool = False
    slots: dict[int, _Slot] = field(default_factory=dict)
    call_seqs: dict[int, int] = field(default_factory=dict)
    in_flight: set[int] = field(default_factory=set)
    next_to_start: int = 0
    committed: int = 0
    aborted: bool = False
    concluded: bool = False
    failure: BaseException | None = None
    _settled: deque[int] = field(default_factory=deque)
    _settled_event: anyio.Event | None = None
    _task_group: TaskGroup | None = None
    _durable_wanted: int = -1
    _durable_running: bool = False

    async def run(self) -> tuple[int, bool]:
        """Run the group; return (calls consumed, aborted) or raise the first failure."""
        self.aborted = self.signal.aborted
        async with anyio.create_task_group() as task_group:
            self._task_group = task_group
            try:
                await self._fill_pool()
                while self.in_flight:
                    self.in_flight.discard(await self._next_settled())
                    while self._settled:  # calls that settled together commit together
                        self.in_flight.discard(self._settled.popleft())
                    self._raise_failure()
                    await self._commit_ready()
                    self._raise_failure()
                    if self.signal.aborted:
                        self.aborted = True
                    await self._fill_pool()
            except BaseException as exc:  # noqa: BLE001 - drained, then re-raised below
                if self.failure is None:
                    self.failure = exc
                with anyio.CancelScope(shield=True):
                    while self.in_flight:
                        self.in_flight.discard(await self._next_settled())
        if self.failure is not None:
            raise self.failure
        if self.aborted:
            for call in self.group[self.next_to_start :]:
                append_skipped_pair(self.session, call)
            return len(self.group), True
        return self.next_to_start, False

    async def _next_settled(self) -> int:
        while not self._settled:
            self._settled_event = anyio.Event()
            await self._settled_event.wait()
        return self._settled.popleft()

    def _raise_failure(self) -> None:
        if self.failure is not None:
            raise self.failure

    async def _fill_pool(self) -> None:
        while (
            not self.aborted
            and not self.paused
            and self.next_to_start < len(self.group)
            and len(self.in_flight) < self.cap
        ):
            index = self.next_to_start
            if index > 0 and self.parallel and not self.pipeline.is_parallel(self.group[index]):
                break
            started = await self._start_call(index)
            if started is None:  # paused, or cancelled while the earlier calls drained
                break
            if started:
                # The body starts when this task next yields: every call the fill starts
                # meanwhile shares the one flush that makes their `tool/call`s durable.
                self._submit(index)
            self.next_to_start += 1
            self._raise_failure()
            if self.committed in self.slots:  # else `_commit_ready` has nothing to commit
                await self._commit_ready()
                self._raise_failure()
            if self.signal.aborted:
                self.aborted = True

    def _submit(self, index: int) -> None:
        """Hand a prepared call's dispatch to the workers."""
        self.in_flight.add(index)
        self.workers.submit(functools.partial(self._dispatch, index))

    async def _start_call(self, index: int) -> bool | None:
        """Prepare, then append `tool/call`; True: dispatch it; None: not started (paused)."""
        call = self.group[index]
        gate = self.approvals
        if gate is not None and gate.holds(call):
            prepared = await gate.answer_recorded(call, self.signal, self.ensure_durable)
            self._raise_failure()
            self.paused = prepared is None
            if prepared is None:
                return None
        else:
            prepared = await self.pipeline.prepare(call, self.signal)
            self._raise_failure()
            if prepared.kind == "ask":
                prepared = await self._ask(call, prepared.reason)
                if prepared is None:
                    return None
        self.call_seqs[index] = append_call(self.session, call)
        if prepared.kind == "dispatch":
            return True
        if prepared.outcome is None:
            raise RuntimeError(f"pipeline returned {prepared.kind} without an outcome")
        self.slots[index] = _Slot(prepared.outcome, needs_post=prepared.kind == "post-result")
        return False

    async def _ask(self, call: ToolCallRequest, reason: str) -> Prepared | None:
        """Answer an asking call (docs/approvals.md#the-barrier); None when it is not started."""
        gate = self.approvals
        if gate is None:
            text = UNAVAILABLE_TEXT.format(name=call.name)
            return Prepared("post-result", ToolOutcome.failure(text))
        if gate.needs_person(call):
            await self._drain()  # the calls before it commit before anyone is asked
            if self.signal.aborted:
                self.aborted = True
                return None
        prepared = await gate.ask(call, reason, self.signal, self.ensure_durable)
        self._raise_failure()
        self.paused = prepared is None
        return prepared

    async def _drain(self) -> None:
        """Wait for every started call to settle, and commit the results."""
        while self.in_flight:
            self.in_flight.discard(await self._next_settled())
            while self._settled:
                self.in_flight.discard(self._settled.popleft())
            self._raise_failure()
            await self._commit_ready()
            self._raise_failure()
        await self._commit_ready()
        self._raise_failure()

    async def _dispatch(self, index: int) -> None:
        try:
            if self.ensure_durable is not None:
                await self.ensure_durable(self.call_seqs[index])
            if self.failure is not None:
                return  # a sibling failed while this call waited: never start its body
            outcome = await self.pipeline.dispatch(self.group[index], self.signal)
            if self.failure is None:
                self.slots[index] = _Slot(outcome, needs_post=True)
        except Exception as exc:  # noqa: BLE001 - the first failure is re-raised by the group
            if self.failure is None:
                self.failure = exc
        finally:
            self._settled.append(index)
            if self._settled_event is not None:
                self._settled_event.set()

    def _request_durable(self) -> None:
        """Start a group commit of the results just committed, unless one is under way."""
        if self.ensure_durable is None or self._task_group is None:
            return
        self._durable_wanted = self.session.seq - 1
        if not self._durable_running:
            self._durable_running = True
            self._task_group.start_soon(self._make_results_durable)

    def _uncommitted_started(self) -> bool:
        return self.committed < self.next_to_start

    async def _make_results_durable(self) -> None:
        """Flush until the last committed result is durable (B4); a failure fails the group.

        Skipped once every started call is committed: the next body's `ensure_durable` or
        the step's next flush, whichever comes first, then covers the results.
        """
        try:
            while self._uncommitted_started() and self.ensure_durable is not None:
                target = self._durable_wanted
                await self.ensure_durable(target)
                if self._durable_wanted <= target:
                    return
        except Exception as exc:  # noqa: BLE001 - the first failure is re-raised by the group
            if self.failure is None:
                self.failure = exc
        finally:
            self._durable_running = False

    async def _commit_ready(self) -> None:
        committed_before = self.committed
        await self._commit_contiguous()
        if self.committed > committed_before and self._uncommitted_started():
            self._request_durable()

    async def _commit_contiguous(self) -> None:
        while self.committed < self.next_to_start and self.committed in self.slots:
            index = self.committed
            slot = self.slots.pop(index)
            call = self.group[index]
            outcome = slot.outcome
            if slot.needs_post:
                outcome = await self.pipeline.finalize(call, outcome, self.signal)
            commit_result(self.session, call, outcome, call_seq=self.call_seqs[index])
            if self.accept_context is not None:
                for context in outcome.additional_contexts:
                    self.accept_context(context)
            self.concluded |= outcome.concludes_turn and not outcome.is_error
            self.committed += 1
