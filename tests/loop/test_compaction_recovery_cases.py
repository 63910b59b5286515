"""Overflow recovery, sends during a manual compaction, store failures, cancels, the lock.

Pins compaction-spec 12's cases C30, C32, C36, C37, C41, C42 and C43 on a real `AgentLoop`
over a `ScriptedModel` (docs/compaction.md): an overflow compacts all but the open step and
the newest indivisible unit, then retries (#when); sends while a manual compaction's summary
runs are queued and run after it (#manual); a failed store write inside the bracket closes
it with the error or leaves it complete in memory for the next flush (#failures); a cancel
closes it with `cancelled` and propagates; two compactions exclude each other (#the-lock).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

from duraloop.errors import CompactionError, StoreError
from duraloop.llm import ModelRequest, ScriptedModel
from duraloop.log import Event, Session, balanced_cuts, check_pairing, is_checkpoint
from duraloop.log.vocabulary import (
    ASSISTANT_MESSAGE,
    COMPACTION_END,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    CONTEXT_WINDOW_EXCEEDED,
    INBOX_SPLICED,
    TOOL_RESULT,
    TURN_START,
    USER_MESSAGE,
)
from duraloop.loop import AgentLoop, Summary, SummaryRequest
from duraloop.store import MemoryBackend, SessionStore, WriteReceipt
from duraloop.testing import assert_log_valid
from duraloop.tools import CancelSignal, TurnCancelled

from ._compaction_support import TestSummarizer, compacting_loop, of_type, tool_script

pytestmark = pytest.mark.anyio

BRACKET = (COMPACTION_START, COMPACTION_SUMMARY, COMPACTION_END)
OVERFLOW: dict[str, Any] = {
    "error": {"code": CONTEXT_WINDOW_EXCEEDED, "message": "prompt is too long"}
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class GatedSummarizer(TestSummarizer):
    """The test summarizer; its next call after `arm()` (and its first) waits for `release`."""

    __test__ = False

    def __init__(self) -> None:
        super().__init__()
        self.arm()

    def arm(self) -> None:
        self.armed = True
        self.started = anyio.Event()
        self.release = anyio.Event()

    async def __call__(self, request: SummaryRequest) -> Summary:
        if self.armed:
            self.armed = False
            self.started.set()
            await self.release.wait()
        return await super().__call__(request)


class FlakyBackend(MemoryBackend):
    """The memory backend, recording each stored batch's types; the first batch holding
    `fail_on` is refused once, as a full disk would."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_on: str | None = None
        self.batches: list[list[str]] = []

    def append(self, session_id: str, batch: Sequence[Event]) -> WriteReceipt:
        types = [event.type for event in batch]
        if self.fail_on in types:
            self.fail_on = None
            raise StoreError("disk full")
        self.batches.append(types)
        return super().append(session_id, batch)


async def _stored_loop(
    tmp_path: Path, turns: int, summarizer: Any = None, extra: Sequence[dict[str, Any]] = ()
) -> tuple[Session, AgentLoop, FlakyBackend, SessionStore]:
    """A loop persisted to a `FlakyBackend` store, after `turns` closed turns."""
    backend = FlakyBackend()
    store = SessionStore(backend)
    session = Session("s")
    script = [*({"text": f"answer {n} " + "a" * 400} for n in range(turns)), *extra]
    _, model, loop = compacting_loop(
        tmp_path, script, window=None, summarizer=summarizer, session=session
    )
    loop = AgentLoop(
        session, model=model, cwd=tmp_path, config=loop.config,
        durability=store.open_writer(session),
    )  # fmt: skip
    for n in range(turns):
        await loop.run_turn(f"prompt {n} " + "p" * 400)
    return session, loop, backend, store


def _requests(loop: AgentLoop) -> list[ModelRequest]:
    assert isinstance(loop.model, ScriptedModel)
    return loop.model.requests


def _after(events: Sequence[Event], seq: int, *kinds: str) -> list[Event]:
    return [event for event in events[seq:] if event.type in kinds]


async def test_c30_an_overflow_below_pressure_compacts_and_retries(tmp_path: Path) -> None:
    script = [*({"text": f"answer {n} " + "a" * 400} for n in range(3)), OVERFLOW, {"text": "ok"}]
    session, model, loop = compacting_loop(tmp_path, script, window=None)
    for n in range(3):
        await loop.run_turn(f"prompt {n} " + "p" * 400)
    generation = session.surface.replace_generation
    result = await loop.run_turn("the fourth prompt")
    assert result.kind == "completed" and result.text == "ok"
    turn = of_type(session.events, TURN_START)[-1]
    newest = _after(session.events, turn.seq, USER_MESSAGE)[0].seq  # newest when it overflowed
    assert session.surface.replace_generation == generation + 1
    start, summary, end = of_type(session.events, *BRACKET)
    assert start.data["turn"] == end.data["turn"] == 4 and "error" not in end.data
    assert newest in session.surface.nodes  # the newest unit stays verbatim
    assert newest not in summary.data["shadowedSeqs"]
    assert len(model.requests) == 5  # three turns, the failed attempt, the retry
    assert "the fourth prompt" in str(model.requests[-1].messages)
    assert_log_valid(session)


async def test_c32_an_overflow_keeps_the_newest_call_and_its_result(tmp_path: Path) -> None:
    script = [*tool_script(2)[:2], OVERFLOW, {"text": "done"}]
    session, _, loop = compacting_loop(tmp_path, script, window=None)
    assert (await loop.run_turn("go")).kind == "completed"
    (summary,) = of_type(session.events, COMPACTION_SUMMARY)
    events = session.events
    shadowed = [events[seq] for seq in summary.data["shadowedSeqs"]]
    assert [e.type for e in shadowed] == [USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT]
    nodes = list(session.surface.nodes)
    kept = [events[seq] for seq in nodes]
    assert is_checkpoint(kept[0].data)
    assert [e.type for e in kept[1:]] == [ASSISTANT_MESSAGE, TOOL_RESULT, ASSISTANT_MESSAGE]
    call = kept[1].data["message"]["content"][0]
    assert call["id"] == "c1_0" and kept[2].data["message"]["content"][0]["toolCallId"] == "c1_0"
    assert balanced_cuts(nodes, events) == [True, True, False, True, True]
    assert "c0_0" not in str(session.derive_messages())
    check_pairing(session.derive_messages())
    assert_log_valid(session)


async def test_c36_a_followup_during_the_summary_runs_after_the_bracket(
    tmp_path: Path,
) -> None:
    summarizer = GatedSummarizer()
    extra = [{"text": "after"}]
    session, loop, backend, _ = await _stored_loop(tmp_path, 2, summarizer, extra)
    requests = len(_requests(loop))
    async with loop, anyio.create_task_group() as group:
        group.start_soon(loop.compact)
        await summarizer.started.wait()
        loop.followup("the next prompt")
        await anyio.sleep(0.01)
        start = of_type(session.events, COMPACTION_START)[0]
        assert not _after(session.events, start.seq, TURN_START)  # the agent stays idle
        assert len(_requests(loop)) == requests
        summarizer.release.set()
    await loop.wait_idle()
    events = session.events
    summary, end, turn = (of_type(events, kind)[-1] for kind in BRACKET[1:] + (TURN_START,))
    assert start.seq < summary.seq < end.seq < turn.seq
    assert "error" not in end.data
    flushed = [i for i, types in enumerate(backend.batches) if COMPACTION_END in types]
    opened = [i for i, types in enumerate(backend.batches) if TURN_START in types]
    assert flushed and flushed[0] < opened[-1]  # the bracket is durable before the turn
    last = _requests(loop)[-1].messages
    assert is_checkpoint(last[0]) and "the next prompt" in str(last[-1])
    loop.close()


async def test_c37_context_injected_during_the_summary_enters_once_after_it(
    tmp_path: Path,
) -> None:
    summarizer = GatedSummarizer()
    session, loop, _, _ = await _stored_loop(tmp_path, 2, summarizer, [{"text": "after"}])
    async with anyio.create_task_group() as group:
        group.start_soon(loop.compact)
        await summarizer.started.wait()
        loop.inject("INJECTED CONTEXT")
        summarizer.release.set()
    start = of_type(session.events, COMPACTION_START)[0]
    assert [e.type for e in _after(session.events, start.seq, *BRACKET)] == list(BRACKET)
    assert [m["content"][0]["text"] for m in loop.inbox.next_step] == ["INJECTED CONTEXT"]
    assert all(
        "INJECTED" not in str(e.data) for e in _after(session.events, start.seq, USER_MESSAGE)
    )
    assert of_type(session.events, INBOX_SPLICED)
    await loop.run_turn("next")
    sent = _requests(loop)[-1].messages
    assert is_checkpoint(sent[0])
    assert sum("INJECTED CONTEXT" in str(message) for message in sent) == 1
    assert not loop.inbox.pending
    loop.close()


async def test_c41_a_failed_lock_flush_closes_the_bracket_before_the_summary(
    tmp_path: Path,
) -> None:
    summarizer = TestSummarizer()
    session, loop, backend, store = await _stored_loop(tmp_path, 2, summarizer)
    messages = session.derive_messages()
    backend.fail_on = COMPACTION_START
    with pytest.raises(StoreError, match="disk full"):
        await loop.compact()
    assert summarizer.requests == []  # no model is asked before the lock is durable
    start, end = of_type(session.events, *BRACKET)
    assert (start.type, end.type) == (COMPACTION_START, COMPACTION_END)
    assert end.data["error"] == "disk full"
    assert session.derive_messages() == messages
    assert store.load("s").events == session.events  # the closing flush stored both
    assert await loop.compact() is not None  # the lock is free
    loop.close()


async def test_c42_a_failed_final_flush_keeps_the_clean_bracket_for_the_next(
    tmp_path: Path,
) -> None:
    session, loop, backend, store = await _stored_loop(tmp_path, 2)
    backend.fail_on = COMPACTION_END
    with pytest.raises(StoreError, match="disk full"):
        await loop.compact()
    start, summary, end = of_type(session.events, *BRACKET)
    assert end.data == start.data and "error" not in end.data
    assert is_checkpoint(session.derive_messages()[0])
    assert len(backend.read("s").events) < len(session.events)  # not stored yet ...
    loop.flush()
    assert store.load("s").events == session.events  # ... the next flush stores it
    assert loop.compaction is not None and loop.compaction.fold.bracket is None
    loop.close()


async def test_c42_a_pre_aborted_signal_writes_nothing(tmp_path: Path) -> None:
    session, loop, _, _ = await _stored_loop(tmp_path, 2)
    signal = CancelSignal()
    signal.cancel({"kind": "user", "why": "before"})
    before = len(session.events)
    assert loop.compaction is not None
    with pytest.raises(TurnCancelled) as raised:
        await loop.compaction.compact_now(signal=signal)
    assert raised.value.reason == {"kind": "user", "why": "before"}
    assert len(session.events) == before
    loop.close()


async def test_c42_a_cancel_during_the_summary_closes_it_cancelled(tmp_path: Path) -> None:
    summarizer = GatedSummarizer()
    session, loop, _, store = await _stored_loop(tmp_path, 2, summarizer)
    messages = session.derive_messages()
    caught: list[TurnCancelled] = []

    async def compact() -> None:
        try:
            await loop.compact()
        except TurnCancelled as exc:
            caught.append(exc)

    async with anyio.create_task_group() as group:
        group.start_soon(compact)
        await summarizer.started.wait()
        loop.cancel({"kind": "user", "why": "stop"})
    assert [exc.reason for exc in caught] == [{"kind": "user", "why": "stop"}]
    start, end = of_type(session.events, *BRACKET)
    assert end.data == {**start.data, "error": "cancelled"}
    assert session.derive_messages() == messages
    assert store.load("s").events == session.events
    loop.close()


async def test_c42_a_cancelled_caller_closes_the_bracket_then_propagates(
    tmp_path: Path,
) -> None:
    summarizer = GatedSummarizer()
    session, loop, _, store = await _stored_loop(tmp_path, 2, summarizer)
    finished = False
    with anyio.CancelScope() as scope:

        async def cancel_when_started() -> None:
            await summarizer.started.wait()
            scope.cancel()

        async with anyio.create_task_group() as group:
            group.start_soon(cancel_when_started)
            await loop.compact()
            finished = True
    assert scope.cancelled_caught and not finished
    start, end = of_type(session.events, *BRACKET)
    assert end.data == {**start.data, "error": "cancelled"}
    assert store.load("s").events == session.events
    assert await loop.compact() is not None  # the lock and the loop are free again
    loop.close()


async def test_c43_manual_and_region_compactions_exclude_each_other(tmp_path: Path) -> None:
    summarizer = GatedSummarizer()
    session, loop, _, _ = await _stored_loop(tmp_path, 3, summarizer)
    compactor = loop.compaction
    assert compactor is not None
    nodes = list(session.surface.nodes)
    async with anyio.create_task_group() as group:
        group.start_soon(loop.compact)
        await summarizer.started.wait()
        with pytest.raises(CompactionError, match="already in progress") as region:
            await compactor.compact_region(nodes[0], nodes[1], turn=None)
        with pytest.raises(CompactionError, match="requires an idle agent") as manual:
            await loop.compact()
        summarizer.release.set()
    assert region.value.code == manual.value.code == "busy"
    assert len(of_type(session.events, COMPACTION_START)) == 1
    summarizer.arm()
    nodes = list(session.surface.nodes)
    async with anyio.create_task_group() as group:
        group.start_soon(partial(compactor.compact_region, nodes[0], nodes[1], turn=None))
        await summarizer.started.wait()
        with pytest.raises(CompactionError, match="lock is already active") as held:
            await loop.compact()
        summarizer.release.set()
    assert held.value.code == "busy"
    assert len(of_type(session.events, COMPACTION_START)) == 2
    assert all("error" not in end.data for end in of_type(session.events, COMPACTION_END))
    assert_log_valid(session)
    loop.close()
