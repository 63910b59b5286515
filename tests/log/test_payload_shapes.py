"""Load validation checks the payload shapes the adapters and the loop read (issue 9, item 3).

A good log with one key renamed (two flipped bytes) used to pass `check` and every load, then
crash the adapter's encoder with a KeyError on the next `run`: the session was wedged. Each
test below renames one required key in the smallest answered log and pins that `check_log`
names the seq and the field. Unknown block types, unknown reason kinds and extra keys stay
tolerated (dsh's vocabulary is merge-extensible).
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance._builders import SE, SS, TC, TE, TR, TS, A, U, build, call
from duraloop.errors import EventRejectedError
from duraloop.log import Event, Session, check_log


def answered_log(**renamed: str) -> list[Event]:
    """The smallest answered log: a prompt, one tool call, its result, a completed turn.

    Args:
        renamed: `old="new"` key renames: `text` (the prompt's text block), `arguments` (the
            tool-call block), `isError` (the tool-result block), `reason` (the turn/end).
    """
    log = build(
        TS(1),
        U("read it"),
        SS(1, 1),
        A(1, 1, call("c1")),
        TC(1, 1, "c1"),
        TR(1, 1, "c1"),
        SE(1, 1),
        TE(1),
    )
    for old, new in renamed.items():
        target: dict[str, Any] = {
            "text": log[1].data["content"][0],
            "arguments": log[3].data["message"]["content"][0],
            "isError": log[5].data["message"]["content"][0],
            "reason": log[7].data,
        }[old]
        target[new] = target.pop(old)
    return log


def test_the_answered_log_is_valid_before_any_rename() -> None:
    assert check_log("s", answered_log()).problems == []


def test_a_text_block_without_text_is_invalid_naming_seq_and_field() -> None:
    assert check_log("s", answered_log(text="texu")).problems == [
        "user/message at seq 1: text block content[0] needs 'text' as a string"
    ]


def test_a_turn_end_without_a_reason_is_invalid_naming_seq_and_field() -> None:
    assert check_log("s", answered_log(reason="reasom")).problems == [
        "turn/end at seq 7 needs a reason object with a string kind"
    ]


def test_a_tool_result_block_without_is_error_is_invalid_naming_seq_and_field() -> None:
    assert check_log("s", answered_log(isError="isErrox")).problems == [
        "tool/result at seq 5: its tool-result block needs a boolean isError"
    ]


def test_a_tool_call_block_without_arguments_is_invalid_naming_seq_and_field() -> None:
    assert check_log("s", answered_log(arguments="argumentz")).problems == [
        "assistant/message at seq 3: tool-call block content[0] needs 'arguments' as a string"
    ]


def test_a_text_block_nested_in_a_tool_result_needs_its_text_too() -> None:
    log = answered_log()
    log[5].data["message"]["content"][0]["content"] = [{"type": "text", "txt": "ok"}]
    assert check_log("s", log).problems == [
        "tool/result at seq 5: text block content[0].content[0] needs 'text' as a string"
    ]


def test_a_reasoning_block_with_non_string_text_is_invalid() -> None:
    log = answered_log()
    log[3].data["message"]["content"].insert(0, {"type": "reasoning", "text": 7})
    assert check_log("s", log).problems == [
        "assistant/message at seq 3: reasoning block content[0] needs 'text' as a string"
    ]


def test_an_error_turn_end_needs_its_failure_and_an_aborted_one_its_cause() -> None:
    error = answered_log()
    error[7].data["reason"] = {"kind": "error", "eror": {"message": "m", "code": "UNKNOWN"}}
    aborted = answered_log()
    aborted[7].data["reason"] = {"kind": "aborted"}
    assert check_log("s", error).problems == [
        "turn/end at seq 7: an error reason needs an error with message and code"
    ]
    assert check_log("s", aborted).problems == [
        "turn/end at seq 7: an aborted reason needs a reason object with a kind"
    ]


def test_unknown_block_types_reason_kinds_and_extra_keys_stay_valid() -> None:
    log = answered_log()
    log[1].data["content"].append({"type": "future-block", "anything": [1]})
    log[3].data["message"]["content"][0]["extra"] = True
    log[7].data["reason"] = {"kind": "future-kind", "detail": {}}
    assert check_log("s", log).problems == []


def test_a_content_block_that_is_not_an_object_with_a_type_is_invalid() -> None:
    log = answered_log()
    log[1].data["content"].append({"kind": "text"})
    assert check_log("s", log).problems == [
        "user/message at seq 1: content[1] must be an object with a string type"
    ]


def test_a_live_append_refuses_the_shape_a_load_would_refuse_and_appends_nothing() -> None:
    session = Session("s")
    before = len(session.events)
    with pytest.raises(
        EventRejectedError, match=r"^user/message at seq \d+: text block content\[0\] needs 'text'"
    ):
        session.append(
            "user/message",
            {"id": "m", "role": "user", "content": [{"type": "text"}], "source": {"kind": "user"}},
            surface_op="append",
        )
    assert len(session.events) == before and session.messages == []
