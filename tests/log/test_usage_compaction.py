"""Usage counts a compaction's summarization request (issue 13; compaction-spec 2.2).

A `compaction/summary` with `llmStreamCall: true` or a `usage` is one model request; its
`usage` adds tokens priced with the summary's own `provider:model`, apart from the step it
may sit in (an overflow recovery compacts inside the failed step).
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance._builders import RAW, SE, SS, TE, TS, A, Spec, U, build, txt
from duraloop.log import Price, UsageFold, usage_of
from duraloop.log.vocabulary import ASSISTANT_CHUNK, USAGE

from ._compaction_builders import CE, CK, CS, CY

PRICES = {
    "test-provider:test-model": Price(input_per_mtok=1.0, output_per_mtok=2.0),
    "summary-provider:summary-model": Price(input_per_mtok=10.0, output_per_mtok=20.0),
}
SUMMARY_USAGE = {"inputTokens": 1000, "outputTokens": 100}


def usage_chunk(turn: int, step: int, **usage: int) -> Spec:
    return RAW(
        ASSISTANT_CHUNK, {"turn": turn, "step": step, "chunk": {"type": USAGE, USAGE: usage}}
    )


def answered(turn: int, step: int) -> tuple[Spec, ...]:
    return (
        SS(turn, step),
        usage_chunk(turn, step, inputTokens=50, outputTokens=5),
        A(turn, step, txt("ok")),
        SE(turn, step),
    )


def compacted(**summary: Any) -> list[Any]:
    """Turn 1 answered, then turn 2 compacting before its step (the summary's fields given)."""
    return build(
        TS(1), U("a"), *answered(1, 1), TE(1),
        TS(2), CS(2), CY([1], **summary), CK(1, 1, [8, 9, 1]), CE(2), *answered(2, 1), TE(2),
    )  # fmt: skip


def test_a_summary_with_usage_is_one_request_priced_with_its_model() -> None:
    usage = usage_of(compacted(llmStreamCall=True, usage=SUMMARY_USAGE), PRICES)
    assert usage.requests == 3
    assert (usage.input_tokens, usage.output_tokens) == (50 + 50 + 1000, 5 + 5 + 100)
    steps = 2 * (50 * 1.0 + 5 * 2.0) * 1e-6
    assert usage.cost == pytest.approx(steps + (1000 * 10.0 + 100 * 20.0) * 1e-6)
    assert usage.unpriced == ()


@pytest.mark.parametrize(
    ("summary", "requests", "tokens"),
    [
        ({"usage": SUMMARY_USAGE}, 3, 1100),
        ({"llmStreamCall": True}, 3, 0),
        ({}, 2, 0),  # a custom summarizer that reports nothing: no request is known
    ],
    ids=["usage-only", "stream-call-only", "neither"],
)
def test_what_makes_a_summary_a_request(
    summary: dict[str, Any], requests: int, tokens: int
) -> None:
    usage = usage_of(compacted(**summary), PRICES)
    assert usage.requests == requests
    assert usage.tokens == 110 + tokens


def test_an_unpriced_summary_model_is_listed() -> None:
    events = compacted(usage=SUMMARY_USAGE, provider="other", model="m")
    usage = usage_of(events, PRICES)
    assert usage.unpriced == ("other:m",)


def test_a_summary_inside_a_failed_step_keeps_the_steps_usage_apart() -> None:
    events = build(
        TS(1), U("a"), SS(1, 1), usage_chunk(1, 1, inputTokens=900, outputTokens=1),
        CS(1), CY([1], llmStreamCall=True, usage=SUMMARY_USAGE), CK(1, 1, [4, 5, 1]), CE(1),
        usage_chunk(1, 1, inputTokens=40, outputTokens=4), A(1, 1, txt("ok")), SE(1, 1), TE(1),
    )  # fmt: skip
    fold = UsageFold(PRICES)
    fold.feed(events)
    assert fold.to_json()["tokens"] == {
        "summary-provider:summary-model": [1000, 100, 0, 0],
        "test-provider:test-model": [940, 5, 0, 0],
    }
    assert fold.usage.requests == 2


def test_the_fold_resumed_from_json_after_a_summary_equals_one_pass() -> None:
    events = compacted(llmStreamCall=True, usage=SUMMARY_USAGE)
    whole = UsageFold(PRICES)
    whole.feed(events)
    cut = 12  # after the compaction, between steps
    first = UsageFold(PRICES)
    first.feed(events[:cut])
    state = first.to_json()
    resumed = UsageFold.from_json(state, PRICES)
    assert resumed.to_json() == state
    resumed.feed(events[cut:])
    assert resumed.usage == whole.usage
    assert resumed.to_json() == whole.to_json()
