"""The approval laws over random steps (docs/approvals.md).

A step calls N tools, each parallel-safe or exclusive, each asking or not. Every ask is
answered (allow, reject, reject with feedback) by the in-process approver, or by pausing
and then `decide()` + `continue_turn()`, in the same loop or in a loop resumed from the
store. Whatever the layout and the answers: every call has exactly one `tool/call` and one
`tool/result`, in model order; a rejected body never runs, every other body runs exactly
once; each ask has exactly one decision; the log passes the law checks at every pause and
at the end.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from duraloop.llm import ScriptedModel
from duraloop.loop import AgentLoop, SessionSetup, resume_session, start_session
from duraloop.store import JsonlStore
from duraloop.tools import ApprovalRequest, Decision

from ._approval_support import assert_approval_log_valid, audit, counting_tool, outcomes
from ._support import call, of_type, result_for, result_text, tools_step

DONE = {"text": "done"}

# One call: (parallel, asks, answer, via); the answer and via matter only when it asks.
Call = tuple[bool, bool, str, str]

_call = st.tuples(
    st.booleans(),
    st.booleans(),
    st.sampled_from(["allow", "reject", "feedback"]),
    st.sampled_from(["approver", "pause", "resume"]),
)


def _name(parallel: bool, asks: bool) -> str:
    return ("d" if asks else "") + ("p" if parallel else "x")


def _tools(runs: list[str]) -> list[Any]:
    return [
        counting_tool(_name(parallel, asks), runs, parallel=parallel, requires_approval=asks)
        for parallel in (True, False)
        for asks in (True, False)
    ]


def _decision(answer: str) -> Decision:
    return Decision(
        allow=answer == "allow", feedback=f"not {answer}" if answer == "feedback" else None
    )


async def _scenario(tmp_path: Path, layout: list[Call]) -> tuple[AgentLoop, list[str]]:
    """Run the step, answering every ask as the layout says; return the final loop."""
    runs: list[str] = []
    ids = [f"c{i}" for i in range(len(layout))]
    by_id = dict(zip(ids, layout, strict=True))

    def approver(request: ApprovalRequest) -> Decision | None:
        _, _, answer, via = by_id[request.call_id]
        return _decision(answer) if via == "approver" else None

    store = JsonlStore(tmp_path / "sessions")
    step = tools_step(*(call(i, _name(p, a)) for i, (p, a, _, _) in zip(ids, layout, strict=True)))

    def setup(script: list[Any]) -> SessionSetup:
        model = ScriptedModel(script)
        return SessionSetup(
            store=store, model=model, tools=_tools(runs), cwd=tmp_path, approver=approver
        )

    loop = start_session(setup([step, DONE]))
    result = await loop.run_turn("go")
    asked_in_order: list[str] = []
    while result.kind == "paused":
        pending = result.approval
        assert pending is not None and loop.pending_approvals() == [pending]
        asked_in_order.append(pending.call_id)
        index = ids.index(pending.call_id)
        _, asks, answer, via = layout[index]
        assert asks and via != "approver"
        # Every earlier call is answered; it and every later call have no tool/call.
        started = [e.data["callId"] for e in of_type(loop.session.events, "tool/call")]
        assert started == ids[:index]
        assert_approval_log_valid(loop.session)
        if via == "resume":
            loop.close()
            loop, repair = resume_session(loop.session.id, setup([DONE]))
            assert not repair.repaired and loop.paused == pending
        await loop.decide(
            pending.call_id, allow=answer == "allow", feedback=_decision(answer).feedback
        )
        if via == "resume":
            loop.close()
            loop, _ = resume_session(loop.session.id, setup([DONE]))
        result = await loop.continue_turn()
    assert result.kind == "completed"
    expected = [i for i, (_, a, _, v) in zip(ids, layout, strict=True) if a and v != "approver"]
    assert asked_in_order == expected
    return loop, runs


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(layout=st.lists(_call, min_size=1, max_size=5))
def test_property_every_call_is_answered_once_and_only_approved_bodies_run(
    tmp_path_factory: pytest.TempPathFactory, layout: list[Call]
) -> None:
    tmp = tmp_path_factory.mktemp("layout")
    loop, runs = anyio.run(_scenario, tmp, layout)
    with loop:
        events = list(loop.session.events)
        assert_approval_log_valid(loop.session)
    ids = [f"c{i}" for i in range(len(layout))]
    # Exactly one tool/call and one tool/result per call, in model order.
    assert [e.data["callId"] for e in of_type(events, "tool/call")] == ids
    answered = [e.data["message"]["source"]["callId"] for e in of_type(events, "tool/result")]
    assert answered == ids
    should_run = [
        i for i, (p, a, answer, _) in zip(ids, layout, strict=True) if not a or answer == "allow"
    ]
    ran = Counter(entry.split(":", 1)[1] for entry in runs)
    assert ran == Counter(should_run)  # approved or not asking: once; rejected: never
    # One ask per asking call, in model order, each decided once as answered.
    pairs = audit(events)
    asking = [(i, answer) for i, (_, a, answer, _) in zip(ids, layout, strict=True) if a]
    assert [ask["callId"] for ask, _ in pairs] == [i for i, _ in asking]
    assert outcomes(events) == [
        "allowed-once" if answer == "allow" else "rejected" for _, answer in asking
    ]
    for call_id, answer in asking:
        text = result_text(result_for(events, call_id))
        name = _name(layout[ids.index(call_id)][0], True)
        if answer == "reject":
            assert text == f'Error: the user rejected tool "{name}"'
        elif answer == "feedback":
            assert text == f'Error: the user rejected tool "{name}" with feedback: not feedback'
        else:
            assert text == f"{name} {call_id} ran"
    # The calls' step is one step: it closed once, after every result.
    assert len(of_type(events, "step/end")) == 2
