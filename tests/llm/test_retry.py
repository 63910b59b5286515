"""The retry policy (docs/providers.md#retry-policy, docs/loop.md#request-retries): validation,
policy key, delay bounds.

The delay rule is a formula with edge cases (jitter, the cap, a provider Retry-After on
either side of it, normal versus always), so its bounds are properties checked with
hypothesis over arbitrary valid policies, retry numbers and random draws; validation and
the key are pinned by examples.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duraloop.errors import ConfigError
from duraloop.llm import RetryPolicy
from duraloop.loop import LoopConfig

MAX_TIMER_MS = 2**31 - 1


@st.composite
def policies(draw: st.DrawFn) -> RetryPolicy:
    max_delay_ms = draw(st.integers(1, MAX_TIMER_MS))
    return RetryPolicy(
        mode=draw(st.sampled_from(["normal", "always"])),
        max_retries=draw(st.integers(0, 20)),
        initial_delay_ms=draw(st.integers(1, max_delay_ms)),
        max_delay_ms=max_delay_ms,
        jitter_ratio=draw(st.floats(0, 1)),
    )


draws = st.floats(0, 1, exclude_max=True)


@given(policy=policies(), retry=st.integers(1, 200), draw=draws)
def test_backoff_stays_within_jitter_of_the_capped_exponential(
    policy: RetryPolicy, retry: int, draw: float
) -> None:
    delay = policy.backoff_ms(retry, random=lambda: draw)
    base = min(policy.initial_delay_ms * 2 ** (retry - 1), policy.max_delay_ms)
    assert isinstance(delay, int)
    assert delay <= policy.max_delay_ms
    assert base * (1 - policy.jitter_ratio) - 1 <= delay <= base * (1 + policy.jitter_ratio) + 1
    assert delay >= 0


@given(policy=policies(), retry=st.integers(1, 200))
def test_backoff_without_jitter_is_exact(policy: RetryPolicy, retry: int) -> None:
    exact = RetryPolicy(
        initial_delay_ms=policy.initial_delay_ms,
        max_delay_ms=policy.max_delay_ms,
        jitter_ratio=0.0,
    )
    expected = min(policy.initial_delay_ms * 2 ** (retry - 1), policy.max_delay_ms)
    assert exact.backoff_ms(retry, random=lambda: 0.99) == expected


@given(policy=policies(), retry=st.integers(1, 30), hint=st.integers(1, MAX_TIMER_MS), draw=draws)
def test_provider_retry_after_within_the_cap_is_used_exactly(
    policy: RetryPolicy, retry: int, hint: int, draw: float
) -> None:
    failure = {"message": "slow down", "code": "RATE_LIMIT", "providerRetryAfterMs": hint}
    delay = policy.retry_delay_ms(failure, retry=retry, random=lambda: draw)
    if policy.mode == "normal" and retry > policy.max_retries:
        assert delay is None
    elif hint <= policy.max_delay_ms:
        assert delay == hint
    elif policy.mode == "normal":
        assert delay is None  # never earlier than the provider asked
    else:
        assert delay == policy.backoff_ms(retry, random=lambda: draw)


@given(policy=policies(), retry=st.integers(1, 30), code=st.sampled_from(["AUTH", "SERVER"]))
def test_normal_mode_retries_only_listed_codes_within_the_budget(
    policy: RetryPolicy, retry: int, code: str
) -> None:
    delay = policy.retry_delay_ms({"message": "x", "code": code}, retry=retry, random=lambda: 0.5)
    allowed = policy.mode == "always" or (code == "SERVER" and retry <= policy.max_retries)
    assert (delay is not None) == allowed


def test_defaults_follow_llm_spec() -> None:
    policy = RetryPolicy()
    assert (policy.mode, policy.max_retries) == ("normal", 5)
    assert policy.retryable_codes == {
        "EMPTY_RESPONSE",
        "RATE_LIMIT",
        "SERVER",
        "TIMEOUT",
        "TRANSPORT",
    }
    assert (policy.initial_delay_ms, policy.max_delay_ms, policy.jitter_ratio) == (500, 10_000, 0.1)
    assert [policy.backoff_ms(n, random=lambda: 0.5) for n in range(1, 7)] == [
        500,
        1000,
        2000,
        4000,
        8000,
        10_000,
    ]
    assert LoopConfig().retry == policy


def test_policy_key_is_dsh_canonical_json_array_with_sorted_codes() -> None:
    one = RetryPolicy(retryable_codes=["SERVER", "AUTH"])  # type: ignore[arg-type]
    two = RetryPolicy(retryable_codes=frozenset({"AUTH", "SERVER"}))
    assert one == two and one.policy_key == two.policy_key
    assert one.policy_key == '["normal",5,["AUTH","SERVER"],500,10000,0.1]'
    assert RetryPolicy(max_retries=4).policy_key != RetryPolicy().policy_key
    assert RetryPolicy().to_json() == {
        "mode": "normal",
        "maxRetries": 5,
        "retryableCodes": ["EMPTY_RESPONSE", "RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT"],
        "backoff": {"initialDelayMs": 500, "maxDelayMs": 10_000, "jitterRatio": 0.1},
    }


def test_policy_key_is_byte_identical_to_the_key_dsh_wrote_for_the_same_policy() -> None:
    # From fixtures/dsh-sessions/empty-response-retry: dsh writes integral numbers as `0`.
    policy = RetryPolicy(max_retries=2, initial_delay_ms=1, max_delay_ms=1, jitter_ratio=0.0)
    assert policy.policy_key == (
        '["normal",2,["EMPTY_RESPONSE","RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"],1,1,0]'
    )


def test_always_policy_key_holds_only_the_fields_always_mode_uses() -> None:
    always = RetryPolicy(mode="always", jitter_ratio=1e-7)
    assert always.policy_key == '["always",500,10000,1e-7]'
    assert (
        RetryPolicy(mode="always", max_retries=1).policy_key
        == RetryPolicy(mode="always").policy_key
    )
    assert RetryPolicy(mode="always", jitter_ratio=0.00001).policy_key.endswith(",0.00001]")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"mode": "sometimes"}, "loop.retry.mode"),
        ({"max_retries": -1}, "loop.retry.max_retries"),
        ({"max_retries": 1.5}, "loop.retry.max_retries"),
        ({"max_retries": True}, "loop.retry.max_retries"),
        ({"retryable_codes": []}, "loop.retry.retryable_codes"),
        ({"retryable_codes": ["SERVER", ""]}, "loop.retry.retryable_codes"),
        ({"retryable_codes": ["SERVER", "SERVER"]}, "loop.retry.retryable_codes"),
        ({"retryable_codes": "SERVER"}, "loop.retry.retryable_codes"),
        ({"initial_delay_ms": 0}, "loop.retry.initial_delay_ms"),
        ({"max_delay_ms": 2**31}, "loop.retry.max_delay_ms"),
        ({"initial_delay_ms": 20_000}, "loop.retry.initial_delay_ms"),
        ({"jitter_ratio": 1.5}, "loop.retry.jitter_ratio"),
        ({"jitter_ratio": float("nan")}, "loop.retry.jitter_ratio"),
    ],
)
def test_invalid_field_is_refused_naming_it(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        RetryPolicy(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"retry": {"mode": "normal"}}, "loop.retry"),
        ({"stream_idle_timeout_seconds": 0}, "loop.stream_idle_timeout_seconds"),
        ({"stream_idle_timeout_seconds": float("inf")}, "loop.stream_idle_timeout_seconds"),
    ],
)
def test_loop_config_refuses_bad_retry_options(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        LoopConfig(**kwargs)


def test_loop_config_accepts_no_retries_and_no_idle_timeout() -> None:
    config = LoopConfig(retry=None, stream_idle_timeout_seconds=None)
    assert (config.retry, config.stream_idle_timeout_seconds) == (None, None)
    assert LoopConfig().stream_idle_timeout_seconds == 300


@pytest.mark.parametrize("mode", ["normal", "always"])
def test_a_pairing_violation_is_never_retried_in_any_mode(mode: str) -> None:
    # Regression: always mode retried PAIRING_VIOLATION, so a duraloop pairing bug looped forever.
    policy = RetryPolicy(
        mode=mode,  # type: ignore[arg-type]
        retryable_codes=frozenset({"PAIRING_VIOLATION", "SERVER"}),
    )
    assert policy.retry_delay_ms({"code": "PAIRING_VIOLATION"}, retry=1, random=lambda: 0.5) is None
    assert policy.retry_delay_ms({"code": "SERVER"}, retry=1, random=lambda: 0.5) is not None
