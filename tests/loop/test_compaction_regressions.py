"""Regressions the compaction property test found (docs/compaction.md), each its smallest input.

- The compactor measured and selected on a stale fold: after pruning, and after a summary
  attempt, it read the estimate and the surface without feeding the fold the events just
  appended. Pruning never counted (a summary was asked for anyway, C13), a pressure
  compaction that had already brought the estimate under the threshold summarized a second
  time (C9), `CompactionResult.tokens_after` was the estimate before, and the second attempt
  chose its span on the old surface, so on the new one it could end between an assistant
  message's tool calls and their results (C29): the pre-send check then refused the step.
- A manual compaction right after another summarized the lone checkpoint again, and failed
  with "summary is not smaller" after writing a bracket each time (C39: nothing to compact).
- While the retained tail alone stayed above the threshold, every step's pressure attempt
  summarized the lone checkpoint again: a summary request, a failed bracket ("summary is not
  smaller") and a warning per step (C9).
- `assert_log_valid` counted a pruned `tool/result` (a replacement, which an overflow writes
  inside the open step) as an answer of that step (C31).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from duraloop.log import PrunerConfig, check_pairing
from duraloop.log.vocabulary import (
    COMPACTION_END,
    COMPACTION_PRUNE,
    COMPACTION_START,
    CONTEXT_WINDOW_EXCEEDED,
    STEP_END,
    STEP_START,
)
from duraloop.testing import assert_log_valid

from ._compaction_support import (
    TestSummarizer,
    assert_pairs_for_both_providers,
    compacting_loop,
    of_type,
    tool_script,
)

pytestmark = pytest.mark.anyio


def _calls(*counts: int, size: int) -> list[dict[str, Any]]:
    """Steps calling `big` `count` times each, then a text answer."""
    script: list[dict[str, Any]] = [
        {
            "text": "",
            "tool_calls": [
                {"id": f"c{step}_{k}", "name": "big", "arguments": {}} for k in range(count)
            ],
        }
        for step, count in enumerate(counts)
    ]
    return [*script, {"text": "done"}]


async def test_c29_a_second_pressure_attempt_is_balanced_on_the_surface_the_first_left(
    tmp_path: Path,
) -> None:
    # Before step 3 the stale estimate said the first summary had not relieved the
    # pressure; the second attempt chose 3 nodes on the surface before the first
    # checkpoint, which on the new one ended after step 2's call, before its two results.
    session, _, loop = compacting_loop(
        tmp_path, _calls(1, 2, size=2000), window=2000, size=2000, pruner=None
    )
    result = await loop.run_turn("go")
    assert result.kind == "completed"
    assert len(of_type(session.events, COMPACTION_START)) == 1  # the first one sufficed
    assert_log_valid(session)
    await assert_pairs_for_both_providers(session.derive_messages())


async def test_c9_a_summary_that_relieves_the_pressure_is_not_repeated(tmp_path: Path) -> None:
    summarizer = TestSummarizer()
    session, _, loop = compacting_loop(
        tmp_path, tool_script(8), window=8000, summarizer=summarizer, pruner=None
    )
    await loop.run_turn("go")
    starts = of_type(session.events, COMPACTION_START)
    assert starts and len(summarizer.requests) == len(starts)
    for start in starts:  # one bracket between a step's end and the next step's start
        between = session.events[start.seq :]
        after = next(e for e in between if e.type in (STEP_START, COMPACTION_START) and e != start)
        assert after.type == STEP_START
    check_pairing(session.derive_messages())


async def test_c9_a_lone_checkpoint_is_not_summarized_again_under_pressure(
    tmp_path: Path,
) -> None:
    summarizer = TestSummarizer()
    session, _, loop = compacting_loop(
        tmp_path, tool_script(5), window=8000, summarizer=summarizer, pruner=None, size=26_000
    )
    await loop.run_turn("read the pages one by one " * 20)  # worth more than a checkpoint
    ends = of_type(session.events, COMPACTION_END)
    assert ends and all("error" not in end.data for end in ends)
    assert len(summarizer.requests) == len(ends)
    assert_log_valid(session)


async def test_c13_pruning_under_the_threshold_asks_no_summary(tmp_path: Path) -> None:
    summarizer = TestSummarizer()
    session, _, loop = compacting_loop(
        tmp_path, tool_script(2), window=5500, summarizer=summarizer, retain_tokens=100
    )
    result = await loop.run_turn("go")
    assert result.kind == "completed"
    assert len(of_type(session.events, COMPACTION_PRUNE)) == 1
    assert not of_type(session.events, COMPACTION_START) and not summarizer.requests
    assert_log_valid(session)


async def test_c39_manual_compaction_reports_the_estimate_after_it(tmp_path: Path) -> None:
    script = [{"text": "a" * 2000}, {"text": "b" * 2000}]
    session, _, loop = compacting_loop(tmp_path, script, window=None)
    await loop.run_turn("x" * 2000)
    await loop.run_turn("y" * 2000)
    result = await loop.compact()
    assert result is not None and loop.compaction is not None
    assert result.tokens_after == loop.compaction.estimate() < result.tokens_before


async def test_c39_a_manual_compaction_of_only_the_last_checkpoint_writes_nothing(
    tmp_path: Path,
) -> None:
    script = [{"text": "a" * 2000}, {"text": "b" * 2000}]
    session, _, loop = compacting_loop(tmp_path, script, window=None)
    await loop.run_turn("x" * 2000)
    await loop.run_turn("y" * 2000)
    assert await loop.compact() is not None
    written = len(session.events)
    assert await loop.compact() is None
    assert len(session.events) == written


async def test_c31_a_prune_inside_an_overflow_step_answers_no_call(tmp_path: Path) -> None:
    script: list[dict[str, Any]] = [
        {"text": "", "tool_calls": [{"id": "c1", "name": "big", "arguments": {}}]},
        {"text": "first done"},
        {"error": {"code": CONTEXT_WINDOW_EXCEEDED, "message": "prompt is too long"}},
        {"text": "recovered"},
    ]
    session, _, loop = compacting_loop(
        tmp_path, script, window=None, size=1500, pruner=PrunerConfig(800, 200, 100)
    )
    await loop.run_turn("go")
    result = await loop.run_turn("again")
    assert result.kind == "completed" and result.text == "recovered"
    events = session.events
    (prune,) = of_type(events, COMPACTION_PRUNE)
    step = [e.seq for e in events if e.type in (STEP_START, STEP_END)][-2:]
    assert step[0] < prune.seq < step[1]  # the replacement lies inside turn 2's open step
    assert of_type(events, COMPACTION_END)  # and the summary too
    assert_log_valid(session)
