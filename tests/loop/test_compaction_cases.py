"""Compaction through the loop: the spec's cases (compaction-spec 12) on real turns.

See docs/compaction.md. A scripted model with a small context window, a tool returning
large outputs, and dsh's test summarizer (`small checkpoint`, summary-provider/model).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from duraloop.errors import CompactionError
from duraloop.llm import ScriptedModel
from duraloop.log import Session, balanced_cuts, check_pairing, is_checkpoint, select_range
from duraloop.log.vocabulary import (
    COMPACTION_END,
    COMPACTION_PRUNE,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    STEP_END,
    STEP_START,
    TURN_END,
    USER_MESSAGE,
)
from duraloop.loop import AgentLoop, CompactionConfig, LoopConfig
from duraloop.testing import assert_log_valid
from duraloop.tools import tool

from ._compaction_support import (
    TestSummarizer,
    assert_pairs_for_both_providers,
    compacting_loop,
    of_type,
    tool_script,
)

pytestmark = pytest.mark.anyio

BRACKET = (COMPACTION_START, COMPACTION_SUMMARY, COMPACTION_END)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _types(session: Session) -> list[str]:
    return [event.type for event in session.events]


async def test_c29_pressure_compacts_between_steps_and_keeps_pairs(tmp_path: Path) -> None:
    session, model, loop = compacting_loop(tmp_path, tool_script(8), window=8000)
    result = await loop.run_turn("go")
    assert result.kind == "completed"
    events = session.events
    starts = of_type(events, COMPACTION_START)
    assert starts, "the session never compacted"
    for start in starts:
        assert start.data["turn"] == 1
        before = next(
            e
            for e in reversed(events[: start.seq])
            if e.type != COMPACTION_PRUNE and e.surface_op in (None, "append")
        )
        assert before.type == STEP_END  # after the previous step's end (and any prunes) ...
        after = next(e for e in events[start.seq :] if e.type in (STEP_START, TURN_END))
        assert after.type == STEP_START  # ... and before the next step's start
    assert_log_valid(session)
    messages = session.derive_messages()
    check_pairing(messages)
    await assert_pairs_for_both_providers(messages)
    assert is_checkpoint(messages[0])
    # every request after the first compaction was smaller than the window would allow
    assert max(len(str(r.messages)) for r in model.requests[-3:]) < 8000 * 4


async def test_c28_below_the_threshold_nothing_is_written(tmp_path: Path) -> None:
    session, _, loop = compacting_loop(
        tmp_path,
        tool_script(
            2,
        ),
        window=1_000_000,
    )
    await loop.run_turn("go")
    assert not of_type(session.events, *BRACKET)


async def test_c5_without_a_window_pressure_is_off_and_warned_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    session, model, loop = compacting_loop(tmp_path, tool_script(3), window=None)
    model.provider = "openai"  # a real route: an unknown window is worth a warning
    with caplog.at_level(logging.WARNING):
        await loop.run_turn("go")
    assert not of_type(session.events, *BRACKET)
    warnings = [r for r in caplog.records if "no context window known" in r.getMessage()]
    assert len(warnings) == 1


async def test_c35_overflow_compacts_and_retries_in_the_same_step(tmp_path: Path) -> None:
    script: list[dict[str, Any]] = [
        {"text": "first answer OLD HISTORY SENTINEL " + "y" * 2000},
        {"error": {"code": "CONTEXT_WINDOW_EXCEEDED", "message": "prompt is too long"}},
        {"text": "COMPACTION RECOVERED"},
    ]
    summarizer = TestSummarizer("RECOVERY CHECKPOINT")
    session, model, loop = compacting_loop(tmp_path, script, window=None, summarizer=summarizer)
    await loop.run_turn("the old prompt " + "z" * 2000)
    result = await loop.run_turn("second")
    assert result.kind == "completed"
    assert result.text == "COMPACTION RECOVERED"
    events = session.events
    turn2 = events[next(e.seq for e in events if e.type == "turn/start" and e.data["turn"] == 2) :]
    kinds = [e.type for e in turn2 if e.type in (*BRACKET, STEP_START, STEP_END)]
    assert kinds == [STEP_START, *BRACKET, STEP_END]  # one step, the bracket inside it
    assert of_type(turn2, COMPACTION_START)[0].data["turn"] == 2
    retry = model.requests[-1]
    text = str(retry.messages)
    assert "RECOVERY CHECKPOINT" in text and "OLD HISTORY SENTINEL" not in text
    assert "second" in text  # the open step's prompt stays verbatim
    assert len(summarizer.requests) == 1
    assert_log_valid(session)


async def test_c33_overflow_with_nothing_to_compact_keeps_the_original_error(
    tmp_path: Path,
) -> None:
    script = [{"error": {"code": "CONTEXT_WINDOW_EXCEEDED", "message": "prompt is too long"}}]
    session, _, loop = compacting_loop(tmp_path, script, window=None)
    with pytest.raises(Exception, match="prompt is too long"):
        await loop.run_turn("only the prompt")
    assert not of_type(session.events, *BRACKET)
    assert session.events[-1].data["reason"]["kind"] == "error"


async def test_c34_max_overflow_retries_zero_disables_overflow_recovery(tmp_path: Path) -> None:
    script: list[dict[str, Any]] = [
        {"text": "a" * 3000},
        {"error": {"code": "CONTEXT_WINDOW_EXCEEDED", "message": "prompt is too long"}},
    ]
    session, _, loop = compacting_loop(tmp_path, script, window=None, max_overflow_retries=0)
    await loop.run_turn("x" * 3000)
    with pytest.raises(Exception, match="prompt is too long"):
        await loop.run_turn("again")
    assert not of_type(session.events, *BRACKET)


async def test_c39_manual_compaction_between_turns_is_standalone(tmp_path: Path) -> None:
    script = [{"text": "one " * 400}, {"text": "two " * 400}]
    session, _, loop = compacting_loop(tmp_path, script, window=None)
    await loop.run_turn("first " * 300)
    await loop.run_turn("second " * 300)
    turns = [e for e in session.events if e.type == "turn/start"]
    result = await loop.compact(source_command_id="cmd-1")
    assert result is not None and result.shadowed == 3  # all but the newest message
    start, summary, end = of_type(session.events, *BRACKET)
    assert start.data == {
        "compactionId": start.data["compactionId"],
        "sourceCommandId": "cmd-1",
        "turn": None,
    }
    assert end.data == start.data
    assert summary.data["sourceCommandId"] == "cmd-1"
    checkpoint = session.events[summary.seq + 1]
    assert checkpoint.type == USER_MESSAGE and is_checkpoint(checkpoint.data)
    assert checkpoint.data["source"]["sourceCommandId"] == "cmd-1"
    assert checkpoint.source_event_seqs == [start.seq, summary.seq, *summary.data["shadowedSeqs"]]
    assert [e for e in session.events if e.type == "turn/start"] == turns  # no new turn
    assert len(session.derive_messages()) == 2
    assert_log_valid(session)


async def test_c39_empty_session_compacts_nothing_and_writes_nothing(tmp_path: Path) -> None:
    session, _, loop = compacting_loop(tmp_path, [], window=None)
    before = len(session.events)
    assert await loop.compact() is None
    assert len(session.events) == before


async def test_c11_one_indivisible_unit_is_never_compacted(tmp_path: Path) -> None:
    script = [{"text": "", "tool_calls": [{"id": "c1", "name": "big", "arguments": {}}]}]
    session, _, loop = compacting_loop(tmp_path, [*script, {"text": "done"}], window=None)
    await loop.run_turn("go")
    fold = loop.compaction.fold if loop.compaction is not None else None
    assert fold is not None
    cuts = balanced_cuts(fold.nodes, session.events)
    # prompt | call+result (indivisible) | answer: the cut inside the pair is unbalanced
    assert cuts == [True, True, False, True, True]
    pair = [fold.prices[1], fold.prices[2]]
    assert select_range(pair, [True, False, True], retain_tokens=1, keep_from=2) is None
    generation = session.surface.replace_generation
    result = await loop.compact()  # keeps the answer, compacts prompt + pair
    assert result is not None and result.shadowed == 3
    assert session.surface.replace_generation == generation + 1


async def test_c20_summarizer_failure_closes_the_bracket_with_the_error(tmp_path: Path) -> None:
    summarizer = TestSummarizer(fail=RuntimeError("summary unavailable"))
    session, _, loop = compacting_loop(
        tmp_path, [{"text": "a" * 2000}], window=None, summarizer=summarizer
    )
    await loop.run_turn("b" * 2000)
    messages = session.derive_messages()
    with pytest.raises(RuntimeError, match="summary unavailable"):
        await loop.compact()
    start, end = of_type(session.events, *BRACKET)
    assert start.type == COMPACTION_START and end.type == COMPACTION_END
    assert end.data["error"] == "summary unavailable"
    assert session.derive_messages() == messages
    assert_log_valid(session)


async def test_c22_a_summary_not_smaller_is_refused(tmp_path: Path) -> None:
    summarizer = TestSummarizer("long " * 5000)
    session, _, loop = compacting_loop(
        tmp_path, [{"text": "a"}], window=None, summarizer=summarizer
    )
    await loop.run_turn("b")
    with pytest.raises(CompactionError, match="summary is not smaller") as raised:
        await loop.compact()
    assert raised.value.code == "summary"
    assert not of_type(session.events, COMPACTION_SUMMARY)
    assert "error" in of_type(session.events, COMPACTION_END)[0].data


async def test_c38_a_live_lock_makes_compaction_busy(tmp_path: Path) -> None:
    session, _, loop = compacting_loop(tmp_path, [{"text": "a" * 2000}], window=None)
    await loop.run_turn("b" * 2000)
    session.append(COMPACTION_START, {"compactionId": "other", "turn": None})
    with pytest.raises(CompactionError, match="already active") as raised:
        await loop.compact()
    assert raised.value.code == "busy"


async def test_usage_and_budgets_count_the_summary_request(tmp_path: Path) -> None:
    summaries = ScriptedModel([{"text": "## Current Work\n- the summary"}])
    session, _, loop = compacting_loop(
        tmp_path, [{"text": "a" * 2000}], window=None, summarizer=None
    )
    loop = AgentLoop(
        session,
        model=loop.model,
        cwd=tmp_path,
        config=LoopConfig(compaction=CompactionConfig(summarizer_model=summaries)),
    )
    await loop.run_turn("b" * 2000)
    before = loop.usage.requests
    assert await loop.compact() is not None
    (summary,) = of_type(session.events, COMPACTION_SUMMARY)
    assert summary.data["llmStreamCall"] is True and summary.data["model"] == summaries.model
    assert loop.usage.requests == before + 1


async def test_keep_turns_keeps_the_last_turns_verbatim(tmp_path: Path) -> None:
    script = [{"text": f"answer {n} " + "w" * 1500} for n in range(3)]
    session, _, loop = compacting_loop(tmp_path, script, window=None, keep_turns=2)
    for n in range(3):
        await loop.run_turn(f"prompt {n} " + "v" * 1500)
    kept = [m["id"] for m in session.derive_messages()[2:]]
    assert await loop.compact() is not None
    messages = session.derive_messages()
    assert is_checkpoint(messages[0]) and [m["id"] for m in messages[1:]] == kept


async def test_c38_a_turn_paused_on_an_approval_is_never_compacted(tmp_path: Path) -> None:
    @tool(requires_approval=True)
    def danger(n: int) -> str:
        """Do something a person must allow.

        Args:
            n: a number.
        """
        return "done"

    script = [{"text": "", "tool_calls": [{"id": "d1", "name": "danger", "arguments": {"n": 1}}]}]
    session = Session("paused")
    loop = AgentLoop(
        session,
        model=ScriptedModel([{"text": "x" * 2000}, *script]),
        tools=[danger],
        cwd=tmp_path,
        config=LoopConfig(compaction=CompactionConfig(summarizer=TestSummarizer())),
    )
    await loop.run_turn("y" * 2000)
    assert (await loop.run_turn("go")).kind == "paused"
    before = len(session.events)
    with pytest.raises(CompactionError, match="open turn") as raised:
        await loop.compact()
    assert raised.value.code == "busy" and len(session.events) == before
