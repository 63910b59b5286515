"""Model-request retries in the same step and the stream idle timeout (loop-spec 5.1, B32-B39).

A retry is recorded, not hidden: `llm/retry` before the wait, `llm/retry-started` after it,
and the failed attempt's chunks stay in the log uncited. Each test drives a scripted (or a
tiny hand-written) model whose failures are data, uses millisecond backoffs with no jitter
so every recorded delay is exact, and checks the whole log afterwards. Ordering never rests
on a sleep: cancellation tests wait with `anyio.wait_all_tasks_blocked()` on a backoff far
longer than any test, and the idle-timeout model blocks forever rather than sleeping.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from duraloop.errors import LlmError
from duraloop.llm import (
    ModelRequest,
    RetryPolicy,
    StreamChunk,
    block_start,
    finish_chunk,
    text_delta,
)
from duraloop.log import Event, Session
from duraloop.loop import AgentLoop, LoopConfig
from duraloop.testing import assert_log_valid, describe_log

from ._support import call, make_loop, of_type, recorder_tool, tools_step

FAST = RetryPolicy(initial_delay_ms=1, max_delay_ms=8, jitter_ratio=0.0)
"""Backoffs of 1, 2, 4, 8 ms: exact, because there is no jitter."""

NEVER = RetryPolicy(initial_delay_ms=600_000, max_delay_ms=600_000, jitter_ratio=0.0)
"""A backoff longer than any test: a test that reaches its end cancelled the wait."""


def _error(code: str, message: str = "failed", text: str = "") -> dict[str, Any]:
    response: dict[str, Any] = {"error": {"code": code, "message": message}}
    if text:
        response["text"] = text
    return response


def _retries(events: list[Event]) -> list[dict[str, Any]]:
    return [event.data for event in of_type(events, "llm/retry")]


def _chunk_seqs_between(events: list[Event], start: int, end: int) -> list[int]:
    return [e.seq for e in events[start:end] if e.type == "assistant/chunk"]


class _PlannedModel:
    """A model whose attempts follow a plan: raise an `LlmError`, hang, or answer text.

    `"hang"` streams a text block start and one delta, then blocks forever (only a
    cancellation ends it); a string answers that text, one word per delta, each after a
    checkpoint (where a pending timeout would fire); an `LlmError` is raised at once.
    """

    provider = "planned"
    model = "planned-1"

    def __init__(self, plan: list[LlmError | str]) -> None:
        self.plan = plan
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        self.requests.append(request)
        step = self.plan[len(self.requests) - 1]
        if isinstance(step, LlmError):
            raise step
        yield block_start(0, "text")
        if step == "hang":
            yield text_delta(0, "half an ans")
            await anyio.sleep_forever()
        for word in step.split(" "):
            await anyio.lowlevel.checkpoint()
            yield text_delta(0, word + " ")
        yield finish_chunk("stop")


def _planned_loop(
    tmp_path: Path, plan: list[LlmError | str], config: LoopConfig
) -> tuple[Session, _PlannedModel, AgentLoop]:
    session = Session("s")
    model = _PlannedModel(plan)
    return session, model, AgentLoop(session, model=model, cwd=tmp_path, config=config)


@pytest.mark.anyio
async def test_b33_retry_stays_in_the_same_turn_and_step(tmp_path: Path) -> None:
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
        "T+1", "S+1", "U", "H", "C",
        "llm/retry", "llm/retry-started", "llm/retry", "llm/retry-started",
        "A", "S-1", "T-1(completed)",
    ]
    retries = _retries(events)
    assert [(r["turn"], r["step"], r["retry"], r["delayMs"]) for r in retries] == [
        (1, 1, 1, 1), (1, 1, 2, 2),
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


@pytest.mark.anyio
async def test_b34_retry_discards_the_failed_attempt(tmp_path: Path) -> None:
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
        "T+1", "S+1", "U", "H", "C", "llm/retry", "S-1", "T-1(aborted)",
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
        "kind": "error", "error": {"message": "provider 401", "code": "AUTH"},
    }
    assert_log_valid(session)


@pytest.mark.anyio
async def test_failure_is_recorded_verbatim_in_turn_end(tmp_path: Path) -> None:
    failure = LlmError(
        "provider 401", code="AUTH", status=401, provider_retry_after_ms=2000, request_id="req-7"
    )
    session, _model, loop = _planned_loop(tmp_path, [failure], LoopConfig(retry=FAST))
    with pytest.raises(LlmError):
        await loop.run_turn("go")
    assert session.events[-1].data["reason"]["error"] == {
        "message": "provider 401", "code": "AUTH", "status": 401,
        "providerRetryAfterMs": 2000, "requestId": "req-7",
    }
    assert_log_valid(session)


@pytest.mark.anyio
async def test_no_retry_policy_ends_the_turn_error_at_once(tmp_path: Path) -> None:
    script = [_error("RATE_LIMIT"), {"text": "never requested"}]
    session, model, loop = make_loop(tmp_path, script, [], config=LoopConfig(retry=None))
    with pytest.raises(LlmError, match="RATE_LIMIT"):
        await loop.run_turn("go")
    assert len(model.requests) == 1
    assert not _retries(list(session.events))
    assert_log_valid(session)


@pytest.mark.anyio
async def test_exhausted_budget_makes_one_plus_max_retries_requests_then_errors(
    tmp_path: Path,
) -> None:
    policy = RetryPolicy(max_retries=2, initial_delay_ms=1, max_delay_ms=8, jitter_ratio=0.0)
    script = [_error("RATE_LIMIT", f"slow down {n}") for n in (1, 2, 3)]
    session, model, loop = make_loop(tmp_path, script, [], config=LoopConfig(retry=policy))
    with pytest.raises(LlmError, match="slow down 3"):
        await loop.run_turn("go")
    assert len(model.requests) == 3
    events = list(session.events)
    assert [(r["retry"], r["maxRetries"]) for r in _retries(events)] == [(1, 2), (2, 2)]
    assert events[-1].data["reason"]["error"] == {"message": "slow down 3", "code": "RATE_LIMIT"}
    assert_log_valid(session)


@pytest.mark.anyio
async def test_always_mode_retries_any_code_without_a_budget(tmp_path: Path) -> None:
    policy = RetryPolicy(
        mode="always", max_retries=1, initial_delay_ms=1, max_delay_ms=8, jitter_ratio=0.0
    )
    script = [_error("AUTH"), _error("INVALID_REQUEST"), _error("AUTH"), {"text": "finally"}]
    session, model, loop = make_loop(tmp_path, script, [], config=LoopConfig(retry=policy))
    result = await loop.run_turn("go")
    assert (result.kind, len(model.requests)) == ("completed", 4)
    retries = _retries(list(session.events))
    assert [(r["retry"], r["delayMs"], r["mode"]) for r in retries] == [
        (1, 1, "always"), (2, 2, "always"), (3, 4, "always"),
    ]
    assert all("maxRetries" not in r for r in retries)
    assert_log_valid(session)


@pytest.mark.anyio
async def test_retry_budget_is_per_step(tmp_path: Path) -> None:
    policy = RetryPolicy(max_retries=1, initial_delay_ms=1, max_delay_ms=8, jitter_ratio=0.0)
    record: list[str] = []
    script = [
        _error("SERVER"), tools_step(call("c1")),
        _error("SERVER"), {"text": "done"},
    ]
    session, model, loop = make_loop(
        tmp_path, script, [recorder_tool("p", record)], config=LoopConfig(retry=policy)
    )
    result = await loop.run_turn("go")
    assert (result.kind, result.steps, len(model.requests)) == ("completed", 2, 4)
    retries = _retries(list(session.events))
    assert [(r["step"], r["retry"]) for r in retries] == [(1, 1), (2, 1)]
    assert record == ["p-start-c1", "p-end-c1"]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_provider_retry_after_within_the_cap_is_used_exactly(tmp_path: Path) -> None:
    policy = RetryPolicy(initial_delay_ms=1, max_delay_ms=30, jitter_ratio=1.0)
    plan: list[LlmError | str] = [
        LlmError("slow down", code="RATE_LIMIT", provider_retry_after_ms=17), "ok",
    ]
    session, model, loop = _planned_loop(tmp_path, plan, LoopConfig(retry=policy))
    result = await loop.run_turn("go")
    assert (result.kind, len(model.requests)) == ("completed", 2)
    (retry,) = _retries(list(session.events))
    assert retry["delayMs"] == 17
    assert retry["failure"]["providerRetryAfterMs"] == 17
    assert_log_valid(session)


@pytest.mark.anyio
async def test_provider_retry_after_above_the_cap_is_not_retried_early(tmp_path: Path) -> None:
    policy = RetryPolicy(initial_delay_ms=1, max_delay_ms=30, jitter_ratio=0.0)
    plan: list[LlmError | str] = [
        LlmError("slow down", code="RATE_LIMIT", provider_retry_after_ms=60_000), "ok",
    ]
    session, model, loop = _planned_loop(tmp_path, plan, LoopConfig(retry=policy))
    with pytest.raises(LlmError, match="slow down"):
        await loop.run_turn("go")
    assert len(model.requests) == 1
    assert session.events[-1].data["reason"]["error"]["providerRetryAfterMs"] == 60_000
    assert_log_valid(session)


@pytest.mark.anyio
async def test_always_mode_falls_back_to_backoff_above_the_cap(tmp_path: Path) -> None:
    policy = RetryPolicy(mode="always", initial_delay_ms=3, max_delay_ms=30, jitter_ratio=0.0)
    plan: list[LlmError | str] = [
        LlmError("slow down", code="RATE_LIMIT", provider_retry_after_ms=60_000), "ok",
    ]
    session, _model, loop = _planned_loop(tmp_path, plan, LoopConfig(retry=policy))
    assert (await loop.run_turn("go")).kind == "completed"
    assert [r["delayMs"] for r in _retries(list(session.events))] == [3]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_idle_stream_times_out_and_is_retried(tmp_path: Path) -> None:
    config = LoopConfig(retry=FAST, stream_idle_timeout_seconds=0.5)
    session, model, loop = _planned_loop(tmp_path, ["hang", "all of it"], config)
    result = await loop.run_turn("go")
    assert (result.kind, result.text, len(model.requests)) == ("completed", "all of it ", 2)
    events = list(session.events)
    (retry,) = _retries(events)
    assert retry["failure"]["code"] == "TIMEOUT"
    assert "stream_idle_timeout_seconds" in retry["failure"]["message"]
    # The hung attempt's chunks, ending in the TIMEOUT finish, stay in the log uncited.
    failed = [e.data["chunk"] for e in events[: retry_seq(events)] if e.type == "assistant/chunk"]
    assert [c["type"] for c in failed] == ["block-start", "text-delta", "finish"]
    assert failed[-1]["reason"] == {"kind": "error", "failure": retry["failure"]}
    (message,) = of_type(events, "assistant/message")
    started = of_type(events, "llm/retry-started")[0]
    assert message.source_event_seqs == _chunk_seqs_between(events, started.seq, message.seq)
    assert_log_valid(session)


def retry_seq(events: list[Event]) -> int:
    """The seq of the first `llm/retry`."""
    return of_type(events, "llm/retry")[0].seq


@pytest.mark.anyio
async def test_idle_timeout_without_retries_ends_the_turn_error_timeout(tmp_path: Path) -> None:
    config = LoopConfig(retry=None, stream_idle_timeout_seconds=0.05)
    session, _model, loop = _planned_loop(tmp_path, ["hang"], config)
    with pytest.raises(LlmError) as caught:
        await loop.run_turn("go")
    assert (caught.value.code, caught.value.retryable) == ("TIMEOUT", True)
    assert not of_type(list(session.events), "assistant/message")
    assert_log_valid(session)


@pytest.mark.anyio
async def test_idle_timeout_does_not_count_the_loops_time_between_chunks(tmp_path: Path) -> None:
    """A slow consumer (an observer that blocks the loop on each chunk) is not a slow model."""
    config = LoopConfig(retry=None, stream_idle_timeout_seconds=0.3)
    session, model, loop = _planned_loop(tmp_path, ["one two three"], config)
    blocked: list[int] = []

    def slow_observer(event: Event) -> None:
        if event.type == "assistant/chunk" and len(blocked) < 2:
            blocked.append(event.seq)
            time.sleep(0.4)  # simulates work: the loop itself is busy between chunks

    session.observe(slow_observer)
    result = await loop.run_turn("go")
    assert (result.kind, result.text, len(model.requests)) == ("completed", "one two three ", 1)
    assert len(blocked) == 2
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


