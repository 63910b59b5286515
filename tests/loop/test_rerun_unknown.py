"""`AgentLoop.retry_unknown_calls`: re-run idempotent TOOL_OUTCOME_UNKNOWN calls, never others.

See docs/recovery.md#re-running-outcome-unknown-calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from duraloop import SessionSetup, fork_session, resume_session
from duraloop.errors import UsageError
from duraloop.llm import ScriptedModel
from duraloop.log import Event, InvariantChecker, SessionHeader, idempotency_key, text_of
from duraloop.log.vocabulary import OUTCOME_UNKNOWN_TEXT, RETRY_OF
from duraloop.store import MemoryStore
from duraloop.testing import assert_log_valid
from duraloop.tools import Tool, ToolContext, tool


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _crashed(store: MemoryStore, cwd: Path, session_id: str = "s") -> None:
    """Store a session that died with calls c1 (`idem`) and c2 (`side`) recorded, unanswered."""
    message = {
        "id": "m",
        "role": "assistant",
        "content": [
            {"type": "tool-call", "id": "c1", "name": "idem", "arguments": '{"x": 1}'},
            {"type": "tool-call", "id": "c2", "name": "side", "arguments": "{}"},
        ],
        "source": {"kind": "model", "provider": "scripted", "model": "s"},
    }
    user = {"id": "u", "role": "user", "content": [{"type": "text", "text": "go"}]}
    store.backend.materialize(
        SessionHeader(id=session_id, created_at=1, cwd=str(cwd)),
        [
            Event("turn/start", 0, 1, {"turn": 1}),
            Event("step/start", 1, 1, {"turn": 1, "step": 1}),
            Event("user/message", 2, 1, {**user, "source": {"kind": "user"}}, None, "append"),
            Event(
                "assistant/message",
                3,
                1,
                {"turn": 1, "step": 1, "message": message},
                None,
                "append",
            ),
            Event(
                "tool/call",
                4,
                1,
                {"turn": 1, "step": 1, "callId": "c1", "name": "idem", "arguments": '{"x": 1}'},
            ),
            Event(
                "tool/call",
                5,
                1,
                {"turn": 1, "step": 1, "callId": "c2", "name": "side", "arguments": "{}"},
            ),
        ],
    )


class Recorder:
    """The tools: `idem` (idempotent) and `side` (not), recording each body's key."""

    def __init__(self) -> None:
        self.keys: list[tuple[str, str]] = []
        self.on_idem: Any = None

        @tool(idempotent=True)
        def idem(ctx: ToolContext, x: int) -> str:
            """An idempotent call."""
            self.keys.append(("idem", ctx.idempotency_key))
            if self.on_idem is not None:
                self.on_idem()
            return f"idem ran with x={x}"

        @tool
        def side(ctx: ToolContext) -> str:
            """A call with side effects."""
            self.keys.append(("side", ctx.idempotency_key))
            return "side ran"

        self.tools: list[Tool] = [idem, side]


def _setup(store: MemoryStore, recorder: Recorder, script: list[dict[str, Any]]) -> SessionSetup:
    return SessionSetup(store=store, model=ScriptedModel(script), tools=recorder.tools)


def _tool_result_text(messages: Any, call_id: str) -> str:
    for message in messages:
        if message.get("source", {}).get("callId") == call_id:
            return text_of({"content": message["content"][0]["content"]})
    raise AssertionError(f"no result for {call_id}")


@pytest.mark.anyio
async def test_only_idempotent_calls_are_rerun_with_the_same_key_and_linked(
    tmp_path: Path,
) -> None:
    store, recorder = MemoryStore(), Recorder()
    _crashed(store, tmp_path)
    model = ScriptedModel([{"text": "seen it"}])
    loop, repair = resume_session("s", SessionSetup(store=store, model=model, tools=recorder.tools))
    assert len(repair.closers) == 4  # two OU results, step/end, turn/end
    with loop:
        decisions = loop.unknown_calls()
        assert [(d.call.call_id, d.rerun, d.reason, d.cause) for d in decisions] == [
            ("c1", True, "", ""),
            ("c2", False, 'tool "side" is not declared idempotent', "not-idempotent"),
        ]
        report = await loop.retry_unknown_calls()
    assert recorder.keys == [("idem", idempotency_key("s", "c1"))]  # side never ran
    (rerun,) = report.reruns
    assert report.turn is not None and report.turn.kind == "completed"
    assert rerun.call_seq is not None and rerun.result_seq is not None
    events = loop.session.events
    retry_call = events[rerun.call_seq]
    assert retry_call.type == "tool/call"
    assert retry_call.data == {
        "turn": 2,
        "step": 1,
        "callId": "c1-rerun-1",  # an id of its own: dsh's view refuses a repeated one
        "name": "idem",
        "arguments": '{"x": 1}',
        RETRY_OF: 4,
    }
    original = events[decisions[0].call.result_seq]
    replacement = events[rerun.result_seq]
    assert replacement.surface_op == {"op": "replace", "start": original.seq, "end": original.seq}
    assert replacement.source_event_seqs == [original.seq, rerun.call_seq]
    assert replacement.data["message"]["id"] == original.data["message"]["id"]
    assert replacement.data["error"] == original.data["error"]
    text = _tool_result_text(loop.session.messages, "c1")
    assert "idem ran with x=1" in text and idempotency_key("s", "c1") in text
    assert OUTCOME_UNKNOWN_TEXT in _tool_result_text(loop.session.messages, "c2")
    # the model's request after the re-run step holds the re-run output in place
    request_text = _tool_result_text(model.requests[0].messages, "c1")
    assert "idem ran with x=1" in request_text
    start = next(e.seq for e in events if e.type == "turn/start" and e.data["turn"] == 2)
    kinds = [e.type for e in events[start : start + 6]]
    assert kinds == [
        "turn/start",
        "step/start",
        "tool/call",
        "tool/result",
        "step/end",
        "step/start",
    ]
    InvariantChecker().check_all(events)
    assert_log_valid(loop.session)


@pytest.mark.anyio
async def test_a_rerun_call_is_not_rerun_again_and_nothing_left_opens_no_turn(
    tmp_path: Path,
) -> None:
    store, recorder = MemoryStore(), Recorder()
    _crashed(store, tmp_path)
    loop, _ = resume_session("s", _setup(store, recorder, []))
    with loop:
        first = await loop.retry_unknown_calls(continue_with_model=False)
        assert first.turn is not None and first.turn.steps == 1
    loop, _ = resume_session("s", _setup(store, recorder, []))
    with loop:
        seqs = len(loop.session.events)
        second = await loop.retry_unknown_calls()
        assert second.turn is None and second.reruns == ()
        assert [d.reason.split(" (")[0] for d in second.decisions] == [
            "already re-run",
            'tool "side" is not declared idempotent',
        ]
        assert [d.cause for d in second.decisions] == ["already-rerun", "not-idempotent"]
        assert len(loop.session.events) == seqs  # nothing appended
    assert len(recorder.keys) == 1


@pytest.mark.anyio
async def test_a_crash_during_the_rerun_keeps_the_unknown_result_and_allows_another(
    tmp_path: Path,
) -> None:
    store, recorder = MemoryStore(), Recorder()
    _crashed(store, tmp_path)
    durable: list[Event] = []

    def crash_snapshot() -> None:  # what a SIGKILL now would leave: the durable log
        durable.extend(store.read("s")[1])

    recorder.on_idem = crash_snapshot
    loop, _ = resume_session("s", _setup(store, recorder, []))
    with loop:
        await loop.retry_unknown_calls(continue_with_model=False)
    assert durable[-1].type == "tool/call" and durable[-1].data[RETRY_OF] == 4

    crashed = MemoryStore()
    crashed.backend.materialize(store.read("s")[0], durable)
    recorder.on_idem = None
    loop, repair = resume_session("s", _setup(crashed, recorder, []))
    with loop:
        # repair ignored the orphan re-run tool/call: only step/end and turn/end
        assert [e.type for e in repair.closers] == ["step/end", "turn/end"]
        text = _tool_result_text(loop.session.messages, "c1")
        assert text == OUTCOME_UNKNOWN_TEXT
        (again, _) = loop.unknown_calls()
        assert again.rerun  # a re-run that did not finish may be run again
        assert again.call.rerun_call_id == "c1-rerun-2"  # the crashed attempt was the first
        report = await loop.retry_unknown_calls(continue_with_model=False)
        assert report.reruns[0].result_seq is not None
        assert_log_valid(loop.session)
    key = idempotency_key("s", "c1")
    assert recorder.keys == [("idem", key), ("idem", key)]


@pytest.mark.anyio
async def test_a_fork_reruns_an_inherited_call_with_the_parent_key_and_keys_its_own_calls(
    tmp_path: Path,
) -> None:
    store, recorder = MemoryStore(), Recorder()
    _crashed(store, tmp_path, "parent")
    script: list[dict[str, Any]] = [
        {"text": "", "tool_calls": [{"id": "c9", "name": "idem", "arguments": {"x": 2}}]},
        {"text": "done"},
    ]
    child = fork_session("parent", _setup(store, recorder, script), boundary=5, child_id="kid")
    with child:
        report = await child.retry_unknown_calls()
    assert report.turn is not None and report.turn.kind == "completed"
    assert recorder.keys == [
        ("idem", idempotency_key("parent", "c1")),  # inherited: the parent's key
        ("idem", idempotency_key("kid", "c9")),  # the fork's own call
    ]
    assert_log_valid(child.session)


@pytest.mark.anyio
async def test_rerun_refuses_a_prompt_that_the_model_would_never_see(tmp_path: Path) -> None:
    store, recorder = MemoryStore(), Recorder()
    _crashed(store, tmp_path)
    loop, _ = resume_session("s", _setup(store, recorder, []))
    with loop, pytest.raises(UsageError, match="continue_with_model=False"):
        await loop.retry_unknown_calls("hi", continue_with_model=False)
    assert recorder.keys == []


@pytest.mark.anyio
async def test_a_rerun_a_pre_execute_hook_denies_is_not_run_and_keeps_its_unknown_result(
    tmp_path: Path,
) -> None:
    from dataclasses import replace

    from duraloop.tools import Deny, ToolCallRequest, ToolHooks

    def deny(call: ToolCallRequest) -> Deny:
        return Deny(f"no re-runs of {call.name}")

    store, recorder = MemoryStore(), Recorder()
    _crashed(store, tmp_path)
    setup = replace(_setup(store, recorder, []), tool_hooks=ToolHooks(pre_execute=[deny]))
    loop, _ = resume_session("s", setup)
    with loop:
        report = await loop.retry_unknown_calls(continue_with_model=False)
        (rerun,) = report.reruns
        assert (rerun.call_seq, rerun.reason) == (
            None,
            "a pre-execute hook refused it: Error: no re-runs of idem",
        )
        assert _tool_result_text(loop.session.messages, "c1") == OUTCOME_UNKNOWN_TEXT
        assert not any(e.type == "tool/call" and RETRY_OF in e.data for e in loop.session.events)
        assert_log_valid(loop.session)
    assert recorder.keys == []


@pytest.mark.anyio
async def test_a_rerun_the_cancel_reaches_writes_no_replacement(tmp_path: Path) -> None:
    store, recorder = MemoryStore(), Recorder()
    _crashed(store, tmp_path)
    loop, _ = resume_session("s", _setup(store, recorder, []))
    with loop:
        recorder.on_idem = lambda: loop.cancel()  # the person presses Ctrl-C during the body
        report = await loop.retry_unknown_calls(continue_with_model=False)
        (rerun,) = report.reruns
        assert rerun.call_seq is not None and rerun.result_seq is None
        assert report.turn is not None and report.turn.kind == "aborted"
        assert _tool_result_text(loop.session.messages, "c1") == OUTCOME_UNKNOWN_TEXT
        (again, _) = loop.unknown_calls()
        assert again.rerun and again.call.rerun_call_id == "c1-rerun-2"
        assert_log_valid(loop.session)
