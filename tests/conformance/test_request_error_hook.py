"""Conformance: loop-spec 8 cases B33-B36 with the `LoopHooks.request_error` hook.

The hook is duraloop's `agent/request-error` listener (loop-spec 2.4 step 5): it sees each
in-band model failure inside the open step, before the `RetryPolicy`. `"retry"` retries at
once in the same step, logged as `llm/retry` (`origin` `"hook"`, `delayMs` 0) then
`llm/retry-started`; None leaves the failure to the policy. Most tests run with no policy
(`retry=None`), so any retry seen is the hook's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from duraloop.errors import LlmError, UsageError
from duraloop.llm import RetryPolicy, ScriptedModel
from duraloop.log import Event, Session
from duraloop.loop import AgentLoop, LoopConfig, LoopHooks, StepContext
from duraloop.testing import assert_log_valid, describe_log
from loop._support import of_type

USER = {"kind": "user"}
FAST = RetryPolicy(initial_delay_ms=1, max_delay_ms=8, jitter_ratio=0.0)


def _failing(code: str, text: str = "") -> dict[str, Any]:
    response: dict[str, Any] = {"error": {"code": code, "message": f"{code} failure"}}
    if text:
        response["text"] = text
    return response


def _loop(
    tmp_path: Path, script: list[dict[str, Any]], hooks: LoopHooks, retry: RetryPolicy | None = None
) -> tuple[Session, ScriptedModel, AgentLoop]:
    session = Session("s")
    model = ScriptedModel(script)
    loop = AgentLoop(
        session, model=model, cwd=tmp_path, config=LoopConfig(retry=retry), hooks=hooks
    )
    return session, model, loop


def _chunk_seqs(events: list[Event], start: int, end: int) -> list[int]:
    return [e.seq for e in events[start:end] if e.type == "assistant/chunk"]


@pytest.mark.anyio
async def test_b33_hook_retry_stays_in_the_same_turn_and_step(tmp_path: Path) -> None:
    seen: list[tuple[int, int, str]] = []

    def request_error(ctx: StepContext, failure: dict[str, Any]) -> str:
        seen.append((ctx.turn, ctx.step, failure["code"]))
        return "retry"

    script = [_failing("RATE_LIMIT"), _failing("SERVER"), {"text": "ok"}]
    session, model, loop = _loop(tmp_path, script, LoopHooks(request_error=request_error))
    result = await loop.run_turn("go")
    assert (result.kind, result.text, result.steps) == ("completed", "ok", 1)
    assert seen == [(1, 1, "RATE_LIMIT"), (1, 1, "SERVER")]
    assert len(model.requests) == 3
    events = list(session.events)
    assert describe_log(events) == [
        "T+1", "S+1", "U", "H", "C",
        "llm/retry", "llm/retry-started", "llm/retry", "llm/retry-started",
        "A", "S-1", "T-1(completed)",
    ]
    retries = [e.data for e in of_type(events, "llm/retry")]
    # dsh's checker accepts only `normal`/`always` modes: a hook retry is an unbudgeted
    # `always` chain of its own, its origin in a field dsh ignores.
    assert [
        (r["turn"], r["step"], r["retry"], r["delayMs"], r["mode"], r["policyKey"], r["origin"])
        for r in retries
    ] == [(1, 1, 1, 0, "always", "hook", "hook"), (1, 1, 2, 0, "always", "hook", "hook")]
    assert len({r["retryId"] for r in retries}) == 1
    assert [r["failure"]["code"] for r in retries] == ["RATE_LIMIT", "SERVER"]
    assert all("maxRetries" not in r for r in retries)
    started = [e.data for e in of_type(events, "llm/retry-started")]
    assert [(s["retryId"], s["retry"]) for s in started] == [(r["retryId"], r["retry"]) for r in retries]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b33_async_hook_answering_none_falls_through_to_the_policy(tmp_path: Path) -> None:
    seen: list[str] = []

    async def request_error(ctx: StepContext, failure: dict[str, Any]) -> str | None:
        seen.append(failure["code"])
        return None

    script = [_failing("RATE_LIMIT"), {"text": "ok"}]
    session, model, loop = _loop(tmp_path, script, LoopHooks(request_error=request_error), FAST)
    result = await loop.run_turn("go")
    assert result.kind == "completed" and seen == ["RATE_LIMIT"]
    (retry,) = [e.data for e in of_type(session.events, "llm/retry")]
    assert (retry["mode"], retry["policyKey"], retry["delayMs"]) == ("normal", FAST.policy_key, 1)
    assert len(model.requests) == 2
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b33_hook_answering_none_without_a_policy_ends_the_turn_error(tmp_path: Path) -> None:
    script = [_failing("RATE_LIMIT"), {"text": "never requested"}]
    session, model, loop = _loop(tmp_path, script, LoopHooks(request_error=lambda ctx, f: None))
    with pytest.raises(LlmError) as raised:
        await loop.run_turn("go")
    assert raised.value.code == "RATE_LIMIT"
    assert len(model.requests) == 1
    assert describe_log(list(session.events))[-2:] == ["S-1", "T-1(error)"]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b34_hook_retry_discards_the_failed_attempt(tmp_path: Path) -> None:
    script = [_failing("RATE_LIMIT", text="never shown"), {"text": "the answer"}]
    session, _model, loop = _loop(tmp_path, script, LoopHooks(request_error=lambda ctx, f: "retry"))
    await loop.run_turn("go")
    events = list(session.events)
    (message,) = of_type(events, "assistant/message")
    started = of_type(events, "llm/retry-started")[0]
    own_chunks = _chunk_seqs(events, started.seq, message.seq)
    assert _chunk_seqs(events, 0, started.seq) and own_chunks
    assert message.source_event_seqs == own_chunks
    assert "interrupted" not in message.data
    assert message.data["message"]["content"] == [{"type": "text", "text": "the answer"}]
    assert [m["role"] for m in session.derive_messages()] == ["user", "assistant"]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b35_hook_cancelling_then_answering_retry_ends_aborted(tmp_path: Path) -> None:
    def request_error(ctx: StepContext, failure: dict[str, Any]) -> str:
        ctx.loop.cancel()
        return "retry"

    script = [_failing("RATE_LIMIT"), {"text": "never requested"}]
    session, model, loop = _loop(tmp_path, script, LoopHooks(request_error=request_error), FAST)
    result = await loop.run_turn("go")
    assert result.reason == {"kind": "aborted", "reason": USER}
    assert len(model.requests) == 1
    events = list(session.events)
    assert not of_type(events, "llm/retry") and not of_type(events, "assistant/message")
    assert describe_log(events) == ["T+1", "S+1", "U", "H", "C", "S-1", "T-1(aborted)"]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b36_hook_raising_ends_the_turn_error_without_retrying(tmp_path: Path) -> None:
    def request_error(ctx: StepContext, failure: dict[str, Any]) -> str:
        raise RuntimeError("recovery listener failed")

    script = [_failing("RATE_LIMIT"), {"text": "never requested"}]
    session, model, loop = _loop(tmp_path, script, LoopHooks(request_error=request_error), FAST)
    with pytest.raises(RuntimeError, match="recovery listener failed"):
        await loop.run_turn("go")
    assert len(model.requests) == 1
    events = list(session.events)
    assert not of_type(events, "llm/retry")
    assert describe_log(events) == ["T+1", "S+1", "U", "H", "C", "S-1", "T-1(error)"]
    assert "recovery listener failed" in events[-1].data["reason"]["error"]["message"]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b36_hook_answering_an_unknown_action_ends_the_turn_with_a_usage_error(
    tmp_path: Path,
) -> None:
    script = [_failing("RATE_LIMIT"), {"text": "never requested"}]
    session, model, loop = _loop(tmp_path, script, LoopHooks(request_error=lambda ctx, f: "again"))
    with pytest.raises(UsageError, match="'retry' or None"):
        await loop.run_turn("go")
    assert len(model.requests) == 1
    assert describe_log(list(session.events))[-1] == "T-1(error)"
    assert_log_valid(session)
