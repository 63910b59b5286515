"""Continuing a paused turn whose ask this loop answers itself (docs/approvals.md#continuing).

A loop whose `never` policy, allow-list or approver answers the waiting ask continues the
turn without `decide()`: the recorded ask (durable already) gets its one decision, and is
not asked again. Nothing is decided when the loop opens, so a person's explicit decision
always wins. Continuing records the loop's configured policy for the asks after it, as a
new turn would. (An ask the policy answers is decided as it is made, but a crash between
the two events leaves it waiting: an unattended run must not then wait for a person.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from duraloop.errors import ApprovalError
from duraloop.llm import ScriptedModel
from duraloop.log import Session
from duraloop.loop import AgentLoop, LoopConfig
from duraloop.testing import assert_log_valid
from duraloop.tools import ApprovalRequest, Decision

from ._approval_support import counting_tool, outcomes
from ._support import result_for, result_text


def _calls(*names: str) -> dict[str, Any]:
    return {
        "tool_calls": [{"id": f"c{i}", "name": n, "arguments": {}} for i, n in enumerate(names)]
    }


def _paused(tmp_path: Path, runs: list[str], *names: str) -> Session:
    """A session paused on its first asking call (policy `ask`, no approver)."""
    session = Session("s")
    tools = [counting_tool("danger", runs, requires_approval=True), counting_tool("p", runs)]
    loop = AgentLoop(session, model=ScriptedModel([_calls(*names)]), tools=tools, cwd=tmp_path)
    assert anyio.run(loop.run_turn, "go").kind == "paused"
    return session


def _loop(session: Session, tmp_path: Path, runs: list[str], config: LoopConfig) -> AgentLoop:
    tools = [counting_tool("danger", runs, requires_approval=True), counting_tool("p", runs)]
    model = ScriptedModel([{"text": "done"}])
    return AgentLoop(session, model=model, tools=tools, cwd=tmp_path, config=config)


def test_a_loop_under_the_never_policy_rejects_a_waiting_ask_when_it_opens(
    tmp_path: Path,
) -> None:
    runs: list[str] = []
    session = _paused(tmp_path, runs, "danger")
    loop = _loop(session, tmp_path, runs, LoopConfig(approval_policy="never"))
    assert loop.paused is not None and not loop.paused.decided  # nothing decided on open
    assert loop.pending_approvals() == []  # no person is waited for
    result = anyio.run(loop.continue_turn)
    assert result.kind == "completed"
    assert runs == []
    assert result_text(result_for(session.events, "c0")) == 'Error: the user rejected tool "danger"'
    assert outcomes(session.events) == ["rejected"]
    assert_log_valid(session)


def test_a_loop_whose_allow_list_names_the_waiting_tool_approves_it_when_it_opens(
    tmp_path: Path,
) -> None:
    runs: list[str] = []
    session = _paused(tmp_path, runs, "danger")
    loop = _loop(session, tmp_path, runs, LoopConfig(auto_approve=frozenset({"danger"})))
    assert anyio.run(loop.continue_turn).kind == "completed"
    assert runs == ["danger:c0"]
    assert_log_valid(session)


def test_a_loop_under_the_ask_policy_leaves_the_waiting_ask_to_a_person(tmp_path: Path) -> None:
    runs: list[str] = []
    session = _paused(tmp_path, runs, "danger")
    before = len(session.events)
    loop = _loop(session, tmp_path, runs, LoopConfig())
    assert loop.paused is not None and not loop.paused.decided
    assert len(session.events) == before


def test_continuing_records_the_configured_policy_for_the_later_asks_of_the_step(
    tmp_path: Path,
) -> None:
    runs: list[str] = []
    session = _paused(tmp_path, runs, "danger", "danger")
    loop = _loop(session, tmp_path, runs, LoopConfig())

    async def approve_then_go_unattended() -> str:
        await loop.decide("c0", allow=True)
        unattended = _loop(session, tmp_path, runs, LoopConfig(approval_policy="never"))
        return (await unattended.continue_turn()).kind

    assert anyio.run(approve_then_go_unattended) == "completed"
    assert runs == ["danger:c0"]  # the second ask was rejected by the recorded policy
    policies = [e.data["policy"] for e in session.events if e.type == "approval/policy"]
    assert policies == ["never"]
    assert outcomes(session.events) == ["allowed-once", "rejected"]
    assert_log_valid(session)


def test_run_turn_without_a_prompt_continues_a_decided_paused_turn(tmp_path: Path) -> None:
    runs: list[str] = []
    session = _paused(tmp_path, runs, "danger")
    loop = _loop(session, tmp_path, runs, LoopConfig())

    async def decide_then_run() -> str:
        await loop.decide("c0", allow=True)
        return (await loop.run_turn()).kind

    assert anyio.run(decide_then_run) == "completed"
    assert runs == ["danger:c0"]
    assert loop.paused is None


def test_a_persons_decision_wins_over_the_allow_list_of_the_loop_that_records_it(
    tmp_path: Path,
) -> None:
    runs: list[str] = []
    session = _paused(tmp_path, runs, "danger")
    loop = _loop(session, tmp_path, runs, LoopConfig(auto_approve=frozenset({"danger"})))

    async def deny_then_continue() -> str:
        await loop.decide("c0", allow=False, feedback="no")
        return (await loop.continue_turn()).kind

    assert anyio.run(deny_then_continue) == "completed"
    assert runs == []
    assert outcomes(session.events) == ["rejected"]


def test_an_approver_of_a_resumed_loop_answers_the_recorded_ask_without_asking_again(
    tmp_path: Path,
) -> None:
    runs: list[str] = []
    session = _paused(tmp_path, runs, "danger")
    asked = [e.data["id"] for e in session.events if e.type == "approval/asked"]
    seen: list[tuple[str, str]] = []

    def approver(request: ApprovalRequest) -> Decision:
        seen.append((request.ask_id, request.call_id))
        return Decision(allow=True)

    loop = _loop(session, tmp_path, runs, LoopConfig())
    loop.approver = approver
    assert loop.pending_approvals() != []  # a person (the approver) still answers it
    assert anyio.run(loop.continue_turn).kind == "completed"
    assert seen == [(asked[0], "c0")]
    assert runs == ["danger:c0"]
    assert [e.data["id"] for e in session.events if e.type == "approval/asked"] == asked
    assert outcomes(session.events) == ["allowed-once"]
    assert_log_valid(session)


def test_an_approver_without_an_answer_pauses_the_continued_turn_again_appending_nothing(
    tmp_path: Path,
) -> None:
    runs: list[str] = []
    session = _paused(tmp_path, runs, "danger")
    loop = _loop(session, tmp_path, runs, LoopConfig())
    loop.approver = lambda request: None
    before = len(session.events)
    result = anyio.run(loop.continue_turn)
    assert result.kind == "paused" and result.approval == loop.paused
    assert len(session.events) == before


@pytest.mark.parametrize(
    ("allow", "feedback", "message"),
    [
        (False, "z" * 100_000, "at most 4,000"),
        (False, "bad \ud800", "not valid Unicode"),
    ],
)
def test_a_decision_with_feedback_it_cannot_keep_is_refused_appending_nothing(
    tmp_path: Path, allow: bool, feedback: str, message: str
) -> None:
    runs: list[str] = []
    session = _paused(tmp_path, runs, "danger")
    loop = _loop(session, tmp_path, runs, LoopConfig())
    before = len(session.events)

    async def decide() -> None:
        await loop.decide("c0", allow=allow, feedback=feedback)

    with pytest.raises(ApprovalError, match=message):
        anyio.run(decide)
    assert len(session.events) == before


def test_an_approver_raising_keyboard_interrupt_still_decides_its_ask_once(
    tmp_path: Path,
) -> None:
    runs: list[str] = []
    session = Session("s")

    def approver(request: ApprovalRequest) -> Decision:
        raise KeyboardInterrupt

    tools = [counting_tool("danger", runs, requires_approval=True)]
    loop = AgentLoop(
        session,
        model=ScriptedModel([_calls("danger")]),
        tools=tools,
        cwd=tmp_path,
        approver=approver,
    )
    with pytest.raises(KeyboardInterrupt):
        anyio.run(loop.run_turn, "go")
    assert outcomes(session.events) == ["cancelled"]
    assert runs == []
    assert_log_valid(session)
