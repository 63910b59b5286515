"""Which calls ask for approval, and how the policy answers them (docs/approvals.md).

Each test runs a real loop over a scripted model. Under the `never` policy every ask is
answered at once (rejected), so the ask itself can be inspected in a closed log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from duraloop.log import Session, effective_policy
from duraloop.loop import LoopConfig
from duraloop.tools import AskApproval, Deny, ToolCallRequest, ToolHooks, tool

from ._approval_support import (
    ASKED_KEYS,
    assert_approval_log_valid,
    audit,
    counting_tool,
    outcomes,
)
from ._support import call, make_loop, of_type, result_for, result_text, tools_step

pytestmark = pytest.mark.anyio

NEVER = LoopConfig(approval_policy="never")
DONE = {"text": "done"}


async def _run_never(
    tmp_path: Path, tools: list[Any], calls: list[dict[str, Any]], hooks: ToolHooks | None = None
) -> Session:
    """Run one turn calling `calls` under the `never` policy; return the session."""
    session, _, loop = make_loop(
        tmp_path, [tools_step(*calls), DONE], tools, hooks=hooks, config=NEVER
    )
    result = await loop.run_turn("go")
    assert result.kind == "completed"
    assert_approval_log_valid(session)
    return session


# --------------------------------------------------------------------- which calls ask


async def test_requires_approval_true_asks_before_the_tool_call(tmp_path: Path) -> None:
    runs: list[str] = []
    danger = counting_tool("danger", runs, requires_approval=True)
    session = await _run_never(tmp_path, [danger], [call("c1", "danger")])
    asked = of_type(session.events, "approval/asked")
    assert len(asked) == 1
    (tool_call,) = of_type(session.events, "tool/call")
    assert asked[0].seq < tool_call.seq
    assert asked[0].data["reason"] == 'tool "danger" requires approval'
    assert runs == []


@pytest.mark.parametrize(("verdict", "asks"), [(True, True), (False, False)])
async def test_a_classifier_asks_unless_it_returns_false(
    tmp_path: Path, verdict: bool, asks: bool
) -> None:
    seen: list[Any] = []

    def classify(args: Any) -> bool:
        seen.append(args)
        return verdict

    @tool(requires_approval=classify)
    def remove(path: str) -> str:
        """Remove a path."""
        return f"removed {path}"

    session = await _run_never(tmp_path, [remove], [call("c1", "remove", path="build")])
    assert [args.path for args in seen] == ["build"]  # the validated argument model
    assert len(of_type(session.events, "approval/asked")) == int(asks)
    text = result_text(result_for(session.events, "c1"))
    assert text == ('Error: the user rejected tool "remove"' if asks else "removed build")


def _raises(args: Any) -> bool:
    raise RuntimeError("classifier bug")


@pytest.mark.parametrize(
    ("rule", "arguments", "reason"),
    [
        (_raises, {"path": "x"}, 'tool "remove" requires approval (its rule raised RuntimeError)'),
        (lambda args: 0, {"path": "x"}, 'tool "remove" requires approval'),
        (lambda args: None, {"path": "x"}, 'tool "remove" requires approval'),
        (lambda args: "no", {"path": "x"}, 'tool "remove" requires approval'),
        (lambda args: False, {"path": 3}, 'tool "remove" requires approval (its rule raised'),
        (lambda args: False, {}, 'tool "remove" requires approval (its rule raised'),
    ],
    ids=["raises", "zero", "none", "string", "invalid-args", "missing-args"],
)
async def test_a_classifier_fails_closed_raise_non_bool_or_invalid_arguments_ask(
    tmp_path: Path, rule: Any, arguments: dict[str, Any], reason: str
) -> None:
    runs: list[str] = []

    @tool(requires_approval=rule)
    def remove(path: str) -> str:
        """Remove a path."""
        runs.append(path)
        return "removed"

    session = await _run_never(tmp_path, [remove], [call("c1", "remove", **arguments)])
    (asked,) = of_type(session.events, "approval/asked")
    assert asked.data["reason"].startswith(reason)
    assert outcomes(session.events) == ["rejected"]
    assert runs == []


async def test_ask_approval_from_a_hook_asks_with_its_reason(tmp_path: Path) -> None:
    runs: list[str] = []
    plain = counting_tool("plain", runs)
    hooks = ToolHooks(pre_execute=[lambda c: AskApproval("writes outside the workspace")])
    session = await _run_never(tmp_path, [plain], [call("c1", "plain")], hooks)
    (asked,) = of_type(session.events, "approval/asked")
    assert asked.data == {
        "id": asked.data["id"],
        "toolName": "plain",
        "callId": "c1",
        "reason": "writes outside the workspace",
    }
    assert runs == []


async def test_ask_approval_without_a_reason_omits_the_reason_key(tmp_path: Path) -> None:
    plain = counting_tool("plain", [])
    hooks = ToolHooks(pre_execute=[lambda c: AskApproval()])
    session = await _run_never(tmp_path, [plain], [call("c1", "plain")], hooks)
    (asked,) = of_type(session.events, "approval/asked")
    assert set(asked.data) == {"id", "toolName", "callId"}  # absent, never null (dsh)


async def test_deny_in_an_earlier_hook_beats_a_later_ask_approval(tmp_path: Path) -> None:
    later: list[str] = []

    def ask(c: ToolCallRequest) -> AskApproval:
        later.append(c.call_id)
        return AskApproval("later hook")

    danger = counting_tool("danger", [], requires_approval=True)
    hooks = ToolHooks(pre_execute=[lambda c: Deny("not today"), ask])
    session = await _run_never(tmp_path, [danger], [call("c1", "danger")], hooks)
    assert of_type(session.events, "approval/asked") == []
    assert result_text(result_for(session.events, "c1")) == "Error: not today"
    assert later == []  # the chain stopped at the first decision


async def test_ask_approval_in_an_earlier_hook_beats_a_later_deny(tmp_path: Path) -> None:
    plain = counting_tool("plain", [])
    hooks = ToolHooks(pre_execute=[lambda c: AskApproval("first"), lambda c: Deny("second")])
    session = await _run_never(tmp_path, [plain], [call("c1", "plain")], hooks)
    (asked,) = of_type(session.events, "approval/asked")
    assert asked.data["reason"] == "first"
    assert result_text(result_for(session.events, "c1")) == 'Error: the user rejected tool "plain"'


async def test_hooks_run_before_the_tool_call_is_recorded(tmp_path: Path) -> None:
    session = Session("s")
    recorded: list[int] = []

    def hook(c: ToolCallRequest) -> None:
        recorded.append(len(of_type(session.events, "tool/call")))

    plain = counting_tool("plain", [])
    _, _, loop = make_loop(
        tmp_path,
        [tools_step(call("c1", "plain"), call("c2", "plain")), DONE],
        [plain],
        hooks=ToolHooks(pre_execute=[hook]),
        session=session,
    )
    await loop.run_turn("go")
    assert recorded == [0, 1]


async def test_an_unknown_tool_never_asks(tmp_path: Path) -> None:
    danger = counting_tool("danger", [], requires_approval=True)
    session = await _run_never(tmp_path, [danger], [call("c1", "missing")])
    assert of_type(session.events, "approval/asked") == []
    assert result_for(session.events, "c1").data["error"]["code"] == "UNKNOWN_TOOL"


# --------------------------------------------------------------------------- the policy


async def test_never_rejects_with_dsh_text_and_records_the_audit_pair(tmp_path: Path) -> None:
    runs: list[str] = []
    danger = counting_tool("danger", runs, requires_approval=True)
    session = await _run_never(tmp_path, [danger], [call("c1", "danger")])
    ((asked, decided),) = audit(session.events)
    assert set(asked) == ASKED_KEYS
    assert (asked["toolName"], asked["callId"]) == ("danger", "c1")
    assert decided == {"id": asked["id"], "outcome": "rejected"}
    result = result_for(session.events, "c1")
    assert result_text(result) == 'Error: the user rejected tool "danger"'
    assert result.data["message"]["content"][0]["isError"] is True
    assert "error" not in result.data  # a rejection carries no error code
    kinds = [e.type for e in session.events]
    asked_at = kinds.index("approval/asked")
    assert kinds[asked_at : asked_at + 4] == [
        "approval/asked",
        "approval/decided",
        "tool/call",
        "tool/result",
    ]
    assert runs == []


async def test_post_execute_hooks_see_a_rejection(tmp_path: Path) -> None:
    seen: list[tuple[str, bool]] = []

    def post(c: ToolCallRequest, outcome: Any) -> None:
        seen.append((c.call_id, outcome.is_error))

    danger = counting_tool("danger", [], requires_approval=True)
    await _run_never(tmp_path, [danger], [call("c1", "danger")], ToolHooks(post_execute=[post]))
    assert seen == [("c1", True)]


@pytest.mark.parametrize(
    ("policies", "effective"),
    [(["never", "ask"], "ask"), (["ask", "never"], "never"), ([], "ask")],
)
async def test_the_last_approval_policy_event_wins(
    tmp_path: Path, policies: list[str], effective: str
) -> None:
    session = Session("s")
    for policy in policies:
        session.append("approval/policy", {"policy": policy})
    assert effective_policy(session.events) == effective
    danger = counting_tool("danger", [], requires_approval=True)
    _, _, loop = make_loop(
        tmp_path, [tools_step(call("c1", "danger")), DONE], [danger], session=session
    )
    result = await loop.run_turn("go")
    assert result.kind == ("paused" if effective == "ask" else "completed")
    assert of_type(session.events, "approval/policy")[len(policies) :] == []


async def test_loop_config_policy_is_recorded_only_when_it_changes(tmp_path: Path) -> None:
    session = Session("s")
    script = [DONE, DONE, DONE, DONE]
    _, _, loop = make_loop(tmp_path, script, [], session=session, config=NEVER)
    await loop.run_turn("one")
    await loop.run_turn("two")  # the same config: nothing new
    kinds = [e.type for e in session.events]
    assert kinds.count("approval/policy") == 1
    assert kinds.index("approval/policy") < kinds.index("turn/start")  # at the turn's open
    assert of_type(session.events, "approval/policy")[0].data == {"policy": "never"}
    _, _, again = make_loop(tmp_path, script, [], session=session)  # policy None: keep
    await again.run_turn("three")
    assert [e.type for e in session.events].count("approval/policy") == 1
    _, _, ask = make_loop(tmp_path, script, [], session=session, config=LoopConfig())
    await ask.run_turn("four")
    assert [e.data for e in of_type(session.events, "approval/policy")] == [{"policy": "never"}]


async def test_loop_config_ask_on_a_fresh_session_writes_no_policy_event(tmp_path: Path) -> None:
    session, _, loop = make_loop(tmp_path, [DONE], [], config=LoopConfig(approval_policy="ask"))
    await loop.run_turn("go")
    assert of_type(session.events, "approval/policy") == []


async def test_loop_config_policy_change_is_recorded_before_the_next_turn(tmp_path: Path) -> None:
    session = Session("s")
    _, _, first = make_loop(tmp_path, [DONE], [], session=session, config=NEVER)
    await first.run_turn("one")
    _, _, second = make_loop(
        tmp_path, [DONE], [], session=session, config=LoopConfig(approval_policy="ask")
    )
    await second.run_turn("two")
    policies = of_type(session.events, "approval/policy")
    assert [e.data["policy"] for e in policies] == ["never", "ask"]
    assert effective_policy(session.events) == "ask"


async def test_auto_approve_records_allowed_once_and_runs_the_body(tmp_path: Path) -> None:
    runs: list[str] = []
    danger = counting_tool("danger", runs, requires_approval=True)
    session, _, loop = make_loop(
        tmp_path,
        [tools_step(call("c1", "danger")), DONE],
        [danger],
        config=LoopConfig(auto_approve=frozenset({"danger"})),
    )
    result = await loop.run_turn("go")
    assert result.kind == "completed"
    ((asked, decided),) = audit(session.events)
    assert decided == {"id": asked["id"], "outcome": "allowed-once"}
    assert runs == ["danger:c1"]
    assert result_text(result_for(session.events, "c1")) == "danger c1 ran"
    assert_approval_log_valid(session)


async def test_never_wins_over_auto_approve(tmp_path: Path) -> None:
    runs: list[str] = []
    danger = counting_tool("danger", runs, requires_approval=True)
    session, _, loop = make_loop(
        tmp_path,
        [tools_step(call("c1", "danger")), DONE],
        [danger],
        config=LoopConfig(approval_policy="never", auto_approve=frozenset({"danger"})),
    )
    await loop.run_turn("go")
    assert outcomes(session.events) == ["rejected"]
    assert runs == []


async def test_auto_approve_covers_only_the_listed_tools(tmp_path: Path) -> None:
    runs: list[str] = []
    tools = [
        counting_tool("safe", runs, requires_approval=True),
        counting_tool("danger", runs, requires_approval=True),
    ]
    session, _, loop = make_loop(
        tmp_path,
        [tools_step(call("c1", "safe"), call("c2", "danger")), DONE],
        tools,
        config=LoopConfig(auto_approve=frozenset({"safe"})),
    )
    result = await loop.run_turn("go")
    assert result.kind == "paused"
    assert result.approval is not None and result.approval.call_id == "c2"
    assert runs == ["safe:c1"]
    assert_approval_log_valid(session)


def test_loop_config_refuses_an_unknown_policy_and_a_bare_tool_name() -> None:
    from duraloop.errors import ConfigError

    with pytest.raises(ConfigError, match='approval_policy must be "ask", "never" or None'):
        LoopConfig(approval_policy="sometimes")
    with pytest.raises(ConfigError, match="auto_approve must be a set of tool names"):
        LoopConfig(auto_approve="danger")  # type: ignore[arg-type]
    assert LoopConfig(auto_approve={"a", "b"}).auto_approve == frozenset({"a", "b"})  # type: ignore[arg-type]
