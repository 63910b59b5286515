"""Model-request retries in the same step and the stream idle timeout.

See docs/loop.md#request-retries.

The behaviour cases B32-B39 are in `tests/conformance/test_loop_model_request_cases.py`; here
are the policy's other rules (no policy, the exhausted and per-step budget, `always` mode,
provider retry-after hints) and the stream idle timeout. A retry is recorded, not hidden:
`llm/retry` before the wait, `llm/retry-started` after it, and the failed attempt's chunks stay
in the log uncited. Each test drives a scripted (or a tiny hand-written) model whose failures
are data, uses millisecond backoffs with no jitter so every recorded delay is exact, and checks
the whole log afterwards. Ordering never rests on a sleep: the idle-timeout model blocks
forever rather than sleeping.
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
from duraloop.testing import assert_log_valid

from ._support import call, make_loop, of_type, recorder_tool, tools_step

FAST = RetryPolicy(initial_delay_ms=1, max_delay_ms=8, jitter_ratio=0.0)
"""Backoffs of 1, 2, 4, 8 ms: exact, because there is no jitter."""


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
async def test_failure_is_recorded_verbatim_in_turn_end(tmp_path: Path) -> None:
    failure = LlmError(
        "provider 401", code="AUTH", status=401, provider_retry_after_ms=2000, request_id="req-7"
    )
    session, _model, loop = _planned_loop(tmp_path, [failure], LoopConfig(retry=FAST))
    with pytest.raises(LlmError):
        await loop.run_turn("go")
    assert session.events[-1].data["reason"]["error"] == {
        "message": "provider 401",
        "code": "AUTH",
        "status": 401,
        "providerRetryAfterMs": 2000,
        "requestId": "req-7",
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
        (1, 1, "always"),
        (2, 2, "always"),
        (3, 4, "always"),
    ]
    assert all("maxRetries" not in r for r in retries)
    assert_log_valid(session)


@pytest.mark.anyio
async def test_retry_budget_is_per_step(tmp_path: Path) -> None:
    policy = RetryPolicy(max_retries=1, initial_delay_ms=1, max_delay_ms=8, jitter_ratio=0.0)
    record: list[str] = []
    script = [
        _error("SERVER"),
        tools_step(call("c1")),
        _error("SERVER"),
        {"text": "done"},
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
        LlmError("slow down", code="RATE_LIMIT", provider_retry_after_ms=17),
        "ok",
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
        LlmError("slow down", code="RATE_LIMIT", provider_retry_after_ms=60_000),
        "ok",
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
        LlmError("slow down", code="RATE_LIMIT", provider_retry_after_ms=60_000),
        "ok",
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
