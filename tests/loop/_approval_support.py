"""Builders and whole-log checks shared by the approval tests (docs/approvals.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio.lowlevel

from duraloop.log import (
    Event,
    InvariantChecker,
    Session,
    check_pairing,
    interrupted_turn_closers,
    pending_approval,
)
from duraloop.testing import assert_log_valid
from duraloop.tools import Tool, ToolContext

from ._support import of_type

ASKED_KEYS = {"id", "toolName", "callId", "reason"}


def _any_object(arguments: Any) -> Any:
    if not isinstance(arguments, dict):
        raise ValueError("arguments must be a JSON object")
    return arguments


def counting_tool(
    name: str,
    runs: list[str],
    *,
    parallel: bool = False,
    requires_approval: Any = False,
) -> Tool:
    """A tool appending `<name>:<call id>` to `runs` each time its body runs."""

    async def body(args: Any, ctx: ToolContext) -> str:
        runs.append(f"{name}:{ctx.call_id}")
        await anyio.lowlevel.checkpoint()
        return f"{name} {ctx.call_id} ran"

    return Tool(
        name=name,
        description=f"The {name} tool.",
        parameters={"type": "object", "properties": {}},
        validator=_any_object,
        body=body,
        parallel=parallel,
        requires_approval=requires_approval,
    )


def types(events: Sequence[Event]) -> list[str]:
    """The event types, in order."""
    return [event.type for event in events]


def audit(events: Sequence[Event]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Check the approval audit of a log and return its (asked, decided) pairs in ask order.

    Each `approval/asked` has exactly the keys id/toolName/callId(/reason), comes before any
    `tool/call` of its call, and is answered by exactly one later `approval/decided` with the
    same id; no decision answers an unknown ask. An ask still waiting (a paused log, or one
    closed by repair: its call answered `TOOL_NOT_STARTED`) is paired with `{}`.
    """
    asks: dict[str, Event] = {}
    decided: dict[str, Event] = {}
    for event in events:
        if event.type == "approval/asked":
            data = event.data
            assert set(data) <= ASKED_KEYS and {"id", "toolName", "callId"} <= set(data), data
            assert data["id"] not in asks, f"ask id {data['id']} reused"
            calls = [e for e in of_type(events, "tool/call") if e.data["callId"] == data["callId"]]
            assert all(call.seq > event.seq for call in calls), "tool/call before its ask"
            asks[data["id"]] = event
        elif event.type == "approval/decided":
            ask_id = event.data["id"]
            assert ask_id in asks, f"decision for unknown ask {ask_id}"
            assert ask_id not in decided, f"ask {ask_id} decided twice"
            assert set(event.data) <= {"id", "outcome", "feedback"}, event.data
            decided[ask_id] = event
    pending = pending_approval(events)
    for ask_id, ask in asks.items():
        if ask_id in decided or (pending is not None and pending.ask_id == ask_id):
            continue
        # Else repair (or dsh's reader) closed the turn: the call never started.
        codes = [
            (e.data.get("error") or {}).get("code")
            for e in of_type(events, "tool/result")
            if e.data["message"]["source"]["callId"] == ask.data["callId"]
        ]
        assert codes == ["TOOL_NOT_STARTED"], f"ask {ask_id} undecided, its call answered {codes}"
    return [
        (ask.data, decided[ask_id].data if ask_id in decided else {})
        for ask_id, ask in asks.items()
    ]


def outcomes(events: Sequence[Event]) -> list[str]:
    """The outcomes of the log's `approval/decided` events, in order."""
    return [event.data["outcome"] for event in of_type(events, "approval/decided")]


def assert_approval_log_valid(session: Session) -> None:
    """Assert a log is valid with its approvals: closed, or paused on an approval.

    A closed log passes `assert_log_valid`; a paused one passes the invariants, and closing
    it as dsh's reader does (`interrupted_turn_closers(keep_paused=False)`) gives a log that
    passes `assert_log_valid`. Either way the approval audit holds.
    """
    events = list(session.events)
    audit(events)
    if pending_approval(events) is None:
        assert_log_valid(session)
        return
    InvariantChecker().check_all(events)
    closers = interrupted_turn_closers(events, keep_paused=False)
    assert closers, "a paused log must need closers for dsh's reader"
    closed = Session(session.id, seed=[*events, *closers])
    assert_log_valid(closed)
    check_pairing(closed.derive_messages())
