"""Explicit regions, their refusals, the surface check and the summarizer's target (C16-C40).

Pins compaction-spec 12's cases C16, C18, C19, C21, C26 and C40 on real turns of an
`AgentLoop` over a `ScriptedModel`: `Compactor.compact_region` checks its span and writes
the bracket (docs/compaction.md#what-is-shadowed, #the-transaction); a refused span or a busy
lock writes nothing (#the-lock); a surface that changes while the summary runs closes the
bracket with the error and leaves the surface as it was (#failures); the summary is written
by the configured summarizer, else `summarizer_model`, else the loop's model (#the-summary).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from duraloop.errors import CompactionError, InvariantError
from duraloop.llm import COMPACTION_PURPOSE, ScriptedModel
from duraloop.log import Session, is_checkpoint, user_message
from duraloop.log.vocabulary import (
    BLOCK_REASONING,
    BLOCK_TEXT,
    COMPACTION_END,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    INBOX_SPLICED,
    SUMMARY_CLOSE_TAG,
    SUMMARY_OPEN_TAG,
    SURFACE_APPEND,
    SURFACE_REPLACE,
    USER_MESSAGE,
)
from duraloop.loop import (
    AgentLoop,
    CompactionConfig,
    Compactor,
    LoopConfig,
    Summary,
    SummaryRequest,
)
from duraloop.store import MemoryStore
from duraloop.testing import assert_log_valid

from ._compaction_support import TestSummarizer, compacting_loop, of_type, tool_script

pytestmark = pytest.mark.anyio

BRACKET = (COMPACTION_START, COMPACTION_SUMMARY, COMPACTION_END)
RAW = [{"type": BLOCK_REASONING, "text": "thinking"}, {"type": BLOCK_TEXT, "text": "small"}]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class GatedSummarizer(TestSummarizer):
    """The test summarizer, which runs `during` on its first call, then waits for `release`."""

    __test__ = False

    def __init__(self, during: Callable[[], object] | None = None) -> None:
        super().__init__()
        self.during = during
        self.started = anyio.Event()
        self.release = anyio.Event()

    async def __call__(self, request: SummaryRequest) -> Summary:
        if not self.started.is_set():
            self.started.set()
            if self.during is not None:
                self.during()
            await self.release.wait()
        return await super().__call__(request)


async def _conversation(
    tmp_path: Path, turns: int, summarizer: Any = None
) -> tuple[Session, AgentLoop, Compactor]:
    """`turns` closed turns of a prompt and an answer (dsh's `conversation(n)`, closed)."""
    script = [{"text": f"answer {n} " + "a" * 400} for n in range(turns)]
    session, _, loop = compacting_loop(tmp_path, script, window=None, summarizer=summarizer)
    for n in range(turns):
        await loop.run_turn(f"prompt {n} " + "p" * 400)
    assert loop.compaction is not None
    return session, loop, loop.compaction


async def test_c16_a_region_becomes_one_framed_checkpoint_that_replays(tmp_path: Path) -> None:
    class Recorded(TestSummarizer):
        async def __call__(self, request: SummaryRequest) -> Summary:
            await super().__call__(request)
            return Summary(
                summary=[{"type": BLOCK_TEXT, "text": "small checkpoint"}],
                provider="summary-provider",
                model="summary-model",
                raw_output=RAW,
                usage={"input": 40, "output": 5},
                max_tokens=123,
            )

    store = MemoryStore()
    session = Session("s")
    _, _, loop = compacting_loop(
        tmp_path,
        [{"text": f"answer {n} " + "a" * 400} for n in range(3)],
        window=None,
        summarizer=Recorded(),
        session=session,
    )
    loop = AgentLoop(
        session, model=loop.model, cwd=tmp_path, config=loop.config,
        durability=store.open_writer(session),
    )  # fmt: skip
    for n in range(3):
        await loop.run_turn(f"prompt {n} " + "p" * 400)
    nodes = list(session.surface.nodes)
    assert loop.compaction is not None
    result = await loop.compaction.compact_region(nodes[0], nodes[3], turn=None)
    assert result.shadowed == 4
    (summary,) = of_type(session.events, COMPACTION_SUMMARY)
    data = summary.data
    assert data["shadowedSeqs"] == nodes[:4]
    assert data["shadowedRange"] == {"start": nodes[0], "end": nodes[3]}
    assert (data["provider"], data["model"], data["maxTokens"]) == (
        "summary-provider",
        "summary-model",
        123,
    )
    assert data["rawOutput"] == RAW and data["usage"] == {"input": 40, "output": 5}
    assert "llmStreamCall" not in data
    messages = session.derive_messages()
    head = messages[0]
    assert is_checkpoint(head) and len(messages) == 3
    assert SUMMARY_OPEN_TAG in head["content"][0]["text"]
    assert head["content"][-1] == {"type": BLOCK_TEXT, "text": SUMMARY_CLOSE_TAG}
    assert head["content"][1:-1] == data["summary"]
    assert_log_valid(session)
    assert Session("replayed", seed=session.events).derive_messages() == messages
    loop.close()
    loaded = store.load("s")
    assert Session("s", seed=loaded.events, header=loaded.header).derive_messages() == messages


async def test_c18_bad_region_bounds_are_refused_by_name(tmp_path: Path) -> None:
    session, _, loop = compacting_loop(tmp_path, tool_script(1), window=None)
    await loop.run_turn("go")
    assert loop.compaction is not None
    region = loop.compaction.compact_region
    prompt, call, result, answer = session.surface.nodes
    before = len(session.events)
    cases: list[tuple[int, int, str]] = [
        (9001, answer, "start seq 9001 not found"),
        (prompt, 9002, "end seq 9002 not found"),
        (answer, prompt, f"start seq {answer} .* is after end seq {prompt}"),
        (result, answer, f"start seq {result} is not a balanced boundary"),
        (prompt, call, f"end seq {call} is not a balanced boundary"),
        (answer, answer, f"start seq {answer} is not the surface head"),
    ]
    for start, end, message in cases:
        with pytest.raises(CompactionError, match=message) as raised:
            await region(start, end, turn=None)
        assert raised.value.code == "range"
    assert len(session.events) == before  # nothing written, not even a start


async def test_c19_without_an_open_turn_or_with_a_held_lock_nothing_starts(
    tmp_path: Path,
) -> None:
    session, _, compactor = await _conversation(tmp_path, 2)
    nodes = list(session.surface.nodes)
    before = len(session.events)
    with pytest.raises(InvariantError, match="for turn 3 appended outside any open turn"):
        await compactor.compact_region(nodes[0], nodes[1], turn=3)  # the session is closed
    assert len(session.events) == before
    session.append(COMPACTION_START, {"compactionId": "rival", "turn": None})
    with pytest.raises(CompactionError, match="already in progress") as raised:
        await compactor.compact_region(nodes[0], nodes[1], turn=None)
    assert raised.value.code == "busy"
    assert len(session.events) == before + 1
    assert not of_type(session.events, COMPACTION_SUMMARY)


async def _pressure_with(tmp_path: Path, during: Callable[[Session, AgentLoop], object]) -> Session:
    """Run a turn that compacts under pressure, calling `during` inside the first summary."""
    box: list[AgentLoop] = []
    summarizer = GatedSummarizer(lambda: during(box[0].session, box[0]))
    summarizer.release.set()
    session, _, loop = compacting_loop(tmp_path, tool_script(6), window=8000, summarizer=summarizer)
    box.append(loop)
    assert (await loop.run_turn("go")).kind == "completed"
    assert summarizer.started.is_set()
    assert_log_valid(session)
    return session


async def test_c21_a_log_only_event_during_the_summary_is_fine(tmp_path: Path) -> None:
    session = await _pressure_with(tmp_path, lambda _, loop: loop.inject("context " + "c" * 9))
    start, summary, end = of_type(session.events, *BRACKET)[:3]
    assert (start.type, summary.type, end.type) == BRACKET
    assert "error" not in end.data
    (splice,) = of_type(session.events, INBOX_SPLICED)[:1]
    assert start.seq < splice.seq < summary.seq  # appended while the summary ran
    assert any("context ccccccccc" in str(m) for m in session.derive_messages())


async def test_c21_a_surface_change_during_the_summary_is_refused(tmp_path: Path) -> None:
    def rival(session: Session, _: AgentLoop) -> None:
        session.append(USER_MESSAGE, user_message("rival"), surface_op=SURFACE_APPEND)

    session = await _pressure_with(tmp_path, rival)
    start, end = of_type(session.events, *BRACKET)[:2]
    assert (start.type, end.type) == (COMPACTION_START, COMPACTION_END)
    assert "session surface changed" in end.data["error"]
    rival_seq = next(e.seq for e in session.events if e.data.get("content") == [
        {"type": BLOCK_TEXT, "text": "rival"}
    ])  # fmt: skip
    assert start.seq < rival_seq < end.seq
    assert not [e for e in of_type(session.events, COMPACTION_SUMMARY) if e.seq < end.seq]


async def test_c26_the_configured_summarizer_beats_the_summarizer_model(tmp_path: Path) -> None:
    summaries = ScriptedModel([{"text": "never asked"}])
    summarizer = TestSummarizer()
    session, _, loop = compacting_loop(tmp_path, [{"text": "a" * 2000}], window=None)
    config = LoopConfig(
        compaction=CompactionConfig(summarizer=summarizer, summarizer_model=summaries)
    )
    loop = AgentLoop(session, model=loop.model, cwd=tmp_path, config=config)
    await loop.run_turn("b" * 2000)
    assert await loop.compact() is not None
    (summary,) = of_type(session.events, COMPACTION_SUMMARY)
    assert (summary.data["provider"], summary.data["model"]) == (
        "summary-provider",
        "summary-model",
    )
    assert len(summarizer.requests) == 1 and summaries.requests == []


async def test_c26_the_summarizer_model_beats_the_loops_model(tmp_path: Path) -> None:
    summaries = ScriptedModel([{"text": "## Current Work\n- summarized"}], name="summary-route")
    steps = ScriptedModel([{"text": "a" * 2000}], name="step-model")
    session = Session("s")
    config = LoopConfig(compaction=CompactionConfig(summarizer_model=summaries))
    loop = AgentLoop(session, model=steps, cwd=tmp_path, config=config)
    await loop.run_turn("b" * 2000)
    assert await loop.compact() is not None
    (summary,) = of_type(session.events, COMPACTION_SUMMARY)
    assert (summary.data["provider"], summary.data["model"]) == ("scripted", "summary-route")
    assert summary.data["llmStreamCall"] is True
    assert [r.purpose for r in summaries.requests] == [COMPACTION_PURPOSE]
    assert all(r.purpose != COMPACTION_PURPOSE for r in steps.requests)


async def test_c26_without_a_summarizer_the_loops_model_summarizes(tmp_path: Path) -> None:
    steps = ScriptedModel(
        [{"text": "a" * 2000}, {"text": "## Current Work\n- summarized"}], name="step-model"
    )
    session = Session("s")
    loop = AgentLoop(
        session, model=steps, cwd=tmp_path, config=LoopConfig(compaction=CompactionConfig())
    )
    await loop.run_turn("b" * 2000)
    assert await loop.compact() is not None
    (summary,) = of_type(session.events, COMPACTION_SUMMARY)
    assert (summary.data["provider"], summary.data["model"]) == ("scripted", "step-model")
    assert steps.requests[-1].purpose == COMPACTION_PURPOSE


async def _manual_with_rival(tmp_path: Path, index: int) -> tuple[Session, MemoryStore, str]:
    """A manual compaction during whose summary surface node `index` is replaced."""
    store = MemoryStore()
    box: list[Session] = []

    def replace() -> None:
        session = box[0]
        seq = session.surface.nodes[index]
        session.append(
            USER_MESSAGE,
            user_message("rival replacement"),
            surface_op={"op": SURFACE_REPLACE, "start": seq, "end": seq},
            source_event_seqs=[seq],
        )

    summarizer = GatedSummarizer(replace)
    summarizer.release.set()
    session = Session("s")
    box.append(session)
    script = [{"text": f"answer {n} " + "a" * 400} for n in range(3)]
    _, _, loop = compacting_loop(
        tmp_path, script, window=None, summarizer=summarizer, session=session
    )
    loop = AgentLoop(
        session, model=loop.model, cwd=tmp_path, config=loop.config,
        durability=store.open_writer(session),
    )  # fmt: skip
    for n in range(3):
        await loop.run_turn(f"prompt {n} " + "p" * 400)
    with pytest.raises(CompactionError, match="span changed") as raised:
        await loop.compact()
    loop.close()
    return session, store, raised.value.code


@pytest.mark.parametrize("index", [0, 2], ids=["head", "middle"])
async def test_c40_a_rival_replacement_during_the_summary_is_changed(
    tmp_path: Path, index: int
) -> None:
    session, store, code = await _manual_with_rival(tmp_path, index)
    assert code == "changed"
    start, end = of_type(session.events, *BRACKET)
    assert (start.type, end.type) == (COMPACTION_START, COMPACTION_END)
    assert "span changed" in end.data["error"] and end.data["turn"] is None
    assert not any(is_checkpoint(m) for m in session.derive_messages())
    assert "rival replacement" in str(session.derive_messages()[index])
    assert store.load("s").events == session.events  # the failed bracket is durable
    assert_log_valid(session)
