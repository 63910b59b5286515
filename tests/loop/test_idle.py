"""The stream idle timer: one cancel scope per run of waits (loop/_idle.py).

The loop's behaviour under the idle timeout is pinned in test_retries.py; here are the timer's
own rules: only a wait is timed, activity re-arms it, and a scope whose deadline fired just as a
chunk arrived is spent, so the next wait runs in a fresh scope and is not cancelled by it.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator
from typing import Any

import anyio
import pytest

from duraloop.llm import StreamChunk, note_stream_activity, watching_stream_activity
from duraloop.loop._idle import IdleTimer


def _chunk(text: str) -> StreamChunk:
    chunk: Any = {"type": "text-delta", "index": 0, "text": text}
    return chunk  # type: ignore[no-any-return]


@pytest.mark.anyio
async def test_a_deadline_fired_as_the_chunk_arrived_spends_the_scope_only() -> None:
    timer = IdleTimer(30.0)
    scopes: list[anyio.CancelScope] = []

    async def stream() -> AsyncGenerator[StreamChunk, None]:
        scopes[0].cancel()  # the deadline "fires" with the chunk already here: no await follows
        yield _chunk("a")
        await anyio.lowlevel.checkpoint()
        yield _chunk("b")

    source = stream()
    got: list[StreamChunk | None] = []
    with timer.scope() as first:
        scopes.append(first)
        got.append(await timer.next_chunk(source, first))
        assert timer.spent(first)
    assert timer.timed_out(first) is None, "a spent scope that caught nothing is no timeout"
    with timer.scope() as second:
        got.append(await timer.next_chunk(source, second))
        assert not timer.spent(second)
        assert second.deadline == math.inf, "no deadline between waits"
    assert [c["text"] if c else None for c in got] == ["a", "b"]  # type: ignore[typeddict-item]
    await source.aclose()


@pytest.mark.anyio
async def test_an_idle_wait_times_out_and_activity_rearms_it() -> None:
    timer = IdleTimer(0.2)

    async def stream() -> AsyncGenerator[StreamChunk, None]:
        for _ in range(4):  # 0.4 s in all, but never 0.2 s without activity
            await anyio.sleep(0.1)
            note_stream_activity()
        yield _chunk("late but alive")
        await anyio.sleep(3600)
        yield _chunk("never")

    source = stream()
    with watching_stream_activity(timer.rearm):
        with timer.scope() as scope:
            first = await timer.next_chunk(source, scope)
            await timer.next_chunk(source, scope)
    assert first is not None and first["text"] == "late but alive"  # type: ignore[typeddict-item]
    failure = timer.timed_out(scope)
    assert failure is not None and failure["type"] == "finish"
    assert failure["reason"]["failure"]["code"] == "TIMEOUT"
    await source.aclose()


@pytest.mark.anyio
async def test_without_a_limit_no_wait_is_timed() -> None:
    timer = IdleTimer(None)

    async def stream() -> AsyncGenerator[StreamChunk, None]:
        yield _chunk("x")

    source = stream()
    with timer.scope() as scope:
        assert await timer.next_chunk(source, scope) is not None
        assert await timer.next_chunk(source, scope) is None
    assert scope.deadline == math.inf and timer.timed_out(scope) is None
