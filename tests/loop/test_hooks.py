"""Loop hooks (docs/loop.md#pre-step, #steps, #hooks): pre-step rewrites, request config, failure
paths.

A hook is a plain callable, sync or async; what it changes must be in the log (Law 3: the
`request/header` records the max_tokens actually sent), and a failing hook fails the turn
with its original exception after the log is closed (B42's rule, for every hook point).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from duraloop.errors import UsageError
from duraloop.llm import ScriptedModel
from duraloop.log import Message, user_message
from duraloop.loop import LoopHooks, RequestConfig, SessionSetup, StepContext, start_session
from duraloop.store import MemoryStore
from duraloop.testing import assert_log_valid, describe_log

from ._support import inbox_log, make_loop, of_type, user_texts


@pytest.mark.anyio
async def test_pre_step_rewrite_enters_the_returned_messages(tmp_path: Path) -> None:
    async def pre_step(ctx: StepContext) -> list[Message]:
        return [user_message("rewritten"), *ctx.messages]

    session, model, loop = make_loop(tmp_path, [{"text": "ok"}], [])
    loop.hooks = LoopHooks(pre_step=pre_step)
    await loop.run_turn("original")
    assert user_texts(model.requests[0].messages) == ["rewritten", "original"]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_request_hook_changes_max_tokens_and_the_header_records_it(tmp_path: Path) -> None:
    seen: list[int] = []

    async def request(ctx: StepContext, config: RequestConfig) -> RequestConfig:
        seen.append(ctx.step)
        return dataclasses.replace(config, max_tokens=64)

    model = ScriptedModel([{"text": "ok"}])
    loop = start_session(
        SessionSetup(
            store=MemoryStore(),
            model=model,
            cwd=tmp_path,
            hooks=LoopHooks(request=request),
        )
    )
    await loop.run_turn("hi")
    assert seen == [1]
    assert model.requests[0].max_tokens == 64
    header = of_type(loop.session.events, "request/header")[0].data["header"]
    assert header["config"]["maxTokens"] == 64
    loop.close()


@pytest.mark.anyio
async def test_failing_request_hook_closes_the_step_and_raises_the_original(tmp_path: Path) -> None:
    def request(ctx: StepContext, config: RequestConfig) -> RequestConfig:
        raise LookupError("no route")

    session, model, loop = make_loop(tmp_path, [{"text": "unused"}], [])
    loop.hooks = LoopHooks(request=request)
    with pytest.raises(LookupError, match="no route"):
        await loop.run_turn("hi")
    assert describe_log(session.events) == ["T+1", "S+1", "U", "S-1", "T-1(error)"]
    assert model.requests == []
    assert_log_valid(session)


@pytest.mark.anyio
async def test_request_hook_returning_a_bad_config_fails_the_turn(tmp_path: Path) -> None:
    session, _model, loop = make_loop(tmp_path, [{"text": "unused"}], [])
    loop.hooks = LoopHooks(request=lambda ctx, config: RequestConfig(max_tokens=0))
    with pytest.raises(UsageError, match="max_tokens=0"):
        await loop.run_turn("hi")
    assert describe_log(session.events)[-1] == "T-1(error)"
    assert_log_valid(session)


@pytest.mark.anyio
async def test_pre_step_returning_a_bad_decision_fails_the_turn(tmp_path: Path) -> None:
    session, _model, loop = make_loop(tmp_path, [], [])
    loop.hooks = LoopHooks(pre_step=lambda ctx: "enter")  # type: ignore[arg-type,return-value]
    with pytest.raises(UsageError, match="pre_step"):
        await loop.run_turn("hi")
    assert describe_log(session.events) == ["T+1", "T-1(error)"]


@pytest.mark.anyio
async def test_failing_turn_stopping_fails_the_turn_after_its_step(tmp_path: Path) -> None:
    def turn_stopping(ctx: StepContext) -> None:
        raise RuntimeError("stop hook broke")

    session, _model, loop = make_loop(tmp_path, [{"text": "ok"}], [])
    loop.hooks = LoopHooks(turn_stopping=turn_stopping)
    with pytest.raises(RuntimeError, match="stop hook broke"):
        await loop.run_turn("hi")
    assert describe_log(session.events) == ["T+1", "S+1", "U", "H", "C", "A", "S-1", "T-1(error)"]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_turn_stopping_inject_continues_and_max_tokens_stays_sticky(tmp_path: Path) -> None:
    def turn_stopping(ctx: StepContext) -> None:
        if ctx.step == 1:
            ctx.loop.inject("context")

    script = [{"text": "cut", "finish": "max-tokens"}, {"text": "done"}]
    session, model, loop = make_loop(tmp_path, script, [])
    loop.hooks = LoopHooks(turn_stopping=turn_stopping)
    result = await loop.run_turn("hi")
    assert (result.kind, result.steps) == ("max-tokens", 2)
    assert inbox_log(session.events) == [
        "T+1",
        "S+1",
        "U",
        "H",
        "C",
        "A",
        "S-1",
        "ins(ns)",
        "claim",
        "S+2",
        "U",
        "A",
        "S-2",
        "T-1(max-tokens)",
    ]
    assert user_texts(model.requests[1].messages) == ["hi", "context"]
    assert_log_valid(session)
