"""The pre-send pairing check on provider payloads.

See docs/providers.md#chat-completions-pairing, #anthropic-pairing; Law 4 of
docs/architecture.md#laws.

A provider rejects an unpaired history with a 400 no retry can fix, so every adapter checks
the exact wire `messages` before sending. Hypothesis builds payloads from random valid
call/result structures (0-4 parallel calls per assistant message, error results, text
after results, string or block content) in both dialects: each must pass. Then one mutation
is applied — drop a result, swap two results, insert a message or a text block between,
duplicate a result, add an orphan result, corrupt an id — and the check must name the rule,
the call id and the message index the mutation broke. The expected values follow from the
mutation alone, not from running the checker. Hand-written cases pin the quoted provider
texts and the failure mapping (`PAIRING_VIOLATION`, never retried).
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from duraloop.errors import PairingError, WirePairingError
from duraloop.llm import (
    ModelRequest,
    StreamChunk,
    check_anthropic_messages,
    check_chat_completions_messages,
    failure_from_exception,
    stream_chunks,
)
from duraloop.llm._retry import RetryPolicy
from duraloop.log import (
    ASSISTANT_CONTENT_MISSING,
    DUPLICATE_TOOL_CALL_ID,
    DUPLICATE_TOOL_RESULT,
    INVALID_TOOL_CALL_ID,
    TOOL_RESULT_ORDER,
    TOOL_RESULTS_NOT_FIRST,
    UNANSWERED_TOOL_CALL,
    UNEXPECTED_TOOL_RESULT,
)

JsonMessage = dict[str, Any]


@dataclass(frozen=True)
class Step:
    """One assistant message of the abstract conversation."""

    call_ids: tuple[str, ...]
    errors: tuple[bool, ...]
    text_after: bool  # a user text block/message after the results (steering)


@dataclass(frozen=True)
class Group:
    """Where one assistant message's calls and results sit in a wire payload."""

    assistant: int
    call_ids: tuple[str, ...]


ID_PREFIXES = ("call_", "call_00_", "toolu_01", "x-")
"""OpenAI, DeepSeek and Anthropic id shapes, and a short one."""


@st.composite
def conversations(draw: st.DrawFn) -> list[Step]:
    sizes = draw(st.lists(st.integers(0, 4), min_size=1, max_size=6))
    numbers = draw(
        st.lists(st.integers(0, 10**9), min_size=sum(sizes), max_size=sum(sizes), unique=True)
    )
    prefixes = draw(
        st.lists(st.sampled_from(ID_PREFIXES), min_size=len(numbers), max_size=len(numbers))
    )
    ids = [f"{prefix}{number}" for prefix, number in zip(prefixes, numbers, strict=True)]
    steps: list[Step] = []
    for size in sizes:
        call_ids, ids = tuple(ids[:size]), ids[size:]
        errors = tuple(draw(st.lists(st.booleans(), min_size=size, max_size=size)))
        steps.append(Step(call_ids, errors, draw(st.booleans())))
    return steps


def chat_payload(steps: Sequence[Step]) -> tuple[list[JsonMessage], list[Group]]:
    messages: list[JsonMessage] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "go"},
    ]
    groups: list[Group] = []
    for step in steps:
        assistant: JsonMessage = {"role": "assistant", "content": ""}
        if step.call_ids:
            assistant["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": "read", "arguments": "{}"}}
                for i in step.call_ids
            ]
            groups.append(Group(len(messages), step.call_ids))
        else:
            assistant["content"] = "no tools"
        messages.append(assistant)
        for call_id, error in zip(step.call_ids, step.errors, strict=True):
            text = "Error: boom" if error else "ok"
            messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
        if step.text_after or not step.call_ids:
            messages.append({"role": "user", "content": "more"})
    return messages, groups


def anthropic_payload(steps: Sequence[Step]) -> tuple[list[JsonMessage], list[Group]]:
    messages: list[JsonMessage] = [{"role": "user", "content": "go"}]
    groups: list[Group] = []
    for step in steps:
        blocks: list[JsonMessage] = [{"type": "text", "text": "thinking aloud"}]
        blocks += [
            {"type": "tool_use", "id": i, "name": "read", "input": {}} for i in step.call_ids
        ]
        if step.call_ids:
            groups.append(Group(len(messages), step.call_ids))
        messages.append({"role": "assistant", "content": blocks})
        answer: list[JsonMessage] = [
            {"type": "tool_result", "tool_use_id": i, "content": "ok", "is_error": error}
            for i, error in zip(step.call_ids, step.errors, strict=True)
        ]
        if step.text_after or not step.call_ids:
            answer.append({"type": "text", "text": "more"})
        messages.append({"role": "user", "content": answer})
    return messages, groups


def caught(check: Any, messages: list[JsonMessage], **kwargs: Any) -> WirePairingError:
    with pytest.raises(WirePairingError) as info:
        check(messages, **kwargs)
    return info.value


def chat_check(messages: list[JsonMessage]) -> WirePairingError:
    return caught(check_chat_completions_messages, messages, provider="openai")


def anthropic_check(messages: list[JsonMessage]) -> WirePairingError:
    return caught(check_anthropic_messages, messages)


def pick(data: st.DataObject, groups: list[Group], min_calls: int = 1) -> tuple[Group, int] | None:
    usable = [g for g in groups if len(g.call_ids) >= min_calls]
    if not usable:
        return None
    group = data.draw(st.sampled_from(usable))
    return group, data.draw(st.integers(0, len(group.call_ids) - min_calls))


# -- valid payloads pass ----------------------------------------------------------------------


@given(conversations(), st.sampled_from(["openai", "deepseek"]))
def test_chat_completions_payloads_from_valid_structures_pass(
    steps: list[Step], provider: str
) -> None:
    check_chat_completions_messages(chat_payload(steps)[0], provider=provider)


@given(conversations())
def test_anthropic_payloads_from_valid_structures_pass(steps: list[Step]) -> None:
    check_anthropic_messages(anthropic_payload(steps)[0])


# -- Chat Completions mutations ---------------------------------------------------------------


@given(conversations(), st.data())
def test_chat_dropped_result_names_the_unanswered_call(
    steps: list[Step], data: st.DataObject
) -> None:
    messages, groups = chat_payload(steps)
    picked = pick(data, groups)
    assume(picked is not None)
    assert picked is not None
    group, j = picked
    del messages[group.assistant + 1 + j]
    error = chat_check(messages)
    assert error.call_id == group.call_ids[j]
    if j == len(group.call_ids) - 1:
        assert (error.rule, error.message_index) == (UNANSWERED_TOOL_CALL, group.assistant)
    else:
        assert (error.rule, error.message_index) == (TOOL_RESULT_ORDER, group.assistant + 1 + j)


@given(conversations(), st.data())
def test_chat_swapped_results_name_the_call_due_first(
    steps: list[Step], data: st.DataObject
) -> None:
    messages, groups = chat_payload(steps)
    picked = pick(data, groups, min_calls=2)
    assume(picked is not None)
    assert picked is not None
    group, j = picked
    at = group.assistant + 1 + j
    messages[at], messages[at + 1] = messages[at + 1], messages[at]
    error = chat_check(messages)
    assert (error.rule, error.call_id, error.message_index) == (
        TOOL_RESULT_ORDER,
        group.call_ids[j],
        at,
    )


@given(conversations(), st.data(), st.sampled_from(["user", "assistant", "system"]))
def test_chat_message_between_results_names_the_next_unanswered_call(
    steps: list[Step], data: st.DataObject, role: str
) -> None:
    messages, groups = chat_payload(steps)
    picked = pick(data, groups)
    assume(picked is not None)
    assert picked is not None
    group, j = picked
    messages.insert(group.assistant + 1 + j, {"role": role, "content": "between"})
    error = chat_check(messages)
    assert (error.rule, error.call_id, error.message_index) == (
        UNANSWERED_TOOL_CALL,
        group.call_ids[j],
        group.assistant,
    )


@given(conversations(), st.data())
def test_chat_duplicated_result_is_caught(steps: list[Step], data: st.DataObject) -> None:
    messages, groups = chat_payload(steps)
    picked = pick(data, groups)
    assume(picked is not None)
    assert picked is not None
    group, j = picked
    at = group.assistant + 1 + j
    messages.insert(at + 1, dict(messages[at]))
    error = chat_check(messages)
    assert (error.rule, error.call_id, error.message_index) == (
        DUPLICATE_TOOL_RESULT,
        group.call_ids[j],
        at + 1,
    )


@given(conversations(), st.data())
def test_chat_orphan_result_is_caught_where_it_sits(steps: list[Step], data: st.DataObject) -> None:
    messages, _ = chat_payload(steps)
    at = data.draw(st.integers(0, len(messages)))
    messages.insert(at, {"role": "tool", "tool_call_id": "orphan!", "content": "x"})
    error = chat_check(messages)
    assert (error.rule, error.call_id, error.message_index) == (
        UNEXPECTED_TOOL_RESULT,
        "orphan!",
        at,
    )


@given(conversations(), st.data(), st.sampled_from(["call|1", "a" * 41, "call 1", ""]))
def test_chat_invalid_call_id_is_caught(steps: list[Step], data: st.DataObject, bad: str) -> None:
    messages, groups = chat_payload(steps)
    picked = pick(data, groups)
    assume(picked is not None)
    assert picked is not None
    group, j = picked
    messages[group.assistant]["tool_calls"][j]["id"] = bad
    messages[group.assistant + 1 + j]["tool_call_id"] = bad
    error = chat_check(messages)
    assert (error.rule, error.call_id, error.message_index) == (
        INVALID_TOOL_CALL_ID,
        bad,
        group.assistant,
    )


# -- Anthropic mutations ----------------------------------------------------------------------


@given(conversations(), st.data())
def test_anthropic_dropped_result_names_the_unanswered_call(
    steps: list[Step], data: st.DataObject
) -> None:
    messages, groups = anthropic_payload(steps)
    picked = pick(data, groups)
    assume(picked is not None)
    assert picked is not None
    group, j = picked
    del messages[group.assistant + 1]["content"][j]
    error = anthropic_check(messages)
    assert error.call_id == group.call_ids[j]
    if j == len(group.call_ids) - 1:
        assert (error.rule, error.message_index) == (UNANSWERED_TOOL_CALL, group.assistant)
    else:
        assert (error.rule, error.message_index) == (TOOL_RESULT_ORDER, group.assistant + 1)


@given(conversations(), st.data())
def test_anthropic_swapped_results_name_the_call_due_first(
    steps: list[Step], data: st.DataObject
) -> None:
    messages, groups = anthropic_payload(steps)
    picked = pick(data, groups, min_calls=2)
    assume(picked is not None)
    assert picked is not None
    group, j = picked
    blocks = messages[group.assistant + 1]["content"]
    blocks[j], blocks[j + 1] = blocks[j + 1], blocks[j]
    error = anthropic_check(messages)
    assert (error.rule, error.call_id, error.message_index) == (
        TOOL_RESULT_ORDER,
        group.call_ids[j],
        group.assistant + 1,
    )


@given(conversations(), st.data())
def test_anthropic_text_before_a_result_is_caught(steps: list[Step], data: st.DataObject) -> None:
    messages, groups = anthropic_payload(steps)
    picked = pick(data, groups)
    assume(picked is not None)
    assert picked is not None
    group, j = picked
    messages[group.assistant + 1]["content"].insert(j, {"type": "text", "text": "between"})
    error = anthropic_check(messages)
    assert (error.rule, error.call_id, error.message_index) == (
        TOOL_RESULTS_NOT_FIRST,
        group.call_ids[j],
        group.assistant + 1,
    )
    assert f"messages.{group.assistant + 1}: Did not find" in str(error)


@given(conversations(), st.data(), st.sampled_from(["user", "assistant"]))
def test_anthropic_message_between_names_the_first_call(
    steps: list[Step], data: st.DataObject, role: str
) -> None:
    messages, groups = anthropic_payload(steps)
    picked = pick(data, groups)
    assume(picked is not None)
    assert picked is not None
    group, _ = picked
    messages.insert(group.assistant + 1, {"role": role, "content": "between"})
    error = anthropic_check(messages)
    assert (error.rule, error.call_id, error.message_index) == (
        UNANSWERED_TOOL_CALL,
        group.call_ids[0],
        group.assistant,
    )
    assert f"messages.{group.assistant}: `tool_use` ids were found without" in str(error)


@given(conversations(), st.data())
def test_anthropic_duplicated_result_is_caught(steps: list[Step], data: st.DataObject) -> None:
    messages, groups = anthropic_payload(steps)
    picked = pick(data, groups)
    assume(picked is not None)
    assert picked is not None
    group, j = picked
    blocks = messages[group.assistant + 1]["content"]
    blocks.insert(j + 1, dict(blocks[j]))
    error = anthropic_check(messages)
    assert (error.rule, error.call_id, error.message_index) == (
        DUPLICATE_TOOL_RESULT,
        group.call_ids[j],
        group.assistant + 1,
    )


@given(conversations(), st.data())
def test_anthropic_orphan_result_is_caught_where_it_sits(
    steps: list[Step], data: st.DataObject
) -> None:
    messages, _ = anthropic_payload(steps)
    index = data.draw(st.integers(0, len(messages) - 1))
    content = messages[index]["content"]
    if isinstance(content, str):
        content = messages[index]["content"] = [{"type": "text", "text": content}]
    at = data.draw(st.integers(0, len(content)))
    content.insert(at, {"type": "tool_result", "tool_use_id": "toolu_orphan", "content": "x"})
    error = anthropic_check(messages)
    assert (error.rule, error.call_id, error.message_index) == (
        UNEXPECTED_TOOL_RESULT,
        "toolu_orphan",
        index,
    )


@given(conversations(), st.data(), st.sampled_from(["call.1", "a" * 65, "toolu 1", "call|1"]))
def test_anthropic_invalid_tool_use_id_is_caught(
    steps: list[Step], data: st.DataObject, bad: str
) -> None:
    messages, groups = anthropic_payload(steps)
    picked = pick(data, groups)
    assume(picked is not None)
    assert picked is not None
    group, j = picked
    messages[group.assistant]["content"][1 + j]["id"] = bad
    messages[group.assistant + 1]["content"][j]["tool_use_id"] = bad
    error = anthropic_check(messages)
    assert (error.rule, error.call_id, error.message_index) == (
        INVALID_TOOL_CALL_ID,
        bad,
        group.assistant,
    )


# -- hand-written cases: texts and dialect details -------------------------------------------

CALLS: list[JsonMessage] = [
    {"role": "user", "content": "go"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "call_b", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        ],
    },
]


def test_openai_unanswered_call_quotes_openai_text_with_every_missing_id() -> None:
    error = chat_check(copy.deepcopy(CALLS))
    assert (error.rule, error.call_id, error.message_index, error.provider) == (
        UNANSWERED_TOOL_CALL,
        "call_a",
        1,
        "openai",
    )
    assert "duraloop bug" in str(error)
    assert "The following tool_call_ids did not have response messages: call_a, call_b" in str(
        error
    )


def test_deepseek_unanswered_call_quotes_deepseek_text() -> None:
    messages = [*copy.deepcopy(CALLS), {"role": "tool", "tool_call_id": "call_a", "content": "x"}]
    error = caught(check_chat_completions_messages, messages, provider="deepseek")
    assert (error.call_id, error.provider) == ("call_b", "deepseek")
    assert "(insufficient tool messages following tool_calls message)" in str(error)


def test_orphan_tool_message_quotes_each_provider_spelling() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {"role": "tool", "tool_call_id": "x", "content": ""},
    ]
    openai = caught(check_chat_completions_messages, messages, provider="openai")
    assert "must be a response to a preceeding message with 'tool_calls'" in str(openai)
    deepseek = caught(check_chat_completions_messages, messages, provider="deepseek")
    assert "Messages with role 'tool' must be a response to a preceding message" in str(deepseek)


@pytest.mark.parametrize("content", [None, [{"type": "text", "text": "hi"}]])
def test_deepseek_assistant_without_string_content_or_calls_is_refused(content: Any) -> None:
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": content}]
    error = caught(check_chat_completions_messages, messages, provider="deepseek")
    assert (error.rule, error.call_id, error.message_index) == (ASSISTANT_CONTENT_MISSING, "", 1)
    assert "content or tool_calls must be set" in str(error)
    assert "no tool call" in str(error)
    check_chat_completions_messages(messages, provider="openai")  # DeepSeek's rule only


def test_deepseek_null_content_is_allowed_with_tool_calls() -> None:
    messages = copy.deepcopy(CALLS)
    messages[1]["content"] = None
    messages += [
        {"role": "tool", "tool_call_id": "call_a", "content": "x"},
        {"role": "tool", "tool_call_id": "call_b", "content": "y"},
    ]
    check_chat_completions_messages(messages, provider="deepseek")


def test_chat_duplicate_call_ids_in_one_message_are_refused() -> None:
    messages = copy.deepcopy(CALLS)
    messages[1]["tool_calls"][1]["id"] = "call_a"
    error = chat_check(messages)
    assert (error.rule, error.call_id, error.message_index) == (DUPLICATE_TOOL_CALL_ID, "call_a", 1)


def test_chat_tool_message_without_an_id_is_an_unexpected_result() -> None:
    messages = [*copy.deepcopy(CALLS), {"role": "tool", "content": "x"}]
    error = chat_check(messages)
    assert (error.rule, error.call_id, error.message_index) == (UNEXPECTED_TOOL_RESULT, "", 2)


USES: list[JsonMessage] = [
    {"role": "user", "content": "go"},
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {}},
            {"type": "tool_use", "id": "toolu_b", "name": "f", "input": {}},
        ],
    },
]


def test_anthropic_calls_in_the_last_message_are_unanswered() -> None:
    error = anthropic_check(copy.deepcopy(USES))
    assert (error.rule, error.call_id, error.message_index) == (UNANSWERED_TOOL_CALL, "toolu_a", 1)
    assert (
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately "
        "after: toolu_a, toolu_b." in str(error)
    )


def test_anthropic_string_content_after_calls_is_unanswered() -> None:
    error = anthropic_check([*copy.deepcopy(USES), {"role": "user", "content": "ok"}])
    assert (error.rule, error.call_id, error.message_index) == (UNANSWERED_TOOL_CALL, "toolu_a", 1)


def test_anthropic_results_in_an_assistant_message_do_not_answer() -> None:
    results = [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "r"},
        {"type": "tool_result", "tool_use_id": "toolu_b", "content": "r"},
    ]
    error = anthropic_check([*copy.deepcopy(USES), {"role": "assistant", "content": results}])
    assert (error.rule, error.call_id, error.message_index) == (UNANSWERED_TOOL_CALL, "toolu_a", 1)
    assert "role 'assistant'" in str(error)


def test_anthropic_unexpected_result_quotes_the_block_position() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "x"},
                {"type": "tool_result", "tool_use_id": "toolu_z", "content": "r"},
            ],
        },
    ]
    error = anthropic_check(messages)
    assert (error.rule, error.call_id, error.message_index) == (
        UNEXPECTED_TOOL_RESULT,
        "toolu_z",
        2,
    )
    assert (
        "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: "
        "toolu_z." in str(error)
    )


def test_anthropic_result_repeated_after_text_is_a_duplicate() -> None:
    result = {"type": "tool_result", "tool_use_id": "toolu_a", "content": "r"}
    other = {"type": "tool_result", "tool_use_id": "toolu_b", "content": "r"}
    messages = [
        *copy.deepcopy(USES),
        {"role": "user", "content": [result, other, {"type": "text", "text": "t"}, result]},
    ]
    error = anthropic_check(messages)
    assert (error.rule, error.call_id, error.message_index) == (DUPLICATE_TOOL_RESULT, "toolu_a", 2)


def test_anthropic_duplicate_tool_use_ids_are_refused() -> None:
    messages = copy.deepcopy(USES)
    messages[1]["content"][1]["id"] = "toolu_a"
    error = anthropic_check(messages)
    assert (error.rule, error.call_id, error.message_index) == (
        DUPLICATE_TOOL_CALL_ID,
        "toolu_a",
        1,
    )


def test_wire_pairing_error_is_a_pairing_error_with_its_facts() -> None:
    error = anthropic_check(copy.deepcopy(USES))
    assert isinstance(error, PairingError)
    assert error.provider == "anthropic"
    assert error.provider_error is not None
    assert error.provider_error in str(error)
    assert "messages[1]" in str(error)


# -- failure mapping --------------------------------------------------------------------------


def test_failure_from_wire_pairing_error_is_a_pairing_violation_that_is_never_retried() -> None:
    error = chat_check(copy.deepcopy(CALLS))
    failure = failure_from_exception(error)
    assert failure == {"message": str(error), "code": "PAIRING_VIOLATION"}
    assert RetryPolicy().retry_delay_ms(failure, retry=1, random=lambda: 0.5) is None


class _RefusingModel:
    """An adapter whose pre-send check fails: it raises before yielding anything."""

    provider = "openai"
    model = "m"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        check_chat_completions_messages(copy.deepcopy(CALLS), provider=self.provider)
        yield {"type": "usage", "usage": {"inputTokens": 0, "outputTokens": 0}}  # never reached


@pytest.mark.anyio
async def test_stream_chunks_turns_a_wire_pairing_error_into_an_error_finish() -> None:
    chunks = [c async for c in stream_chunks(_RefusingModel(), ModelRequest(messages=[]))]
    assert len(chunks) == 1
    finish = chunks[0]
    assert finish["type"] == "finish"
    assert finish["reason"]["kind"] == "error"
    assert finish["reason"]["failure"]["code"] == "PAIRING_VIOLATION"
    assert "call_a" in finish["reason"]["failure"]["message"]
