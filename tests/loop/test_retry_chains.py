"""`llm/retry` chains follow dsh's llm-retry invariants in every retry scenario (issue 9, B6).

dsh refuses a log whose retry events break its checker (`dsh-llm-retry/invariant`): one
`retryId` per provider-policy chain (turn, step, provider, `policyKey`), retries numbered 1, 2,
... within it, `mode` only `normal` or `always`. Each test runs a real loop over a scripted
model whose failures are data, then runs `check_retry_events` (the checker-equivalent that
`assert_log_valid` also runs) over the whole log, and asserts the chain's fields directly, so
a regression shows both as a broken dsh rule and as the wrong field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from duraloop.llm import RetryPolicy, ScriptedModel
from duraloop.log import Event, Session
from duraloop.loop import AgentLoop, LoopConfig, LoopHooks, StepContext
from duraloop.testing import assert_log_valid
from duraloop.testing._retry_check import check_retry_events

from ._support import call, make_loop, of_type, recorder_tool, tools_step

FAST = RetryPolicy(initial_delay_ms=1, max_delay_ms=8, jitter_ratio=0.0)


def _error(code: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": f"{code} failure"}}


def _chains(events: list[Event]) -> list[tuple[Any, ...]]:
    """`(step, retry, retryId, mode, policyKey)` of every `llm/retry`, in log order."""
    return [
        (e.data["step"], e.data["retry"], e.data["retryId"], e.data["mode"], e.data["policyKey"])
        for e in of_type(events, "llm/retry")
    ]


def _hooked_loop(
    tmp_path: Path, script: list[dict[str, Any]], hooks: LoopHooks, retry: RetryPolicy | None
) -> tuple[Session, AgentLoop]:
    session = Session("s")
    model = ScriptedModel(script)
    config = LoopConfig(retry=retry)
    return session, AgentLoop(session, model=model, cwd=tmp_path, config=config, hooks=hooks)


def _started(events: list[Event]) -> list[tuple[str, int]]:
    return [(e.data["retryId"], e.data["retry"]) for e in of_type(events, "llm/retry-started")]


@pytest.mark.anyio
async def test_two_retries_of_one_failure_chain_share_one_retry_id(tmp_path: Path) -> None:
    script = [_error("RATE_LIMIT"), _error("SERVER"), {"text": "ok"}]
    session, _model, loop = make_loop(tmp_path, script, [], config=LoopConfig(retry=FAST))
    assert (await loop.run_turn("go")).kind == "completed"
    events = list(session.events)
    check_retry_events(events)
    (first, second) = _chains(events)
    assert first[:2] == (1, 1) and second[:2] == (1, 2)
    assert first[2] == second[2]
    assert _started(events) == [(first[2], 1), (first[2], 2)]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_always_mode_chain_keeps_one_retry_id_and_omits_max_retries(tmp_path: Path) -> None:
    policy = RetryPolicy(mode="always", initial_delay_ms=1, max_delay_ms=8, jitter_ratio=0.0)
    script = [_error("AUTH"), _error("INVALID_REQUEST"), _error("AUTH"), {"text": "ok"}]
    session, _model, loop = make_loop(tmp_path, script, [], config=LoopConfig(retry=policy))
    assert (await loop.run_turn("go")).kind == "completed"
    events = list(session.events)
    check_retry_events(events)
    chains = _chains(events)
    assert [(c[1], c[3], c[4]) for c in chains] == [
        (n, "always", '["always",1,8,0]') for n in (1, 2, 3)
    ]
    assert len({c[2] for c in chains}) == 1
    assert all("maxRetries" not in e.data for e in of_type(events, "llm/retry"))


@pytest.mark.anyio
async def test_hook_retry_is_logged_as_always_mode_with_its_origin_apart(tmp_path: Path) -> None:
    hooks = LoopHooks(request_error=lambda ctx, failure: "retry")
    session, loop = _hooked_loop(tmp_path, [_error("RATE_LIMIT"), {"text": "ok"}], hooks, None)
    assert (await loop.run_turn("go")).kind == "completed"
    events = list(session.events)
    check_retry_events(events)
    (retry,) = of_type(events, "llm/retry")
    assert retry.data["mode"] == "always" and retry.data["origin"] == "hook"
    assert retry.data["policyKey"] == "hook" and "maxRetries" not in retry.data
    assert retry.data["delayMs"] == 0


@pytest.mark.anyio
async def test_hook_and_policy_retries_in_one_step_are_two_chains_numbered_apart(
    tmp_path: Path,
) -> None:
    answers = iter(["retry", None, "retry", None])

    def request_error(ctx: StepContext, failure: dict[str, Any]) -> str | None:
        return next(answers)

    script = [
        _error("SERVER"),
        _error("SERVER"),
        _error("SERVER"),
        _error("SERVER"),
        {"text": "ok"},
    ]
    hooks = LoopHooks(request_error=request_error)
    session, loop = _hooked_loop(tmp_path, script, hooks, FAST)
    assert (await loop.run_turn("go")).kind == "completed"
    events = list(session.events)
    check_retry_events(events)
    chains = _chains(events)
    assert [(c[1], c[3], c[4]) for c in chains] == [
        (1, "always", "hook"),
        (1, "normal", FAST.policy_key),
        (2, "always", "hook"),
        (2, "normal", FAST.policy_key),
    ]
    hook_ids = {c[2] for c in chains if c[4] == "hook"}
    policy_ids = {c[2] for c in chains if c[4] != "hook"}
    assert len(hook_ids) == 1 and len(policy_ids) == 1 and hook_ids != policy_ids


@pytest.mark.anyio
async def test_a_later_step_starts_a_new_chain_with_a_new_retry_id_from_retry_one(
    tmp_path: Path,
) -> None:
    record: list[str] = []
    script = [
        _error("SERVER"),
        _error("SERVER"),
        tools_step(call("c1")),
        _error("SERVER"),
        {"text": "done"},
    ]
    session, _model, loop = make_loop(
        tmp_path, script, [recorder_tool("p", record)], config=LoopConfig(retry=FAST)
    )
    assert (await loop.run_turn("go")).kind == "completed"
    events = list(session.events)
    check_retry_events(events)
    chains = _chains(events)
    assert [(c[0], c[1]) for c in chains] == [(1, 1), (1, 2), (2, 1)]
    assert chains[0][2] == chains[1][2] != chains[2][2]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_each_turn_starts_a_new_chain(tmp_path: Path) -> None:
    script = [_error("TIMEOUT"), {"text": "one"}, _error("TIMEOUT"), {"text": "two"}]
    session, _model, loop = make_loop(tmp_path, script, [], config=LoopConfig(retry=FAST))
    await loop.run_turn("first")
    await loop.run_turn("second")
    events = list(session.events)
    check_retry_events(events)
    retries = [e.data for e in of_type(events, "llm/retry")]
    assert [(r["turn"], r["step"], r["retry"]) for r in retries] == [(1, 1, 1), (2, 1, 1)]
    assert retries[0]["retryId"] != retries[1]["retryId"]
