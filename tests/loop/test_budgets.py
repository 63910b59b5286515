"""Budgets (docs/loop.md#budgets): per-turn and per-session limits, checked before each step."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duraloop.errors import BudgetExceededError, ConfigError
from duraloop.llm import (
    ModelRequest,
    ScriptedModel,
    StreamChunk,
    block_start,
    finish_chunk,
    text_delta,
)
from duraloop.log import Event, Price, Session, Usage, UsageFold, usage_of
from duraloop.log.vocabulary import REASON_BLOCKED, REASON_COMPLETED
from duraloop.loop import AgentLoop, Budget, LoopConfig, SessionSetup, resume_session, start_session
from duraloop.store import JsonlStore

from ._support import call, make_loop, recorder_tool, tools_step

PRICE = Price(input_per_mtok=2.0, output_per_mtok=8.0, cache_read_per_mtok=0.5)


def _script(steps: int, calls: int = 1) -> list[dict[str, Any]]:
    """`steps` tool steps of `calls` calls each, then a final text answer."""
    return [
        *(
            tools_step(*(call(f"c{s}-{c}") for c in range(calls)), text=f"step {s}")
            for s in range(steps)
        ),
        {"text": "done"},
    ]


async def _turn(loop: AgentLoop, prompt: str = "go") -> Any:
    with loop:
        return await loop.run_turn(prompt)


def test_turn_budget_of_requests_blocks_the_turn_before_the_next_step(tmp_path: Path) -> None:
    config = LoopConfig(turn_budget=Budget(requests=2))
    session, _, loop = make_loop(tmp_path, _script(5), [recorder_tool("p", [])], config=config)
    result = anyio.run(_turn, loop)
    assert result.kind == REASON_BLOCKED
    assert result.steps == 2
    assert result.usage.requests == 2
    message = result.reason["message"]
    assert "the turn budget of 2 requests is reached: 2 model requests spent" in message
    assert "--max-requests-per-turn" in message
    assert session.events[-1].data["reason"] == result.reason  # as the log records it


def test_turn_budget_applies_to_each_turn_anew(tmp_path: Path) -> None:
    config = LoopConfig(turn_budget=Budget(requests=2))
    script = [*_script(3)[:2], {"text": "first"}, {"text": "second"}]
    _, _, loop = make_loop(tmp_path, script, [recorder_tool("p", [])], config=config)

    async def main() -> list[Any]:
        with loop:
            return [await loop.run_turn("one"), await loop.run_turn("two")]

    first, second = anyio.run(main)
    assert first.kind == REASON_BLOCKED
    assert second.kind == REASON_COMPLETED
    assert second.usage.requests == 1


def test_turn_budget_of_tokens_counts_the_providers_usage(tmp_path: Path) -> None:
    config = LoopConfig(turn_budget=Budget(tokens=1))
    session, _, loop = make_loop(tmp_path, _script(3), [recorder_tool("p", [])], config=config)
    result = anyio.run(_turn, loop)
    assert result.kind == REASON_BLOCKED
    assert result.steps == 1
    reported = [
        e.data["usage"]
        for e in session.events
        if e.type == "assistant/message" and "usage" in e.data
    ]
    assert result.usage.input_tokens == sum(u["inputTokens"] for u in reported)
    assert result.usage.output_tokens == sum(u["outputTokens"] for u in reported)
    assert not result.usage.estimated
    assert f"{result.usage.tokens:,} tokens (input" in result.reason["message"]


def test_turn_budget_of_tool_calls_is_checked_between_steps_never_mid_step(tmp_path: Path) -> None:
    config = LoopConfig(turn_budget=Budget(tool_calls=3))
    session, _, loop = make_loop(
        tmp_path, _script(4, calls=2), [recorder_tool("p", [])], config=config
    )
    result = anyio.run(_turn, loop)
    assert result.kind == REASON_BLOCKED
    assert result.steps == 2  # 2 calls, then 4 (past the limit within the step), then stop
    assert result.usage.tool_calls == 4
    assert sum(e.type == "tool/call" for e in session.events) == 4
    assert sum(e.type == "tool/result" for e in session.events) == 4  # every call answered


def test_cost_budget_prices_tokens_per_model(tmp_path: Path) -> None:
    prices = {"scripted:scripted": PRICE}
    config = LoopConfig(turn_budget=Budget(cost=1e-9), prices=prices)
    session, _, loop = make_loop(tmp_path, _script(3), [recorder_tool("p", [])], config=config)
    result = anyio.run(_turn, loop)
    assert result.kind == REASON_BLOCKED
    assert result.steps == 1
    usage = result.usage
    expected = (usage.input_tokens * 2.0 + usage.output_tokens * 8.0) / 1e6
    assert math.isclose(usage.cost, expected)
    assert usage.unpriced == ()
    assert "--max-cost-per-turn" in result.reason["message"]
    assert loop.usage == usage  # one turn: the session spent what it did


def test_cost_budget_without_the_models_price_is_refused(tmp_path: Path) -> None:
    config = LoopConfig(session_budget=Budget(cost=1.0), prices={"openai:gpt": PRICE})
    with pytest.raises(ConfigError, match=r'\[prices\."scripted:scripted"\]'):
        make_loop(tmp_path, _script(1), [], config=config)


@pytest.mark.parametrize(
    "budget",
    [{"requests": 0}, {"tokens": -1}, {"tool_calls": 1.5}, {"cost": 0}, {"cost": math.inf}],
)
def test_budget_limits_are_validated(budget: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="budget"):
        Budget(**budget)


def test_session_budget_holds_across_a_resume_and_refuses_the_next_turn(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    store = JsonlStore(tmp_path / "store")
    tools = [recorder_tool("p", [])]

    def setup(script: list[dict[str, Any]], budget: Budget | None) -> SessionSetup:
        config = LoopConfig(session_budget=budget, snapshot_every=None)
        return SessionSetup(
            store=store, model=ScriptedModel(script), tools=tools, cwd=workspace, config=config
        )

    async def first() -> tuple[str, Usage]:
        with start_session(setup(_script(2), None)) as loop:
            await loop.run_turn("spend")
            return loop.session.id, loop.usage

    session_id, spent = anyio.run(first)
    assert spent.requests == 3

    async def again(budget: Budget) -> Any:
        loop, _ = resume_session(session_id, setup(_script(2), budget))
        with loop:
            return await loop.run_turn("more")

    before = len(store.load(session_id).events)
    with pytest.raises(BudgetExceededError, match="session budget of 3 requests is reached"):
        anyio.run(again, Budget(requests=3))
    after = store.load(session_id).events
    assert {e.type for e in after[before:]} <= {"session/end-seed"}  # no turn/start

    result = anyio.run(again, Budget(requests=4))  # one more request, then the limit
    assert result.kind == REASON_BLOCKED
    assert result.steps == 1
    assert (
        "the session budget of 4 requests is reached: 4 model requests" in result.reason["message"]
    )


def test_session_usage_through_a_snapshot_equals_the_whole_log_fold(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    store = JsonlStore(tmp_path / "store")
    tools = [recorder_tool("p", [])]
    config = LoopConfig(snapshot_every=1, prices={"scripted:scripted": PRICE})

    async def run() -> str:
        setup = SessionSetup(
            store=store,
            model=ScriptedModel(_script(2, calls=2)),
            tools=tools,
            cwd=workspace,
            config=config,
        )
        with start_session(setup) as loop:
            await loop.run_turn("spend")
            return loop.session.id

    session_id = anyio.run(run)
    loaded, restored = store.prepare(session_id)
    assert loaded.snapshot == "used"
    through_snapshot = AgentLoop(
        restored, model=ScriptedModel([]), cwd=workspace, config=config
    ).usage
    whole = usage_of(store.load(session_id).events, config.prices)
    assert through_snapshot == whole
    assert whole.tool_calls == 4 and whole.requests == 3 and whole.cost > 0


class _SilentModel:
    """A model that answers text and reports no usage (the estimate's case)."""

    provider = "silent"
    model = "m"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        yield block_start(0, "text")
        yield text_delta(0, "x" * 40)
        yield finish_chunk("stop")


def test_a_response_without_usage_is_estimated_and_marked(tmp_path: Path) -> None:
    session = Session("s")
    loop = AgentLoop(session, model=_SilentModel(), cwd=tmp_path)
    result = anyio.run(_turn, loop, "y" * 400)
    usage = result.usage
    assert usage.estimated
    assert usage.output_tokens == 10  # 40 characters at 4 a token
    assert usage.input_tokens == 100  # the 400-character prompt
    assert usage.unpriced == ("silent:m",)


# --- the fold -----------------------------------------------------------------------------


def _events_of_a_session(tmp_path: Path) -> list[Event]:
    session, _, loop = make_loop(
        tmp_path,
        [
            *_script(3, calls=2),
            {"error": {"code": "TRANSPORT", "message": "x"}},
            {"text": "after retry"},
        ],
        [recorder_tool("p", [])],
    )

    async def main() -> None:
        with loop:
            await loop.run_turn("one")
            await loop.run_turn("two")

    anyio.run(main)
    return list(session.events)


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=6))
def test_property_usage_fold_fed_in_pieces_and_resumed_from_json_equals_one_pass(
    tmp_path_factory: pytest.TempPathFactory, cuts: list[int]
) -> None:
    events = _EVENTS.get("events")
    if events is None:
        events = _EVENTS["events"] = _events_of_a_session(tmp_path_factory.mktemp("fold"))
    prices = {"scripted:scripted": PRICE}
    whole = usage_of(events, prices)
    fold = UsageFold(prices)
    at = 0
    for cut in sorted({c % (len(events) + 1) for c in cuts}):
        fold.feed(events[at:cut])
        at = cut
        if at and events[at - 1].type in ("turn/end", "step/end"):
            fold = UsageFold.from_json(fold.to_json(), prices)  # a snapshot between steps
    fold.feed(events[at:])
    assert fold.usage == whole
    assert whole.requests == sum(e.type in ("step/start", "llm/retry") for e in events)


_EVENTS: dict[str, list[Event]] = {}
