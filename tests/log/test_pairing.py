"""The provider pairing check on derived messages (Law 4 as providers see it).

OpenAI and Anthropic both reject a history in which an assistant tool call is not answered
by a tool result, in call order, before the next other message. `check_pairing` is the
request-time guard; these cases pin each way a history can break that rule.
"""

from __future__ import annotations

from typing import Any

import pytest

from duraloop.errors import PairingError
from duraloop.log import (
    DUPLICATE_TOOL_RESULT,
    TOOL_RESULT_ORDER,
    UNEXPECTED_TOOL_RESULT,
    CallGroup,
    Message,
    assistant_message,
    check_pairing,
    tool_result_message,
    user_message,
)


def asks(*call_ids: str, text: str = "") -> Message:
    blocks: list[Any] = [{"type": "text", "text": text}] if text else []
    blocks += [{"type": "tool-call", "id": c, "name": "bash", "arguments": "{}"} for c in call_ids]
    return assistant_message(blocks, provider="p", model="m")


def answer(call_id: str) -> Message:
    return tool_result_message(call_id, [{"type": "text", "text": "ok"}], is_error=False)


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [user_message("hi")],
        [user_message("hi"), asks(text="hello")],
        [user_message("hi"), asks("a"), answer("a"), asks(text="done")],
        [user_message("hi"), asks("a", "b"), answer("a"), answer("b"), user_message("more")],
        [user_message("hi"), asks("a"), answer("a"), asks("b"), answer("b")],
    ],
)
def test_paired_histories_pass(messages: list[Message]) -> None:
    check_pairing(messages)


def test_unanswered_call_at_the_end_is_rejected() -> None:
    with pytest.raises(PairingError, match=r"'b' of message 1 are unanswered at the end"):
        check_pairing([user_message("hi"), asks("a", "b"), answer("a")])


def test_results_out_of_order_are_rejected() -> None:
    with pytest.raises(
        PairingError, match=r"answers tool call 'b', but 'a' from message 1 is next"
    ):
        check_pairing([user_message("hi"), asks("a", "b"), answer("b"), answer("a")])


def test_orphan_result_is_rejected() -> None:
    with pytest.raises(
        PairingError, match=r"message 1 is a tool result for 'ghost' that answers no pending"
    ):
        check_pairing([user_message("hi"), answer("ghost")])


def test_result_after_its_call_was_closed_is_rejected() -> None:
    with pytest.raises(PairingError, match="answers no pending tool call"):
        check_pairing([asks("a"), answer("a"), answer("a")])


def test_user_message_between_call_and_result_is_rejected() -> None:
    with pytest.raises(PairingError, match=r"'a' of message 0 are unanswered before message 1"):
        check_pairing([asks("a"), user_message("interrupting"), answer("a")])


def test_assistant_message_between_call_and_result_is_rejected() -> None:
    with pytest.raises(PairingError, match="unanswered before message 1"):
        check_pairing([asks("a"), asks(text="again"), answer("a")])


# The rule engine the derived-history check and both wire dialect views share.


def test_call_group_answers_calls_in_call_order_and_names_each_broken_rule() -> None:
    group = CallGroup()
    group.open(3)
    assert [group.add_call(c) for c in ("a", "b", "c")] == [True, True, True]
    assert (group.owner, group.pending, group.due) == (3, True, "a")
    assert group.answer("b") == TOOL_RESULT_ORDER  # a rule broken changes nothing
    assert group.answer("x") == UNEXPECTED_TOOL_RESULT
    assert group.answer("a") is None
    assert group.answer("a") == DUPLICATE_TOOL_RESULT
    assert (group.answered, group.missing()) == (1, ["b", "c"])
    assert group.answer("b") is None and group.answer("c") is None
    assert not group.pending and group.missing() == []


def test_call_group_keeps_repeated_and_missing_ids_of_a_foreign_log() -> None:
    group = CallGroup()
    group.open(0)
    assert group.add_call("a") and not group.add_call("a")
    assert group.add_call(None)
    assert group.answer("a") is None and group.answer("a") is None
    assert (group.due, group.answer("a")) == (None, DUPLICATE_TOOL_RESULT)
    group.open(-1)
    assert (group.calls, group.owner, group.pending) == ([], -1, False)
    assert group.answer("a") == UNEXPECTED_TOOL_RESULT
