"""Synchronous tool bodies after cancellation (issue 9 items 5 and 8): bounded, and honest.

A sync body cannot be interrupted. After the turn's signal fires it gets the grace period;
one that returns in time is reported with its output, one still blocked is answered
`TOOL_OUTCOME_UNKNOWN` saying it could not be interrupted, and the wait ends. Each blocked
body here waits on a `threading.Event` the test sets at the end, so no thread outlives it.
The process-level half (SIGTERM to a real process) is in `tests/loop/test_sigterm.py`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from duraloop.log.vocabulary import (
    ABORTED_AFTER_COMPLETION_TEXT,
    NOT_INTERRUPTED_TEXT,
    OUTCOME_UNKNOWN_ERROR,
)
from duraloop.tools._blocking import BodyNotInterruptedError, run_blocking
from duraloop.tools._definition import tool
from duraloop.tools._outcome import ToolOutcome
from duraloop.tools._pipeline import ToolPipeline
from duraloop.tools._registry import ToolRegistry
from duraloop.tools._request import ToolCallRequest, parse_tool_arguments
from duraloop.tools._signal import CancelSignal

GRACE_SECONDS = 0.2


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """An event every blocked body waits on; set at teardown so no thread is left behind."""
    event = threading.Event()
    yield event
    event.set()


def _call(name: str) -> ToolCallRequest:
    return ToolCallRequest(
        call_id="c1",
        name=name,
        raw_arguments="{}",
        arguments=parse_tool_arguments("{}"),
        turn=1,
        step=1,
    )


async def _dispatch_then_cancel(
    pipeline: ToolPipeline, name: str, started: threading.Event
) -> tuple[ToolOutcome, float]:
    signal = CancelSignal()
    results: list[ToolOutcome] = []

    async def run() -> None:
        outcome = await pipeline.dispatch(_call(name), signal)
        results.append(await pipeline.finalize(_call(name), outcome, signal))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await anyio.to_thread.run_sync(started.wait)
        cancelled_at = time.monotonic()
        signal.cancel()
    return results[0], time.monotonic() - cancelled_at


@pytest.mark.anyio
async def test_sync_body_blocked_forever_is_answered_outcome_unknown_after_the_grace(
    tmp_path: Path, release: threading.Event
) -> None:
    started = threading.Event()

    @tool
    def stuck() -> str:
        """Block, ignoring cancellation (like a read of a FIFO nobody writes)."""
        started.set()
        release.wait()
        return "too late"

    pipeline = ToolPipeline(
        ToolRegistry([stuck]), cwd=tmp_path, session_id="s", cancel_grace_seconds=GRACE_SECONDS
    )
    outcome, waited = await _dispatch_then_cancel(pipeline, "stuck", started)
    assert outcome.error == OUTCOME_UNKNOWN_ERROR
    assert outcome.is_error
    text = NOT_INTERRUPTED_TEXT.format(grace_seconds=GRACE_SECONDS)
    assert outcome.text == text
    assert "could not be interrupted" in text and "0.2 seconds" in text
    assert GRACE_SECONDS <= waited < 10  # bounded, though the body never returned


@pytest.mark.anyio
async def test_sync_body_returning_within_the_grace_is_aborted_with_its_output(
    tmp_path: Path,
) -> None:
    started = threading.Event()
    cancelled = threading.Event()
    effect = tmp_path / "effect.txt"

    @tool
    def slow_write() -> str:
        """Finish a write shortly after the cancel."""
        started.set()
        cancelled.wait(10)
        effect.write_text("done")
        return "wrote effect.txt"

    pipeline = ToolPipeline(
        ToolRegistry([slow_write]), cwd=tmp_path, session_id="s", cancel_grace_seconds=30
    )
    signal = CancelSignal()
    signal.add_listener(lambda _reason: cancelled.set())
    results: list[ToolOutcome] = []

    async def run() -> None:
        outcome = await pipeline.dispatch(_call("slow_write"), signal)
        results.append(await pipeline.finalize(_call("slow_write"), outcome, signal))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await anyio.to_thread.run_sync(started.wait)
        signal.cancel()
    (outcome,) = results
    assert effect.read_text() == "done"
    assert outcome.text == f"{ABORTED_AFTER_COMPLETION_TEXT}\nwrote effect.txt"
    assert outcome.error == {"name": "AbortError", "code": "ABORTED"}


@pytest.mark.anyio
async def test_sync_body_timeout_still_waits_for_the_body_before_cancellation(
    tmp_path: Path,
) -> None:
    @tool(timeout_seconds=0.05)
    def overruns() -> str:
        """Return after the timeout."""
        time.sleep(0.3)  # simulates work that outlives its timeout
        return "late"

    pipeline = ToolPipeline(ToolRegistry([overruns]), cwd=tmp_path, session_id="s")
    started = time.monotonic()
    outcome = await pipeline.dispatch(_call("overruns"), CancelSignal())
    assert time.monotonic() - started >= 0.3  # the thread is not abandoned by a timeout
    assert outcome.text == "Error: tool call timed out after 50ms"


@pytest.mark.anyio
async def test_run_blocking_raises_not_interrupted_and_leaves_a_daemon_thread(
    release: threading.Event,
) -> None:
    signal = CancelSignal()
    signal.cancel()
    threads: list[threading.Thread] = []

    def blocked() -> None:
        threads.append(threading.current_thread())
        release.wait()

    with pytest.raises(BodyNotInterruptedError, match="still running 0.05 seconds"):
        await run_blocking(blocked, signal=signal, grace_seconds=0.05, name="blocked body")
    (thread,) = threads
    assert thread.daemon and thread.is_alive() and thread.name == "blocked body"


@pytest.mark.anyio
async def test_run_blocking_passes_through_value_and_exception() -> None:
    signal = CancelSignal()
    assert await run_blocking(lambda: 42, signal=signal, grace_seconds=1, name="t") == 42

    def boom() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        await run_blocking(boom, signal=signal, grace_seconds=1, name="t")


@pytest.mark.anyio
async def test_watching_async_body_ignoring_the_signal_is_cancelled_after_the_grace(
    tmp_path: Path,
) -> None:
    entered = anyio.Event()

    @tool(watches_signal=True)
    async def deaf() -> str:
        """Claim to watch the signal, then never look at it."""
        entered.set()
        await anyio.sleep(3600)  # simulates a body that forgot to watch ctx.signal
        return "never"

    pipeline = ToolPipeline(
        ToolRegistry([deaf]), cwd=tmp_path, session_id="s", cancel_grace_seconds=GRACE_SECONDS
    )
    signal = CancelSignal()
    outcomes: list[ToolOutcome] = []

    async def run() -> None:
        outcomes.append(await pipeline.dispatch(_call("deaf"), signal))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await entered.wait()
        cancelled_at = time.monotonic()
        signal.cancel()
    assert time.monotonic() - cancelled_at >= GRACE_SECONDS  # it was given the grace period
    (outcome,) = outcomes
    assert outcome.error == {"name": "AbortError", "code": "ABORTED"}
    assert outcome.text == "Error: tool call aborted"  # interrupted at an await: it stopped
