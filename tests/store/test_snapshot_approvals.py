"""Snapshots of sessions with approvals (docs/store.md#snapshots, docs/approvals.md).

The law of test_snapshots.py for these sessions: loading with the snapshot gives exactly
the state loading without it gives, including the approval state a snapshot must carry or
leave to the tail: the effective policy (set by `approval/policy` events, possibly before
the snapshot), a paused final turn, a decided-but-not-continued one.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from duraloop.llm import ScriptedModel
from duraloop.loop import AgentLoop, LoopConfig, SessionSetup, resume_session, start_session
from duraloop.store import JsonlStore, SessionStore, SqliteStore
from duraloop.tools import Tool, ToolContext

RUNS: list[str] = []


def _tool(name: str, *, asks: bool) -> Tool:
    async def body(arguments: Any, context: ToolContext) -> str:
        RUNS.append(context.call_id)
        await anyio.lowlevel.checkpoint()
        return f"{name} ran {context.call_id}"

    return Tool(
        name=name,
        description=f"The {name} tool.",
        parameters={"type": "object", "properties": {}},
        validator=lambda arguments: arguments,
        body=body,
        parallel=True,
        requires_approval=asks,
    )


TOOLS = [_tool("plain", asks=False), _tool("danger", asks=True)]

# A turn: one model step calling these tools (True: asks), and the answer to each ask in
# order while the policy is "ask" ("cancel" closes the turn).
Turn = tuple[list[bool], list[str]]
# A process: the policy its LoopConfig sets (None keeps the session's), and its turns.
Process = tuple[str | None, list[Turn]]


def _script(turns: list[Turn], policy: str) -> list[Any]:
    """The model's responses for `turns` run under `policy`: a tool step, then an answer
    unless an ask is cancelled (the turn closes without another request)."""
    script: list[Any] = []
    for number, (calls, answers) in enumerate(turns):
        names = ["danger" if asks else "plain" for asks in calls]
        script.append(
            {
                "text": f"turn {number}",
                "tool_calls": [
                    {"id": f"t{number}c{i}", "name": name, "arguments": {}}
                    for i, name in enumerate(names)
                ],
            }
        )
        asked = answers[: calls.count(True)] if policy == "ask" else []
        if "cancel" not in asked:
            script.append({"text": f"turn {number} done"})
    return script


async def _run_process(
    store: SessionStore,
    workspace: Path,
    session_id: str | None,
    process: Process,
    *,
    every: int | None,
    policy_before: str,
    tail: str,
) -> tuple[str, str]:
    """Run one process's turns, answering asks as scripted; the last turn of the last process
    may stay paused (`tail` "paused") or decided and not continued ("decided")."""
    policy, turns = process
    effective = policy or policy_before
    setup = SessionSetup(
        store=store,
        model=ScriptedModel(_script(turns, effective)),
        tools=TOOLS,
        cwd=workspace,
        config=LoopConfig(snapshot_every=every, approval_policy=policy, retry=None),
    )
    loop = start_session(setup) if session_id is None else resume_session(session_id, setup)[0]
    with loop:
        for number, (_calls, answers) in enumerate(turns):
            last = number == len(turns) - 1
            result = await loop.run_turn(f"prompt {number}")
            pending = list(answers)
            while result.kind == "paused":
                answer = pending.pop(0) if pending else "allow"
                waiting = loop.pending_approvals()[0]
                if last and tail == "paused" and not pending:
                    break
                if answer == "cancel":
                    loop.cancel()
                    break
                await loop.decide(waiting.call_id, allow=answer == "allow", feedback="no")
                if last and tail == "decided" and not pending:
                    break
                result = await loop.continue_turn()
    return loop.session.id, effective


def _state(store: SessionStore, session_id: str, workspace: Path) -> tuple[dict[str, Any], str]:
    loaded, session = store.prepare(session_id)
    loop = AgentLoop(session, model=ScriptedModel([]), tools=TOOLS, cwd=workspace)
    return {
        "loaded": list(loaded.events),
        "closers": loaded.repair.closers,
        "events": [*session.events[:-1], session.events[-1].type],  # the end-seed's time
        "messages": session.derive_messages(),
        "generation": session.surface.replace_generation,
        "last_turn": loop.last_turn,
        "policy": loop._state.approval_policy,
        "paused": loop.paused,
        "pending": loop.pending_approvals(),
        "request": (loop._state.request.header, loop._state.request.context),
        "usage": loop.usage,
    }, loaded.snapshot


def _open(kind: str, root: Path) -> SessionStore:
    return JsonlStore(root / "jsonl") if kind == "jsonl" else SqliteStore(root / "sessions.db")


def _without_snapshots(root: Path) -> None:
    for path in root.rglob("*.snapshot"):  # JSONL's session.snapshot, SQLite's <id>.snapshot
        path.unlink()


def _compare(kind: str, root: Path, tmp: Path, session_id: str, workspace: Path) -> Any:
    """Load the session with and without its snapshot; assert equal; return the state."""
    a, b = tmp / "a", tmp / "b"
    shutil.copytree(root, a)
    shutil.copytree(root, b)
    _without_snapshots(b)
    store_a, store_b = _open(kind, a), _open(kind, b)
    try:
        with_snapshot, used = _state(store_a, session_id, workspace)
        without, none = _state(store_b, session_id, workspace)
    finally:
        for store in (store_a, store_b):
            if isinstance(store, SqliteStore):
                store.close()
    assert none == "none"
    assert with_snapshot == without
    return with_snapshot, used


def _session(
    kind: str, root: Path, workspace: Path, processes: list[Process], every: int, tail: str
) -> tuple[str, str]:
    session_id: str | None = None
    policy = "ask"
    for index, process in enumerate(processes):
        store = _open(kind, root)
        try:
            session_id, policy = anyio.run(
                functools.partial(
                    _run_process,
                    store,
                    workspace,
                    session_id,
                    process,
                    every=every,
                    policy_before=policy,
                    tail=tail if index == len(processes) - 1 else "closed",
                )
            )
        finally:
            if isinstance(store, SqliteStore):
                store.close()
    assert session_id is not None
    return session_id, policy


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_policy_set_before_the_snapshot_survives_a_load_through_it(
    tmp_path: Path, kind: str
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    root = tmp_path / "store"
    processes: list[Process] = [("never", [([True], [])]), (None, [([False], [])])]
    sid, _ = _session(kind, root, workspace, processes, every=1, tail="closed")
    state, used = _compare(kind, root, tmp_path, sid, workspace)
    assert used == "used"
    assert state["policy"] == "never"


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
@pytest.mark.parametrize("tail", ["paused", "decided"])
def test_a_paused_tail_after_a_snapshot_loads_paused_either_way(
    tmp_path: Path, kind: str, tail: str
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    root = tmp_path / "store"
    processes: list[Process] = [
        (None, [([False, True], ["allow"]), ([True], ["reject"])]),
        (None, [([False, True, False], [])]),
    ]
    sid, _ = _session(kind, root, workspace, processes, every=1, tail=tail)
    state, used = _compare(kind, root, tmp_path, sid, workspace)
    assert used == "used"
    assert state["closers"] == []
    assert state["paused"] is not None and state["paused"].call_id == "t0c1"
    assert state["paused"].decided is (tail == "decided")
    assert len(state["pending"]) == (0 if tail == "decided" else 1)


_turn = st.tuples(
    st.lists(st.booleans(), min_size=1, max_size=3),
    st.lists(st.sampled_from(["allow", "reject", "cancel"]), max_size=3),
)
_process = st.tuples(
    st.sampled_from([None, None, "ask", "never"]), st.lists(_turn, min_size=1, max_size=3)
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    processes=st.lists(_process, min_size=1, max_size=3),
    every=st.sampled_from([1, 9, 1000]),
    tail=st.sampled_from(["closed", "paused", "decided"]),
    kind=st.sampled_from(["jsonl", "sqlite"]),
)
def test_property_approval_sessions_load_the_same_with_and_without_the_snapshot(
    tmp_path_factory: pytest.TempPathFactory,
    processes: list[Process],
    every: int,
    tail: str,
    kind: str,
) -> None:
    """Sessions with paused, decided-not-continued, cancelled and policy-switching turns,
    over several processes: the load through the snapshot equals the whole-log load."""
    tmp = tmp_path_factory.mktemp("appr")
    workspace = tmp / "ws"
    workspace.mkdir()
    root = tmp / "store"
    sid, policy = _session(kind, root, workspace, processes, every=every, tail=tail)
    state, used = _compare(kind, root, tmp, sid, workspace)
    event(f"snapshot {used.split(':')[0]}, paused {state['paused'] is not None}")
    assert state["policy"] == policy
    assert state["closers"] == []  # paused or closed: never repaired
    if state["paused"] is not None:
        assert tail in ("paused", "decided")
