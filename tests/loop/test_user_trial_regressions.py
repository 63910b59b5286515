"""Regressions found by a fresh user trying duraloop from the README; each the smallest input.

- a model reusing one tool-call id in a message (some OpenAI-compatible servers do) must
  not wedge the session (Law 4, provider pairing);
- a closed loop must refuse turns instead of running tools it can no longer persist (Law 5);
- cancelling a turn must not wait on an async tool that never looks at its signal;
- continuing a stored session keeps its recorded workspace unless told otherwise;
- a lone UTF-16 surrogate in model output (JSON `\\ud83d`) must not crash the turn at flush.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from duraloop.errors import UsageError
from duraloop.llm import ScriptedModel
from duraloop.log import check_pairing, tool_calls_of
from duraloop.loop import SessionSetup, open_session, start_session
from duraloop.store import JsonlStore, MemoryStore
from duraloop.testing import assert_log_valid
from duraloop.tools import tool


@tool(parallel=True)
def noop() -> str:
    """Do nothing."""
    return "ok"


@tool(parallel=True)
async def stubborn() -> str:
    """Sleep for an hour without ever looking at the cancellation signal."""
    await anyio.sleep(3600)
    return "never"


@pytest.mark.anyio
async def test_duplicate_tool_call_ids_in_one_message_are_renamed_and_answered(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [
            {
                "tool_calls": [
                    {"id": "x", "name": "noop", "arguments": {}},
                    {"id": "x", "name": "noop", "arguments": {}},
                ]
            },
            {"text": "k"},
        ]
    )
    loop = start_session(SessionSetup(store=MemoryStore(), model=model, tools=[noop], cwd=tmp_path))
    result = await loop.run_turn("hi")
    assert result.kind == "completed"
    (assistant,) = [m for m in loop.session.derive_messages() if tool_calls_of(m)]
    assert [c["id"] for c in tool_calls_of(assistant)] == ["x", "x_2"]
    results = [
        e.data["message"]["source"]["callId"]
        for e in loop.session.events
        if e.type == "tool/result"
    ]
    assert results == ["x", "x_2"]
    check_pairing(loop.session.derive_messages())
    assert_log_valid(loop.session)


@pytest.mark.anyio
async def test_a_closed_loop_refuses_a_turn_and_runs_nothing(tmp_path: Path) -> None:
    model = ScriptedModel([{"text": "one"}, {"tool_calls": [{"name": "noop", "arguments": {}}]}])
    loop = start_session(SessionSetup(store=MemoryStore(), model=model, tools=[noop], cwd=tmp_path))
    await loop.run_turn("first")
    events = len(loop.session.events)
    loop.close()
    with pytest.raises(UsageError, match="closed"):
        await loop.run_turn("again")
    assert len(loop.session.events) == events
    assert len(model.requests) == 1


@pytest.mark.anyio
async def test_cancel_does_not_wait_for_an_async_tool_that_ignores_the_signal(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([{"tool_calls": [{"id": "s", "name": "stubborn", "arguments": {}}]}])
    loop = start_session(
        SessionSetup(store=MemoryStore(), model=model, tools=[stubborn], cwd=tmp_path)
    )

    def cancel_when_running(event: object) -> None:
        if getattr(event, "type", None) == "tool/call":
            loop.cancel()

    loop.session.observe(cancel_when_running)
    with anyio.fail_after(10):
        result = await loop.run_turn("wait")
    assert result.kind == "aborted"
    (answer,) = [e for e in loop.session.events if e.type == "tool/result"]
    assert answer.data["error"]["code"] in ("ABORTED", "ABORTED_BEFORE_DISPATCH")
    assert_log_valid(loop.session)


@pytest.mark.anyio
async def test_cancel_mid_body_aborts_an_async_tool_that_ignores_the_signal(tmp_path: Path) -> None:
    started = anyio.Event()

    @tool
    async def sleeper() -> str:
        """Sleep without watching the signal."""
        started.set()
        await anyio.sleep(3600)
        return "never"

    model = ScriptedModel([{"tool_calls": [{"id": "s", "name": "sleeper", "arguments": {}}]}])
    loop = start_session(
        SessionSetup(store=MemoryStore(), model=model, tools=[sleeper], cwd=tmp_path)
    )
    async with anyio.create_task_group() as group:

        async def cancel_once_running() -> None:
            await started.wait()
            loop.cancel()

        group.start_soon(cancel_once_running)
        with anyio.fail_after(10):
            result = await loop.run_turn("wait")
    assert result.kind == "aborted"
    (answer,) = [e for e in loop.session.events if e.type == "tool/result"]
    assert answer.data["error"]["code"] == "ABORTED"
    assert_log_valid(loop.session)


@pytest.mark.anyio
async def test_continuing_a_session_keeps_its_recorded_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    store = MemoryStore()
    first = start_session(
        SessionSetup(store=store, model=ScriptedModel([{"text": "a"}]), cwd=workspace)
    )
    await first.run_turn("one")
    session_id = first.session.id
    first.close()
    again, repair = open_session(
        session_id, SessionSetup(store=store, model=ScriptedModel([{"text": "b"}]))
    )
    with again:
        assert again.cwd == workspace.resolve()
        assert repair is not None and not repair.repaired
        assert (await again.run_turn("two")).turn == 2


def test_starting_in_a_missing_workspace_fails_before_anything_is_created(tmp_path: Path) -> None:
    store = MemoryStore()
    with pytest.raises(UsageError, match="not a directory"):
        start_session(SessionSetup(store=store, model=ScriptedModel([]), cwd=tmp_path / "missing"))
    assert store.list() == []


@tool
def save(content: str) -> str:
    """Echo what would be saved."""
    return content


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ({"text": "ok \ud83d"}, "ok \ufffd"),  # JSON "ok \ud83d": a lone surrogate from the model
        (
            {"tool_calls": [{"id": "c", "name": "save", "arguments": {"content": "a\ud800b"}}]},
            "a\ufffdb",
        ),
    ],
)
async def test_a_lone_surrogate_from_the_model_becomes_u_fffd_and_the_turn_completes(
    tmp_path: Path, response: dict[str, object], expected: str
) -> None:
    store = JsonlStore(tmp_path / "store")
    model = ScriptedModel([response, {"text": "done"}])
    with start_session(SessionSetup(store=store, model=model, tools=[save], cwd=tmp_path)) as loop:
        result = await loop.run_turn("hi")
        session_id = loop.session.id
    assert result.kind == "completed"
    _, events = store.read(session_id)
    texts = [
        json.dumps(e.data, ensure_ascii=False)
        for e in events
        if e.type in ("assistant/message", "tool/result")
    ]
    assert any(expected in text for text in texts)
