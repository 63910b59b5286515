"""Reading a re-run back from its `tool/call` and replacement (`rerun_call`, `rerun_result`).

See docs/recovery.md#re-running-outcome-unknown-calls: a re-run is recognised by structure
(`retryOf`, a replacement citing that `tool/call`), and its outcome by the closing sentence
`rerun_text` writes, since the content-only rule keeps `isError` the unknown result's.
"""

from __future__ import annotations

from typing import Any

from duraloop.log import (
    Event,
    RerunCall,
    rerun_call,
    rerun_result,
    rerun_result_data,
    rerun_text,
    tool_result_message,
)
from duraloop.log.vocabulary import RETRY_OF, TOOL_OUTCOME_UNKNOWN

KEY = "dl1-0123456789abcdef0123456789abcdef"


def _unknown_result() -> dict[str, Any]:
    message = tool_result_message(
        "c1", [{"type": "text", "text": "outcome unknown"}], is_error=True
    )
    return {"turn": 1, "step": 1, "message": message, "error": {"code": TOOL_OUTCOME_UNKNOWN}}


def _rerun_tool_call(seq: int = 2, **extra: Any) -> Event:
    data = {"turn": 2, "step": 1, "callId": "c1-rerun-1", "name": "idem", "arguments": "{}"}
    return Event("tool/call", seq, 5, {**data, RETRY_OF: 0, **extra})


def _replacement(content: list[Any], sources: list[int] | None = None) -> Event:
    return Event(
        "tool/result",
        3,
        6,
        rerun_result_data(_unknown_result(), content),
        [1, 2] if sources is None else sources,
        {"op": "replace", "start": 1, "end": 1},
    )


def _calls() -> dict[int, RerunCall]:
    call = rerun_call(_rerun_tool_call())
    assert call is not None
    return {2: call}


def test_rerun_call_reads_retry_of_and_the_original_call_id() -> None:
    call = rerun_call(_rerun_tool_call())
    assert call == RerunCall(2, 0, "c1-rerun-1", "c1", "idem", "{}")


def test_rerun_call_is_none_for_a_plain_call_and_a_malformed_retry_of() -> None:
    plain = Event("tool/call", 0, 1, {"turn": 1, "step": 1, "callId": "c1", "name": "idem"})
    assert rerun_call(plain) is None
    assert rerun_call(_rerun_tool_call(retryOf="0")) is None
    assert rerun_call(Event("tool/result", 0, 1, {RETRY_OF: 0})) is None


def test_rerun_result_reads_a_success_and_the_reruns_own_output() -> None:
    content = [rerun_text(KEY, failed=False), {"type": "text", "text": "out"}]
    result = rerun_result(_replacement(content), _calls())
    assert result is not None
    assert (result.succeeded, result.output, result.replaced_seq, result.result_seq) == (
        True,
        "out",
        1,
        3,
    )
    assert result.call.original_call_id == "c1"


def test_rerun_result_reads_a_failure_though_is_error_stays_the_unknown_results() -> None:
    content = [rerun_text(KEY, failed=True), {"type": "text", "text": "boom"}]
    event = _replacement(content)
    assert event.data["message"]["content"][0]["isError"] is True
    result = rerun_result(event, _calls())
    assert result is not None and (result.succeeded, result.output) == (False, "boom")


def test_rerun_result_outcome_is_none_for_an_opening_text_duraloop_did_not_write() -> None:
    result = rerun_result(_replacement([{"type": "text", "text": "pruned"}]), _calls())
    assert result is not None and result.succeeded is None


def test_rerun_result_is_none_for_a_replacement_citing_no_rerun_call() -> None:
    pruned = _replacement([{"type": "text", "text": "[pruned]"}], sources=[1])
    assert rerun_result(pruned, _calls()) is None
    appended = Event("tool/result", 3, 6, _unknown_result(), [0], "append")
    assert rerun_result(appended, _calls()) is None


def test_rerun_text_is_neutral_about_who_asked_for_the_rerun() -> None:
    text = rerun_text(KEY, failed=False)["text"]
    assert "re-run on request with the same idempotency key " + KEY in text
    assert "duraloop resume" not in text
