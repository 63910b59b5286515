"""Conformance: docs/cases.md#loop-behaviour-cases behaviour cases B32-B39 (model requests).

A retry is recorded, not hidden (docs/loop.md#request-retries): `llm/retry` before the wait,
`llm/retry-started` after it, and the failed attempt's chunks stay in the log uncited. B33-B36
are pinned once for each source of a retry. The `RetryPolicy` tests use millisecond backoffs
with no jitter, so every recorded delay is exact. The `LoopHooks.request_error` hook is
duraloop's `agent/request-error` listener (docs/loop.md#request-retries): it sees each in-band model
failure inside the open step, before the `RetryPolicy`. `"retry"` retries at once in the same
step, logged as `llm/retry` (`origin` `"hook"`, `delayMs` 0) then `llm/retry-started`; None
leaves the failure to the policy. Most hook tests run with no policy (`retry=None`), so any
retry seen is the hook's. A failing `request` hook and a model without a provider or model
name never reach the model (F7, B37, B38); a `max-tokens` finish ends the turn (B39).
Cancellation tests wait with `anyio.wait_all_tasks_blocked()` on a backoff far longer than any
test, never on a sleep, and every test checks the whole log afterwards.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from duraloop.errors import LlmError, UsageError
from duraloop.llm import RetryPolicy, ScriptedModel
from duraloop.log import Event, Session
from duraloop.loop import AgentLoop, LoopConfig, LoopHooks, RequestConfig, StepContext
from duraloop.testing import assert_log_valid, describe_log
from loop._support import call, make_loop, of_type, recorder_tool, tools_step, user_texts

FAST = RetryPolicy(initial_delay_ms=1, max_delay_ms=8, jitter_ratio=0.0)
"""Backoffs of 1, 2, 4, 8 ms: exact, because there is no jitter."""

NEVER = RetryPolicy(initial_delay_ms=600_000, max_delay_ms=600_000, jitter_ratio=0.0)
"""A backoff longer than any test: a test that reaches its end cancelled the wait."""

USER = {"kind": "user"}


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (the backend duraloop ships with)."""
    return "asyncio"


def _error(code: str, message: str = "failed", text: str = "") -> dict[str, Any]:
    response: dict[str, Any] = {"error": {"code": code, "message": message}}
    if text:
        response["text"] = text
    return response


def _retries(events: list[Event]) -> list[dict[str, Any]]:
    return [event.data for event in of_type(events, "llm/retry")]


@pytest.mark.anyio
async def test_b32_non_retryable_code_ends_the_turn_error_at_once(tmp_path: Path) -> None:
    script = [_error("AUTH", "provider 401"), {"text": "never requested"}]
    session, model, loop = make_loop(tmp_path, script, [], config=LoopConfig(retry=FAST))
    with pytest.raises(LlmError) as caught:
        await loop.run_turn("go")
    assert caught.value.code == "AUTH"
    assert len(model.requests) == 1
    events = list(session.events)
    assert not _retries(events)
    assert not of_type(events, "assistant/message")
    assert events[-1].data["reason"] == {
        "kind": "error",
        "error": {"message": "provider 401", "code": "AUTH"},
    }
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b33_policy_retry_stays_in_the_same_turn_and_step(tmp_path: Path) -> None:
    script = [
        _error("RATE_LIMIT", "slow down", text="partial one"),
        _error("SERVER", "service unavailable", text="partial two"),
        {"text": "ok"},
    ]
    session, model, loop = make_loop(tmp_path, script, [], config=LoopConfig(retry=FAST))
    result = await loop.run_turn("go")
    assert (result.kind, result.text, result.steps) == ("completed", "ok", 1)
    events = list(session.events)
    assert describe_log(events) == [
        "T+1",
        "S+1",
        "U",
        "H",
        "C",
        "llm/retry",
        "llm/retry-started",
        "llm/retry",
        "llm/retry-started",
        "A",
        "S-1",
        "T-1(completed)",
    ]
    retries = _retries(events)
    assert [(r["turn"], r["step"], r["retry"], r["delayMs"]) for r in retries] == [
        (1, 1, 1, 1),
        (1, 1, 2, 2),
    ]
    assert [r["failure"] for r in retries] == [
        {"message": "slow down", "code": "RATE_LIMIT"},
        {"message": "service unavailable", "code": "SERVER"},
    ]
    for retry in retries:
        assert retry["provider"] == "scripted" and retry["mode"] == "normal"
        assert retry["maxRetries"] == 5 and retry["policyKey"] == FAST.policy_key
    started = [event.data for event in of_type(events, "llm/retry-started")]
    assert [(s["retryId"], s["retry"]) for s in started] == [
        (r["retryId"], r["retry"]) for r in retries
    ]
    # One provider-policy chain: one retryId for all its retries (dsh's llm-retry invariant).
    assert len({r["retryId"] for r in retries}) == 1
    # Every attempt re-derives the same history: the failed chunks never enter it.
    assert len(model.requests) == 3
    assert all(list(r.messages) == list(model.requests[0].messages) for r in model.requests)
    assert_log_valid(session)


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
        "T+1",
        "S+1",
        "U",
        "H",
        "C",
        "llm/retry",
        "llm/retry-started",
        "llm/retry",
        "llm/retry-started",
        "A",
        "S-1",
        "T-1(completed)",
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
    assert [(s["retryId"], s["retry"]) for s in started] == [
        (r["retryId"], r["retry"]) for r in retries
    ]
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


def _chunk_seqs_between(events: list[Event], start: int, end: int) -> list[int]:
    return [e.seq for e in events[start:end] if e.type == "assistant/chunk"]


@pytest.mark.anyio
async def test_b34_policy_retry_discards_the_failed_attempt(tmp_path: Path) -> None:
    script = [_error("RATE_LIMIT", text="never shown"), {"text": "the answer"}]
    session, _model, loop = make_loop(tmp_path, script, [], config=LoopConfig(retry=FAST))
    await loop.run_turn("go")
    events = list(session.events)
    (message,) = of_type(events, "assistant/message")
    started = of_type(events, "llm/retry-started")[0]
    own_chunks = _chunk_seqs_between(events, started.seq, message.seq)
    failed_chunks = _chunk_seqs_between(events, 0, started.seq)
    assert failed_chunks and own_chunks
    assert message.source_event_seqs == own_chunks
    assert "interrupted" not in message.data
    assert message.data["message"]["content"] == [{"type": "text", "text": "the answer"}]
    # The failed attempt is logged, text and terminal error finish included.
    failed = [events[seq].data["chunk"] for seq in failed_chunks]
    assert failed[-1]["reason"]["failure"]["code"] == "RATE_LIMIT"
    assert [m["role"] for m in session.derive_messages()] == ["user", "assistant"]
    assert_log_valid(session)


def _chunk_seqs(events: list[Event], start: int, end: int) -> list[int]:
    return [e.seq for e in events[start:end] if e.type == "assistant/chunk"]


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
async def test_b35_cancel_during_the_backoff_wait_ends_aborted_without_retrying(
    tmp_path: Path,
) -> None:
    script = [_error("RATE_LIMIT"), {"text": "never requested"}]
    session, model, loop = make_loop(tmp_path, script, [], config=LoopConfig(retry=NEVER))
    results = []

    async def run() -> None:
        results.append(await loop.run_turn("go"))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await anyio.wait_all_tasks_blocked()
        assert [e.type for e in session.events][-1] == "llm/retry"  # waiting out the backoff
        loop.cancel()
    (result,) = results
    assert result.reason == {"kind": "aborted", "reason": {"kind": "user"}}
    assert len(model.requests) == 1
    assert describe_log(list(session.events)) == [
        "T+1",
        "S+1",
        "U",
        "H",
        "C",
        "llm/retry",
        "S-1",
        "T-1(aborted)",
    ]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b35_cancel_as_the_retry_is_recorded_beats_the_retry(tmp_path: Path) -> None:
    script = [_error("SERVER"), {"text": "never requested"}]
    session, model, loop = make_loop(tmp_path, script, [], config=LoopConfig(retry=FAST))
    session.observe(lambda event: loop.cancel() if event.type == "llm/retry" else None)
    result = await loop.run_turn("go")
    assert result.kind == "aborted"
    assert len(model.requests) == 1
    assert not of_type(list(session.events), "llm/retry-started")
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
async def test_b36_a_failing_retry_record_ends_the_turn_error_without_retrying(
    tmp_path: Path,
) -> None:
    script = [_error("SERVER"), {"text": "never requested"}]
    session, model, loop = make_loop(tmp_path, script, [], config=LoopConfig(retry=FAST))

    def veto_retries(event: Event) -> None:
        if event.type == "llm/retry":
            raise RuntimeError("retry vetoed")

    session.add_validator(veto_retries)
    with pytest.raises(RuntimeError, match="retry vetoed"):
        await loop.run_turn("go")
    assert len(model.requests) == 1
    assert describe_log(list(session.events))[-2:] == ["S-1", "T-1(error)"]
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


@pytest.mark.anyio
async def test_b37_request_hook_llm_error_is_a_turn_error_without_a_request(tmp_path: Path) -> None:
    def request(ctx: StepContext, config: RequestConfig) -> RequestConfig:
        raise LlmError("middleware failed", code="MIDDLEWARE")

    session, model, loop = make_loop(tmp_path, [{"text": "never"}], [])
    loop.hooks = LoopHooks(request=request)
    with pytest.raises(LlmError) as caught:
        await loop.run_turn("go")
    assert caught.value.code == "MIDDLEWARE"
    assert model.requests == []
    events = list(session.events)
    assert not of_type(events, "llm/retry")  # not offered to request-error recovery
    assert describe_log(events) == ["T+1", "S+1", "U", "S-1", "T-1(error)"]
    assert of_type(events, "turn/end")[0].data["reason"] == {
        "kind": "error",
        "error": {"message": "middleware failed", "code": "MIDDLEWARE"},
    }
    assert_log_valid(session)


@pytest.mark.parametrize(
    ("provider", "model_name", "named"), [("", "m", "provider"), ("p", "", "model")]
)
@pytest.mark.anyio
async def test_b38_model_without_provider_or_model_fails_the_turn_without_a_request(
    tmp_path: Path, provider: str, model_name: str, named: str
) -> None:
    model = ScriptedModel([{"text": "never"}])
    model.provider = provider
    model.model = model_name
    session, _model, loop = make_loop(tmp_path, [], [])
    loop.model = model
    with pytest.raises(UsageError, match=f"has no {named}") as caught:
        await loop.run_turn("go")
    assert model.requests == []
    events = list(session.events)
    assert describe_log(events) == ["T+1", "S+1", "U", "S-1", "T-1(error)"]
    error = of_type(events, "turn/end")[0].data["reason"]["error"]
    assert f"has no {named}" in error["message"] and str(caught.value) in error["message"]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b39a_max_tokens_step_ends_the_turn_max_tokens(tmp_path: Path) -> None:
    script = [{"text": "cut sho", "finish": "max-tokens"}, {"text": "next turn"}]
    session, _model, loop = make_loop(tmp_path, script, [], config=LoopConfig(retry=FAST))
    result = await loop.run_turn("go")
    assert result.reason == {"kind": "max-tokens"}
    (message,) = of_type(list(session.events), "assistant/message")
    assert "usage" in message.data
    assert message.data["message"]["content"] == [{"type": "text", "text": "cut sho"}]
    # B39 (d): the next turn is independent.
    assert (await loop.run_turn("again")).kind == "completed"
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b39b_max_tokens_drops_tool_calls_and_still_writes_the_message(
    tmp_path: Path,
) -> None:
    record: list[str] = []
    script = [{"tool_calls": [call("c1")], "finish": "max-tokens"}]
    session, _model, loop = make_loop(
        tmp_path, script, [recorder_tool("p", record)], config=LoopConfig(retry=FAST)
    )
    result = await loop.run_turn("go")
    assert result.reason == {"kind": "max-tokens"}
    events = list(session.events)
    assert describe_log(events) == ["T+1", "S+1", "U", "H", "C", "A", "S-1", "T-1(max-tokens)"]
    (message,) = of_type(events, "assistant/message")
    assert message.data["message"]["content"] == []
    assert message.data["usage"]["outputTokens"] >= 0
    assert message.source_event_seqs == [e.seq for e in of_type(events, "assistant/chunk")]
    assert [m["role"] for m in session.derive_messages()] == ["user"]
    assert record == []
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b39c_turn_stopping_steer_after_max_tokens_runs_a_step_and_the_turn_stays_max_tokens(
    tmp_path: Path,
) -> None:
    steered: list[int] = []

    def turn_stopping(ctx: StepContext) -> None:
        if not steered:
            steered.append(ctx.step)
            ctx.loop.steer("please continue")

    script = [{"text": "cut sho", "finish": "max-tokens"}, {"text": "rest of it"}]
    session, model, loop = make_loop(tmp_path, script, [])
    loop.hooks = LoopHooks(turn_stopping=turn_stopping)
    result = await loop.run_turn("go")
    assert (result.reason, result.steps, result.text) == ({"kind": "max-tokens"}, 2, "rest of it")
    assert steered == [1]
    assert user_texts(model.requests[1].messages)[-1] == "please continue"
    assert_log_valid(session)


@pytest.mark.anyio
async def test_b39_max_tokens_after_a_tool_step_and_a_retry_ends_max_tokens(
    tmp_path: Path,
) -> None:
    record: list[str] = []
    script = [
        tools_step(call("c1")),
        _error("SERVER"),
        {"text": "trunc", "finish": "max-tokens"},
    ]
    session, _model, loop = make_loop(
        tmp_path, script, [recorder_tool("p", record)], config=LoopConfig(retry=FAST)
    )
    result = await loop.run_turn("go")
    assert (result.reason, result.steps) == ({"kind": "max-tokens"}, 2)
    assert [r["step"] for r in _retries(list(session.events))] == [2]
    assert record == ["p-start-c1", "p-end-c1"]
    assert_log_valid(session)
