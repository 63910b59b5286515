"""The in-process approver answers asks (docs/approvals.md#outcomes).

`approver=` is a callable(ApprovalRequest) -> Decision | None, sync or async: a Decision is
carried out at once, None pauses the turn, a raise or any other value is `unavailable`, and
a cancel while it waits decides `cancelled`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from duraloop.llm import ScriptedModel
from duraloop.log import MAX_FEEDBACK_CHARS, Session
from duraloop.loop import AgentLoop, LoopConfig
from duraloop.tools import ApprovalRequest, Approver, Decision, Tool

from ._approval_support import assert_approval_log_valid, audit, counting_tool, outcomes
from ._support import (
    call,
    of_type,
    result_for,
    result_text,
    tool_results_in,
    tools_step,
)

pytestmark = pytest.mark.anyio

DONE = {"text": "done"}


def _loop(
    tmp_path: Path,
    script: list[dict[str, Any]],
    tools: list[Tool],
    approver: Approver | None,
    config: LoopConfig | None = None,
) -> tuple[Session, ScriptedModel, AgentLoop]:
    session = Session("s")
    model = ScriptedModel(script)
    loop = AgentLoop(
        session, model=model, tools=tools, cwd=tmp_path, config=config, approver=approver
    )
    return session, model, loop


async def test_an_allowing_approver_runs_the_body_once(tmp_path: Path) -> None:
    runs: list[str] = []
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return Decision(allow=True)

    danger = counting_tool("danger", runs, requires_approval=True)
    session, _, loop = _loop(
        tmp_path, [tools_step(call("c1", "danger", path="x")), DONE], [danger], approve
    )
    result = await loop.run_turn("go")
    assert result.kind == "completed"
    assert runs == ["danger:c1"]
    ((ask, decided),) = audit(session.events)
    assert decided == {"id": ask["id"], "outcome": "allowed-once"}
    (request,) = asked
    assert (request.session_id, request.ask_id, request.call_id) == ("s", ask["id"], "c1")
    assert (request.tool_name, request.arguments) == ("danger", '{"path":"x"}')
    assert request.reason == 'tool "danger" requires approval'
    assert_approval_log_valid(session)


async def test_a_rejection_with_feedback_reaches_the_next_model_request(tmp_path: Path) -> None:
    runs: list[str] = []
    danger = counting_tool("danger", runs, requires_approval=True)
    session, model, loop = _loop(
        tmp_path,
        [tools_step(call("c1", "danger")), DONE],
        [danger],
        lambda request: Decision(False, feedback="use the trash instead"),
    )
    await loop.run_turn("go")
    expected = 'Error: the user rejected tool "danger" with feedback: use the trash instead'
    assert result_text(result_for(session.events, "c1")) == expected
    assert "error" not in result_for(session.events, "c1").data
    assert tool_results_in(model.requests[1].messages) == [("c1", True, expected)]
    (decided,) = of_type(session.events, "approval/decided")
    assert decided.data["feedback"] == "use the trash instead"
    assert runs == []
    assert_approval_log_valid(session)


async def test_feedback_is_cut_to_the_maximum(tmp_path: Path) -> None:
    danger = counting_tool("danger", [], requires_approval=True)
    session, _, loop = _loop(
        tmp_path,
        [tools_step(call("c1", "danger")), DONE],
        [danger],
        lambda request: Decision(False, feedback="x" * (MAX_FEEDBACK_CHARS + 50)),
    )
    await loop.run_turn("go")
    (decided,) = of_type(session.events, "approval/decided")
    assert len(decided.data["feedback"]) == MAX_FEEDBACK_CHARS


async def test_an_allowing_decision_records_no_feedback(tmp_path: Path) -> None:
    danger = counting_tool("danger", [], requires_approval=True)
    session, _, loop = _loop(
        tmp_path,
        [tools_step(call("c1", "danger")), DONE],
        [danger],
        lambda request: Decision(True, feedback="ignored"),
    )
    await loop.run_turn("go")
    (decided,) = of_type(session.events, "approval/decided")
    assert set(decided.data) == {"id", "outcome"}


def _raising(request: ApprovalRequest) -> Decision:
    raise RuntimeError("the prompt crashed")


@pytest.mark.parametrize(
    "approver",
    [
        _raising,
        lambda request: "yes",
        lambda request: Decision(allow="yes"),  # type: ignore[arg-type]
        lambda request: Decision(allow=False, feedback=123),  # type: ignore[arg-type]
    ],
    ids=["raises", "string", "non-bool-allow", "non-str-feedback"],
)
async def test_a_failing_approver_is_recorded_unavailable(tmp_path: Path, approver: Any) -> None:
    runs: list[str] = []
    danger = counting_tool("danger", runs, requires_approval=True)
    session, _, loop = _loop(tmp_path, [tools_step(call("c1", "danger")), DONE], [danger], approver)
    result = await loop.run_turn("go")
    assert result.kind == "completed"
    assert outcomes(session.events) == ["unavailable"]
    assert result_text(result_for(session.events, "c1")) == (
        'Error: tool "danger" requires approval, but no approval channel is available'
    )
    assert runs == []
    assert_approval_log_valid(session)


async def test_an_approver_returning_none_pauses_the_turn(tmp_path: Path) -> None:
    runs: list[str] = []
    danger = counting_tool("danger", runs, requires_approval=True)
    session, _, loop = _loop(
        tmp_path,
        [tools_step(call("c1", "danger"), call("c2", "danger")), DONE],
        [danger],
        lambda request: None,
    )
    result = await loop.run_turn("go")
    assert result.kind == "paused"
    assert result.approval is not None and result.approval.call_id == "c1"
    assert result.approval == loop.paused
    assert loop.pending_approvals() == [result.approval]
    kinds = [e.type for e in session.events]
    assert kinds[-1] == "approval/asked"
    assert "step/end" not in kinds and "turn/end" not in kinds
    assert of_type(session.events, "tool/call") == []
    assert runs == []
    assert_approval_log_valid(session)


async def test_no_approver_pauses_the_turn(tmp_path: Path) -> None:
    danger = counting_tool("danger", [], requires_approval=True)
    session, _, loop = _loop(tmp_path, [tools_step(call("c1", "danger")), DONE], [danger], None)
    result = await loop.run_turn("go")
    assert (result.kind, result.reason) == ("paused", {"kind": "paused", "callId": "c1"})
    assert result.approval is not None and not result.approval.decided
    assert (result.approval.tool_name, result.approval.turn, result.approval.step) == (
        "danger",
        1,
        1,
    )


async def test_an_async_approver_answers(tmp_path: Path) -> None:
    runs: list[str] = []

    async def approve(request: ApprovalRequest) -> Decision:
        await anyio.lowlevel.checkpoint()
        return Decision(allow=request.call_id == "c1", feedback="only the first")

    danger = counting_tool("danger", runs, requires_approval=True)
    session, _, loop = _loop(
        tmp_path,
        [tools_step(call("c1", "danger"), call("c2", "danger")), DONE],
        [danger],
        approve,
    )
    assert (await loop.run_turn("go")).kind == "completed"
    assert outcomes(session.events) == ["allowed-once", "rejected"]
    assert runs == ["danger:c1"]
    assert result_text(result_for(session.events, "c2")).endswith("with feedback: only the first")
    assert_approval_log_valid(session)


async def test_a_cancel_while_the_approver_waits_decides_cancelled(tmp_path: Path) -> None:
    runs: list[str] = []
    entered = anyio.Event()

    async def wait_forever(request: ApprovalRequest) -> Decision:
        entered.set()
        await anyio.Event().wait()
        raise AssertionError("unreachable")

    tools = [
        counting_tool("danger", runs, requires_approval=True),
        counting_tool("plain", runs),
    ]
    session, _, loop = _loop(
        tmp_path,
        [tools_step(call("c1", "danger"), call("c2", "plain")), DONE],
        tools,
        wait_forever,
    )
    results: list[Any] = []

    async def run() -> None:
        results.append(await loop.run_turn("go"))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await entered.wait()
        loop.cancel()
    (result,) = results
    assert result.kind == "aborted"
    assert outcomes(session.events) == ["cancelled"]
    assert [result_for(session.events, c).data["error"]["code"] for c in ("c1", "c2")] == [
        "ABORTED_BEFORE_DISPATCH",
        "ABORTED_BEFORE_DISPATCH",
    ]
    assert [e.data["callId"] for e in of_type(session.events, "tool/call")] == ["c1", "c2"]
    assert runs == []
    assert session.events[-1].data["reason"]["kind"] == "aborted"
    assert loop.paused is None
    assert_approval_log_valid(session)


async def test_the_approver_is_asked_once_per_asking_call(tmp_path: Path) -> None:
    asked: list[str] = []

    def approve(request: ApprovalRequest) -> Decision:
        asked.append(request.call_id)
        return Decision(True)

    tools = [counting_tool("danger", [], requires_approval=True), counting_tool("plain", [])]
    _, _, loop = _loop(
        tmp_path,
        [tools_step(call("c1", "danger"), call("c2", "plain"), call("c3", "danger")), DONE],
        tools,
        approve,
    )
    await loop.run_turn("go")
    assert asked == ["c1", "c3"]


async def test_the_never_policy_never_asks_the_approver(tmp_path: Path) -> None:
    asked: list[str] = []

    def approve(request: ApprovalRequest) -> Decision:
        asked.append(request.call_id)
        return Decision(True)

    danger = counting_tool("danger", [], requires_approval=True)
    session, _, loop = _loop(
        tmp_path,
        [tools_step(call("c1", "danger")), DONE],
        [danger],
        approve,
        LoopConfig(approval_policy="never"),
    )
    await loop.run_turn("go")
    assert asked == []
    assert outcomes(session.events) == ["rejected"]


async def test_an_approver_is_not_asked_once_the_turn_is_cancelled(tmp_path: Path) -> None:
    asked: list[str] = []

    def approve(request: ApprovalRequest) -> Decision:
        asked.append(request.call_id)
        return Decision(True)

    danger = counting_tool("danger", [], requires_approval=True)
    session, _, loop = _loop(
        tmp_path,
        [tools_step(call("c1", "danger"), call("c2", "danger")), DONE],
        [danger],
        approve,
    )
    # A cancel between the ask and the approver (here: an observer of the ask).
    session.observe(lambda event: loop.cancel() if event.type == "approval/asked" else None)
    result = await loop.run_turn("go")
    assert result.kind == "aborted"
    assert asked == []
    assert outcomes(session.events) == ["cancelled"]
    assert result_for(session.events, "c2").data["error"]["code"] == "ABORTED_BEFORE_DISPATCH"
    assert_approval_log_valid(session)
