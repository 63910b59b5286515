"""The llm-retry checker refuses exactly what dsh's own llm-retry invariant checker refuses.

`check_retry_events` stands in for `dsh-llm-retry`'s invariant companion in duraloop's tests
(every `assert_log_valid` runs it). It must accept what dsh writes (the dsh fixture session
with a retry) and what duraloop writes, and refuse each broken rule. The broken logs are a
real duraloop log (one turn, two retries in one step) with one field changed, so each test
breaks one rule and nothing else; the first two are the logs duraloop wrote before issue 9
(a new `retryId` per retry, `mode` `"hook"`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from duraloop.llm import RetryPolicy, ScriptedModel
from duraloop.log import Event, Session
from duraloop.loop import AgentLoop, LoopConfig
from duraloop.store import read_log_file
from duraloop.testing._retry_check import check_retry_events

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "dsh-sessions"
FAST = RetryPolicy(initial_delay_ms=1, max_delay_ms=8, jitter_ratio=0.0)


@pytest.fixture
def log(tmp_path: Path) -> list[Event]:
    """A duraloop log: `T+1 S+1 U H C retry(1) started(1) retry(2) started(2) A S-1 T-1`."""
    failing = [{"error": {"code": code, "message": "failed"}} for code in ("SERVER", "TIMEOUT")]
    session = Session("s")
    model = ScriptedModel([*failing, {"text": "ok"}])
    loop = AgentLoop(session, model=model, cwd=tmp_path, config=LoopConfig(retry=FAST))
    anyio.run(loop.run_turn, "go")
    return list(session.events)


def _seqs(events: list[Event], kind: str) -> list[int]:
    return [e.seq for e in events if e.type == kind]


def _edit(events: list[Event], seq: int, **changes: Any) -> list[Event]:
    """The log with event `seq`'s data updated (a key set to `...` is removed)."""
    data = dict(events[seq].data)
    for key, value in changes.items():
        if value is ...:
            data.pop(key)
        else:
            data[key] = value
    edited = list(events)
    edited[seq] = msgspec.structs.replace(events[seq], data=data)
    return edited


def _refused(events: list[Event], rule: str) -> None:
    with pytest.raises(AssertionError, match=rule):
        check_retry_events(events)


@pytest.mark.skipif(not FIXTURES.is_dir(), reason="../shared fixtures absent")
def test_checker_accepts_the_retry_dsh_itself_wrote() -> None:
    _, events = read_log_file(FIXTURES / "empty-response-retry" / "session.jsonl")
    assert _seqs(events, "llm/retry")
    check_retry_events(events)


def test_checker_accepts_duraloops_two_retry_chain(log: list[Event]) -> None:
    check_retry_events(log)


def test_checker_refuses_a_new_retry_id_for_the_second_retry_of_a_chain(log: list[Event]) -> None:
    second = _seqs(log, "llm/retry")[1]
    _refused(
        _edit(log, second, retryId="fresh"),
        "must preserve retryId across one provider-policy chain",
    )


def test_checker_refuses_mode_hook(log: list[Event]) -> None:
    first = _seqs(log, "llm/retry")[0]
    _refused(
        _edit(log, first, mode="hook", maxRetries=...), "mode must be normal or always, got hook"
    )


def test_checker_ignores_an_origin_field(log: list[Event]) -> None:
    first = _seqs(log, "llm/retry")[0]
    check_retry_events(_edit(log, first, origin="hook"))


def test_checker_refuses_a_gap_in_retry_numbers(log: list[Event]) -> None:
    second = _seqs(log, "llm/retry")[1]
    _refused(_edit(log, second, retry=3), "retry 3 must equal provider policy retry 2")


def test_checker_refuses_a_chain_that_reuses_another_chains_retry_id(log: list[Event]) -> None:
    first, second = _seqs(log, "llm/retry")
    policy_key = '["normal",5,["SERVER"],1,8,0]'
    edited = _edit(log, second, policyKey=policy_key, retry=1)
    started = _seqs(edited, "llm/retry-started")[1]
    edited = _edit(edited, started, retry=1)
    _refused(edited, "is already owned by another chain")


def test_checker_refuses_always_mode_with_max_retries(log: list[Event]) -> None:
    first = _seqs(log, "llm/retry")[0]
    _refused(_edit(log, first, mode="always"), "always mode must omit maxRetries")


def test_checker_refuses_a_retry_past_max_retries(log: list[Event]) -> None:
    second = _seqs(log, "llm/retry")[1]
    _refused(
        _edit(log, second, maxRetries=1), "retry 2 must not exceed a positive safe maxRetries 1"
    )


def test_checker_refuses_a_retry_naming_another_step(log: list[Event]) -> None:
    first = _seqs(log, "llm/retry")[0]
    _refused(_edit(log, first, step=2), "names turn 1/step 2, but the open step is 1/1")


def test_checker_refuses_a_provider_other_than_the_request_headers(log: list[Event]) -> None:
    first = _seqs(log, "llm/retry")[0]
    _refused(_edit(log, first, provider="other"), "provider other does not match")


def test_checker_refuses_a_failure_with_an_out_of_range_status(log: list[Event]) -> None:
    first = _seqs(log, "llm/retry")[0]
    failure = {"message": "failed", "code": "SERVER", "status": 99}
    _refused(_edit(log, first, failure=failure), "failure.status must be an integer")


def test_checker_refuses_a_delay_past_the_timer_limit(log: list[Event]) -> None:
    first = _seqs(log, "llm/retry")[0]
    _refused(_edit(log, first, delayMs=2**31), "delayMs must be a finite number")


def test_checker_refuses_a_started_event_with_no_scheduled_retry(log: list[Event]) -> None:
    started = _seqs(log, "llm/retry-started")[0]
    _refused(_edit(log, started, retry=7), "pairs no prior scheduled attempt")


def test_checker_refuses_a_started_event_repeated(log: list[Event]) -> None:
    first, second = _seqs(log, "llm/retry-started")
    _refused(_edit(log, second, retry=1), "repeats one scheduled attempt|must equal provider")


def test_checker_refuses_a_retry_outside_an_open_step(log: list[Event]) -> None:
    moved = list(log)
    step_start = moved.pop(_seqs(log, "step/start")[0])
    moved.insert(_seqs(log, "llm/retry-started")[0], step_start)  # the first retry precedes it
    _refused(moved, "must be appended inside an open step")
