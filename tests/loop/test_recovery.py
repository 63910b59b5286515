"""Live step recovery after a scheduler failure: docs/loop.md#unanswered-tool-results (Laws 4, 5,
7).

The behaviour cases B48-B56 are in `tests/conformance/test_loop_scheduler_failure_cases.py`;
here are the further fault paths (a flush failing before dispatch, a validator failing on one
result or vetoing the first `tool/call`, a cancelled host scope). Each test injects one fault,
orders the concurrent parts with `Gates` (never sleeps), and then asserts the whole log: the
recovery results and their codes, `step/end` and `turn/end` after them, the original exception
propagating, and the log still passing the invariants and the pairing check.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from duraloop.log import Event
from duraloop.testing import Gates, assert_log_valid, describe_log, gated_tool

from ._support import (
    call,
    make_loop,
    recorder_tool,
    result_for,
    result_text,
    tools_step,
)

OU = "TOOL_OUTCOME_UNKNOWN"
NS = "TOOL_NOT_STARTED"
NOT_STARTED_TEXT = (
    "The tool call was interrupted before the Harness recorded it as started. "
    "Retry it if it is still needed."
)


@pytest.mark.anyio
async def test_failing_flush_before_dispatch_never_runs_body_and_records_not_started(
    tmp_path: Path,
) -> None:
    # D14: the tool/call never became durable, so its body provably never ran (Law 5); it
    # was answered TOOL_OUTCOME_UNKNOWN ("may have run") although nothing had started.
    record: list[str] = []
    boom = OSError("disk full")

    class FlakyDurability:
        def __init__(self) -> None:
            self.count = 0

        def flush(self) -> None:
            self.count += 1
            if self.count == 2:
                raise boom

        def close(self) -> None:
            self.flush()

    durability = FlakyDurability()
    session, _model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1", "x"))],
        [recorder_tool("x", record, parallel=False)],
        durability=durability,
    )
    with pytest.raises(OSError) as raised:
        await loop.run_turn("go")
    assert raised.value is boom
    assert record == [], "the body never runs without a durable tool/call (Law 5)"
    events = list(session.events)
    assert describe_log(events)[5:] == ["A(c1)", "call(c1)", f"res(c1,{NS})", "S-1", "T-1(error)"]
    answer = result_for(events, "c1")
    assert answer.data["error"] == {"name": "ToolNotStartedError", "code": NS}
    assert result_text(answer) == NOT_STARTED_TEXT and answer.source_event_seqs is None
    assert durability.count == 3, "the turn-end flush still runs"
    assert_log_valid(session)


@pytest.mark.anyio
async def test_validator_hook_failure_on_one_result_recovers_that_call_and_the_rest(
    tmp_path: Path,
) -> None:
    record: list[str] = []
    session, _model, loop = make_loop(
        tmp_path,
        [tools_step(call("c1", "x"), call("c2", "x"), call("c3", "x"))],
        [recorder_tool("x", record, parallel=False)],
    )
    failed: list[str] = []

    def hook(event: Event) -> None:
        if event.type == "tool/result" and event.data["message"]["source"]["callId"] == "c2":
            if not failed:
                failed.append("c2")
                raise ValueError("audit hook failed on c2")

    session.add_validator(hook)
    with pytest.raises(ValueError, match="audit hook failed on c2"):
        await loop.run_turn("go")
    events = list(session.events)
    assert describe_log(events)[5:] == [
        "A(c1,c2,c3)",
        "call(c1)",
        "res(c1,ok)",
        "call(c2)",
        f"res(c2,{OU})",
        f"res(c3,{NS})",
        "S-1",
        "T-1(error)",
    ]
    assert record == ["x-start-c1", "x-end-c1", "x-start-c2", "x-end-c2"]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_vetoed_first_tool_call_records_not_started_for_every_call(tmp_path: Path) -> None:
    record: list[str] = []
    session, _model, loop = make_loop(
        tmp_path, [tools_step(call("c1"), call("c2"))], [recorder_tool("p", record)]
    )

    def veto_calls(event: Event) -> None:
        if event.type == "tool/call":
            raise RuntimeError("tool/call vetoed")

    session.add_validator(veto_calls)
    with pytest.raises(RuntimeError, match="tool/call vetoed"):
        await loop.run_turn("go")
    assert record == []
    assert describe_log(session.events)[5:] == [
        "A(c1,c2)",
        f"res(c1,{NS})",
        f"res(c2,{NS})",
        "S-1",
        "T-1(error)",
    ]
    assert_log_valid(session)


@pytest.mark.anyio
async def test_host_cancel_scope_mid_tools_still_closes_a_valid_log(tmp_path: Path) -> None:
    """anyio cancellation of the caller is a durable cancel, exactly like `loop.cancel()`.

    Regression (user trial): it used to hit the tools directly and record their calls as
    TOOL_OUTCOME_UNKNOWN although the bodies were cancelled.
    """
    gates = Gates()
    session, _model, loop = make_loop(
        tmp_path, [tools_step(call("c1"), call("c2"), call("c3"))], [gated_tool("p", gates)], cap=2
    )
    scopes: list[anyio.CancelScope] = []

    async def run() -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await loop.run_turn("go")

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await gates.wait_entered("c1", "c2")
        scopes[0].cancel()
    assert scopes[0].cancelled_caught
    assert describe_log(session.events)[5:] == [
        "A(c1,c2,c3)",
        "call(c1)",
        "call(c2)",
        "res(c1,ABORTED)",
        "res(c2,ABORTED)",
        "call(c3)",
        "res(c3,ABORTED_BEFORE_DISPATCH)",
        "S-1",
        "T-1(aborted)",
    ]
    assert session.events[-1].data["reason"] == {"kind": "aborted", "reason": {"kind": "parent"}}
    assert_log_valid(session)
