"""`fork_session`: a loop on a persisted child of a stored session (docs/recovery.md#fork)."""

from __future__ import annotations

from pathlib import Path

import pytest

from duraloop import SessionSetup, fork_session, open_session, resume_session, start_session
from duraloop.errors import SessionForkError, UnpairedHistoryError
from duraloop.llm import ScriptedModel
from duraloop.log import Event, SessionHeader
from duraloop.store import MemoryStore
from duraloop.testing import assert_log_valid


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_fork_session_continues_the_parent_history_in_a_new_session(tmp_path: Path) -> None:
    store = MemoryStore()
    parent = start_session(
        SessionSetup(
            store=store,
            model=ScriptedModel([{"text": "one"}]),
            cwd=tmp_path,
        ),
        session_id="p",
    )
    await parent.run_turn("first")
    parent_events = len(parent.session.events)
    parent.close()

    child = fork_session(
        "p", SessionSetup(store=store, model=ScriptedModel([{"text": "two"}])), child_id="c"
    )
    result = await child.run_turn("second")
    child.close()

    assert (child.session.id, result.turn, result.text) == ("c", 2, "two")
    assert [m["role"] for m in child.session.messages] == ["user", "assistant", "user", "assistant"]
    assert len(store.load("p").events) == parent_events  # the parent is untouched
    stored_child = store.load("c")
    assert stored_child.header.parent_session == "p"
    assert_log_valid(child.session)


def test_fork_session_of_a_missing_session_raises_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(SessionForkError) as caught:
        fork_session(
            "nope", SessionSetup(store=MemoryStore(), model=ScriptedModel([]), cwd=tmp_path)
        )
    assert caught.value.code == "SESSION_NOT_FOUND"


def _wedged(store: MemoryStore, tmp_path: Path) -> None:
    """Store session "w": turn 1 asked for c1 and was closed with c1 unanswered."""
    message = {
        "id": "m",
        "role": "assistant",
        "content": [{"type": "tool-call", "id": "c1", "name": "bash", "arguments": "{}"}],
        "source": {"kind": "model", "provider": "scripted", "model": "s"},
    }
    store.backend.materialize(
        SessionHeader(id="w", created_at=1, cwd=str(tmp_path)),
        [
            Event("turn/start", 0, 1, {"turn": 1}),
            Event("step/start", 1, 1, {"turn": 1, "step": 1}),
            Event(
                "assistant/message",
                2,
                1,
                {"turn": 1, "step": 1, "message": message},
                None,
                "append",
            ),
            Event("step/end", 3, 1, {"turn": 1, "step": 1}),
            Event("turn/end", 4, 1, {"turn": 1, "reason": {"kind": "interrupted"}}),
        ],
    )


def test_resume_and_open_session_refuse_unanswered_closed_history_before_writing(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    _wedged(store, tmp_path)
    revision = store.revision("w")
    for opener in (resume_session, open_session):
        with pytest.raises(UnpairedHistoryError, match=r"`duraloop fork w --at 2`") as caught:
            opener("w", SessionSetup(store=store, model=ScriptedModel([{"text": "never"}])))
        assert caught.value.rescue_seq == 2 and caught.value.call_ids == ("c1",)
        assert store.revision("w") == revision


@pytest.mark.anyio
async def test_fork_session_at_the_rescue_seq_continues_a_wedged_session(tmp_path: Path) -> None:
    store = MemoryStore()
    _wedged(store, tmp_path)
    child = fork_session(
        "w",
        SessionSetup(
            store=store,
            model=ScriptedModel([{"text": "ok"}]),
        ),
        boundary=2,
        child_id="c",
    )
    with child:
        result = await child.run_turn("again")
    assert (result.turn, result.text) == (2, "ok")
    codes = [e.data["error"]["code"] for e in child.session.events if e.type == "tool/result"]
    assert codes == ["TOOL_NOT_STARTED"]
    assert_log_valid(child.session)
