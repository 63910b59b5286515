"""Compaction configuration, pressure and pruning: compaction-spec 12 cases C1-C8, C10, C12-C15.

See docs/compaction.md (#when, #the-estimate, #what-is-shadowed, #the-pruner). The config
cases check `CompactionConfig` and the `[compaction]` table of `config.toml`; the pressure
and pruning cases run real turns of an `AgentLoop` over a `ScriptedModel` with a small
context window, the `big` tool, and dsh's test summarizer (`small checkpoint`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conformance._builders import SE, SS, TE, TS, A, U, append, txt
from duraloop.cli._compaction_file import compaction_of
from duraloop.cli._config_file import read_toml
from duraloop.errors import ConfigError
from duraloop.llm import ScriptedModel
from duraloop.log import PrunerConfig, Session, check_pairing, estimate_header, is_checkpoint
from duraloop.log.vocabulary import (
    BLOCK_TOOL_CALL,
    BLOCK_TOOL_RESULT,
    COMPACTION_END,
    COMPACTION_PRUNE,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    PRUNE_MARKER,
    REQUEST_HEADER,
    SURFACE_APPEND,
    TOOL_RESULT,
)
from duraloop.loop import AgentLoop, CompactionConfig, LoopConfig
from duraloop.testing import assert_log_valid

from ._compaction_support import (
    TestSummarizer,
    assert_pairs_for_both_providers,
    big_tool,
    compacting_loop,
    of_type,
    tool_script,
)

pytestmark = pytest.mark.anyio

BRACKET = (COMPACTION_START, COMPACTION_SUMMARY, COMPACTION_END)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _loop_of(session: Session, model: ScriptedModel, cwd: Path, **compaction: Any) -> AgentLoop:
    config = LoopConfig(compaction=CompactionConfig(summarizer=TestSummarizer(), **compaction))
    return AgentLoop(session, model=model, cwd=cwd, config=config)


# --- C1-C3: configuration -------------------------------------------------------------


def test_c1_defaults_are_dshs() -> None:
    config = CompactionConfig()
    assert config.auto is True
    assert config.threshold_ratio == 0.8
    assert config.retain_ratio is None and config.retain_tokens is None
    assert config.retain_tokens_for(1000) == 160  # the default retain ratio, 0.16
    assert config.max_tokens == 8192
    assert config.compaction_retries == 1 and config.max_overflow_retries == 1
    assert config.keep_turns == 0
    # dsh's empty summarization provider/model: the loop's own model writes the summary
    assert config.summarizer_model is None and config.summarizer is None
    assert config.pruner == PrunerConfig(8192, 4096, 1024)
    assert config.context_windows == {}


def test_c2_threshold_and_retained_tail_scale_with_the_window() -> None:
    default = CompactionConfig(retain_ratio=0.1)
    assert (default.threshold_tokens(2000), default.retain_tokens_for(2000)) == (1600, 200)
    small = CompactionConfig(threshold_ratio=0.5, retain_tokens=120)
    assert (small.threshold_tokens(1000), small.retain_tokens_for(1000)) == (500, 120)


def test_c2_each_model_gets_its_own_window(tmp_path: Path) -> None:
    windows = {"scripted:shared-id": 1000, "scripted:other-id": 2000}
    shared = ScriptedModel([], name="shared-id", context_window=64_000)
    other = ScriptedModel([], name="other-id")
    unlisted = ScriptedModel([], name="unlisted", context_window=4000)
    found = []
    for model in (shared, other, unlisted):
        loop = _loop_of(Session(model.model), model, tmp_path, context_windows=windows)
        assert loop.compaction is not None
        found.append(loop.compaction.window())
    # the table beats the adapter's own figure; an unlisted model keeps its own
    assert found == [1000, 2000, 4000]


async def test_c2_pressure_is_measured_against_the_configured_window(tmp_path: Path) -> None:
    # The adapter claims a huge window; the table's 8000 tokens is the one that counts.
    session, _, loop = compacting_loop(
        tmp_path,
        tool_script(6),
        window=1_000_000,
        context_windows={"scripted:scripted": 8000},
    )
    assert (await loop.run_turn("go")).kind == "completed"
    assert of_type(session.events, COMPACTION_START)
    assert_log_valid(session)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"max_tokens": 0}, "compaction.max_tokens"),
        ({"threshold_ratio": 0}, "compaction.threshold_ratio"),
        ({"threshold_ratio": 1.1}, "compaction.threshold_ratio"),
        ({"threshold_ratio": float("nan")}, "compaction.threshold_ratio"),
        ({"retain_ratio": 0.9}, "compaction.retain_ratio 0.9 must be less than"),
        ({"threshold_ratio": 0.1}, "compaction.retain_ratio 0.16 (the default"),
        ({"retain_ratio": 0.1, "retain_tokens": 100}, "compaction.retain_tokens are alternat"),
        ({"retain_ratio": 1.0}, "compaction.retain_ratio"),
        ({"retain_tokens": 0}, "compaction.retain_tokens"),
        ({"retain_tokens": True}, "compaction.retain_tokens"),
        ({"auto": "yes"}, "compaction.auto"),
        ({"keep_turns": -1}, "compaction.keep_turns"),
        ({"compaction_retries": -1}, "compaction.compaction_retries"),
        ({"max_overflow_retries": 1.5}, "compaction.max_overflow_retries"),
        ({"summarizer_model": "deepseek-chat"}, "compaction.summarizer_model"),
        ({"pruner": {"threshold_chars": 10}}, "compaction.pruner"),
        ({"context_windows": {"deepseek-chat": 1000}}, "compaction.context_windows keys"),
        ({"context_windows": {"p:m": 0}}, "compaction.context_windows['p:m']"),
    ],
)
def test_c3_an_invalid_config_is_refused_naming_the_field(
    options: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        CompactionConfig(**options)
    assert field in str(raised.value)


def test_c3_an_absolute_retention_too_large_for_the_window_is_refused() -> None:
    config = CompactionConfig(retain_tokens=900)
    assert config.retain_tokens_for(2000) == 900
    with pytest.raises(ConfigError, match="retain_tokens"):
        config.retain_tokens_for(1000)  # 900 >= the threshold of 800


def test_c3_an_unknown_key_in_the_config_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[compaction]\nthreshold_rato = 0.5\n", encoding="utf-8")
    file = read_toml(path)
    assert file is not None
    with pytest.raises(ConfigError, match=r"compaction\.threshold_rato` is not a known key"):
        compaction_of(file)
    with pytest.raises(TypeError, match="thresholdRato"):
        CompactionConfig(thresholdRato=0.5)  # type: ignore[call-arg]


def test_c3_a_file_value_refused_by_the_config_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[compaction]\nauto = true\nmax_tokens = 0\n", encoding="utf-8")
    file = read_toml(path)
    assert file is not None
    with pytest.raises(ConfigError, match=r"line 3: compaction\.max_tokens"):
        compaction_of(file)


# --- C4, C6-C8: pressure ----------------------------------------------------------------


async def test_c4_before_the_sessions_first_request_there_is_no_pressure(tmp_path: Path) -> None:
    # An imported history without any `request/header`: nothing was measured yet.
    session = Session("imported")
    for spec in (TS(1), SS(1, 1), U("q" * 4000), A(1, 1, txt("r" * 4000)), SE(1, 1), TE(1)):
        append(session, spec)
    summarizer = TestSummarizer()
    model = ScriptedModel([{"text": "first"}, {"text": "second"}], context_window=1000)
    config = CompactionConfig(summarizer=summarizer)
    loop = AgentLoop(session, model=model, cwd=tmp_path, config=LoopConfig(compaction=config))
    assert loop.compaction is not None and loop.compaction.estimate() > 1000
    await loop.run_turn("go")
    assert not of_type(session.events, *BRACKET) and not summarizer.requests
    (header,) = of_type(session.events, REQUEST_HEADER)
    # once a request is recorded, the same history is under pressure
    await loop.run_turn("again")
    assert of_type(session.events, COMPACTION_START)[0].seq > header.seq
    assert of_type(session.events, COMPACTION_SUMMARY) and summarizer.requests


async def test_c6_pressure_compacts_only_once_the_threshold_is_reached(tmp_path: Path) -> None:
    script = [{"text": f"answer {n} " + "a" * 190} for n in range(5)]
    session, _, loop = compacting_loop(
        tmp_path, script, window=1000, threshold_ratio=0.5, retain_tokens=180
    )
    assert loop.compaction is not None
    estimates = []
    for n in range(4):  # conversation(1) .. conversation(4); each next step measures it
        await loop.run_turn(f"prompt {n} " + "p" * 190)
        assert not of_type(session.events, *BRACKET), f"compacted in turn {n + 1}"
        estimates.append(loop.compaction.estimate())
    assert [tokens >= 500 for tokens in estimates] == [False, False, False, True]
    await loop.run_turn("prompt 4 " + "p" * 190)  # conversation(4): compacts
    (summary,) = of_type(session.events, COMPACTION_SUMMARY)
    assert len(summary.data["shadowedSeqs"]) > 2
    messages = session.derive_messages()
    assert is_checkpoint(messages[0]) and len(messages) < 8
    assert_log_valid(session)


def _loop(
    cwd: Path, session: Session, script: list[dict[str, Any]], system: str, **compaction: Any
) -> tuple[AgentLoop, TestSummarizer]:
    """A loop with `system` as its system prompt, a 1000-token window and the `big` tool."""
    summarizer = TestSummarizer()
    model = ScriptedModel(script, context_window=1000)
    config = LoopConfig(
        system_prompt=system,
        compaction=CompactionConfig(summarizer=summarizer, **compaction),
    )
    loop = AgentLoop(session, model=model, tools=[big_tool(40)], cwd=cwd, config=config)
    return loop, summarizer


TOOL_STEP: list[dict[str, Any]] = [
    {"text": "", "tool_calls": [{"id": "t1", "name": "big", "arguments": {}}]},
    {"text": "done"},
]


@pytest.mark.parametrize("system", ["You are a test agent.", "S" * 2000])
async def test_c7_the_request_envelope_counts_toward_pressure(tmp_path: Path, system: str) -> None:
    session = Session("envelope")
    first, _ = _loop(tmp_path, session, [{"text": "x" * 600}] * 2, "short", threshold_ratio=0.9)
    for _ in range(2):  # conversation(2, 'x'*600)
        await first.run_turn("x" * 600)
    first.close()
    assert not of_type(session.events, *BRACKET)
    # a new system prompt: its `request/header` lands in the next step, before the second
    loop, summarizer = _loop(tmp_path, session, TOOL_STEP, system, threshold_ratio=0.9)
    assert (await loop.run_turn("third")).kind == "completed"
    header = of_type(session.events, REQUEST_HEADER)[-1]
    assert header.data["header"]["system"] == system
    assert loop.compaction is not None  # the estimate prices the envelope (system, tools)
    assert loop.compaction.fold.header_price == estimate_header(header.data["header"])
    assert loop.compaction.fold.header_price > len(system) // 4
    starts = of_type(session.events, COMPACTION_START)
    if len(system) < 100:
        assert not starts and not summarizer.requests  # the same surface, a small envelope
    else:
        assert [start.seq > header.seq for start in starts] == [True]
        assert summarizer.requests[0].system == system
    assert_log_valid(session)


@pytest.mark.parametrize("turns", [0, 1])
async def test_c8_a_huge_envelope_alone_is_not_compactable(tmp_path: Path, turns: int) -> None:
    session = Session("envelope")
    script = [{"text": "short"}] * turns + TOOL_STEP
    loop, summarizer = _loop(tmp_path, session, script, "S" * 8000)
    for _ in range(turns):
        await loop.run_turn("hi")
    # every step is far above the threshold (the system prompt alone is ~2000 tokens), but
    # the surface is one turn: nothing at its head may be summarized
    assert (await loop.run_turn("go")).kind == "completed"
    assert loop.compaction is not None and loop.compaction.estimate() > 2000
    assert not of_type(session.events, *BRACKET) and not summarizer.requests
    assert session.surface.replace_generation == 0


# --- C10: tool conversations ------------------------------------------------------------


async def test_c10_a_compacted_tool_conversation_keeps_every_result_after_its_call(
    tmp_path: Path,
) -> None:
    session, _, loop = compacting_loop(
        tmp_path, tool_script(6, calls=3), window=4000, size=1200, retain_tokens=80, pruner=None
    )
    assert (await loop.run_turn("go")).kind == "completed"
    events = session.events
    summaries = of_type(events, COMPACTION_SUMMARY)
    assert summaries, "the session never compacted"
    for summary in summaries:  # a shadowed call's results are shadowed with it
        shadowed = set(summary.data["shadowedSeqs"])
        for seq in shadowed:
            if events[seq].type == TOOL_RESULT:
                call = events[seq].data["message"]["content"][0]["toolCallId"]
                assert any(
                    block.get("id") == call
                    for other in shadowed
                    if "message" in events[other].data
                    for block in events[other].data["message"]["content"]
                )
    messages = session.derive_messages()
    check_pairing(messages)
    called: set[str] = set()
    for message in messages:
        for block in message["content"]:
            if block["type"] == BLOCK_TOOL_CALL:
                called.add(block["id"])
            elif block["type"] == BLOCK_TOOL_RESULT:
                assert block["toolCallId"] in called  # every result follows its call
    await assert_pairs_for_both_providers(messages)
    assert_log_valid(session)


# --- C12, C14, C15: the pruner and pressure ----------------------------------------------


async def test_c12_below_pressure_the_pruner_does_not_run(tmp_path: Path) -> None:
    session, _, loop = compacting_loop(
        tmp_path, tool_script(3), window=1_000_000, pruner=PrunerConfig(100, 20, 10)
    )
    assert (await loop.run_turn("go")).kind == "completed"
    assert not of_type(session.events, COMPACTION_PRUNE, *BRACKET)
    assert session.surface.replace_generation == 0
    results = of_type(session.events, TOOL_RESULT)
    assert len(results) == 3 and all(len(str(r.data)) > 10_000 for r in results)


def _text(value: object) -> str:
    """Every `text` of nested content blocks, joined by newlines."""
    if isinstance(value, dict):
        own = [value["text"]] if isinstance(value.get("text"), str) else []
        return "\n".join([*own, *(_text(v) for k, v in value.items() if k != "text")])
    if isinstance(value, list | tuple):
        return "\n".join(_text(item) for item in value)
    return ""


def _pressure_with_results(
    cwd: Path, pruner: PrunerConfig | None
) -> tuple[Session, TestSummarizer, AgentLoop]:
    """Three steps of long text and one 3000-character result each, window 4000 at 0.5."""
    script: list[dict[str, Any]] = [
        {
            "text": f"step {n} " + "t" * 1500,
            "tool_calls": [{"id": f"c{n}", "name": "big", "arguments": {}}],
        }
        for n in range(3)
    ]
    summarizer = TestSummarizer()
    session, _, loop = compacting_loop(
        cwd,
        [*script, {"text": "done"}],
        window=4000,
        summarizer=summarizer,
        size=3000,
        threshold_ratio=0.5,
        retain_tokens=100,
        pruner=pruner,
    )
    return session, summarizer, loop


async def test_c14_when_pruning_is_not_enough_the_summary_sees_the_pruned_results(
    tmp_path: Path,
) -> None:
    session, summarizer, loop = _pressure_with_results(tmp_path, PrunerConfig(100, 20, 10))
    assert (await loop.run_turn("go")).kind == "completed"
    prunes = of_type(session.events, COMPACTION_PRUNE)
    assert prunes and summarizer.requests
    assert prunes[0].seq < of_type(session.events, COMPACTION_START)[0].seq
    text = _text(summarizer.requests[0].messages)
    assert "tool result middle pruned" in text and PRUNE_MARKER in text
    assert "x" * 300 not in text  # not the original result
    assert_log_valid(session)


async def test_c15_without_a_pruner_results_are_summarized_untouched(tmp_path: Path) -> None:
    session, summarizer, loop = _pressure_with_results(tmp_path, None)
    assert (await loop.run_turn("go")).kind == "completed"
    assert not of_type(session.events, COMPACTION_PRUNE)
    replaced = [e for e in of_type(session.events, TOOL_RESULT) if e.surface_op != SURFACE_APPEND]
    assert not replaced
    assert summarizer.requests
    text = _text(summarizer.requests[0].messages)
    assert PRUNE_MARKER not in text and "x" * 2000 in text
    assert_log_valid(session)
