"""`fork_session`: a loop on a persisted child of a stored session (session-spec 5.2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from duraloop import fork_session, start_session
from duraloop.errors import SessionForkError
from duraloop.llm import ScriptedModel
from duraloop.store import MemoryStore
from duraloop.testing import assert_log_valid


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_fork_session_continues_the_parent_history_in_a_new_session(tmp_path: Path) -> None:
    store = MemoryStore()
    parent = start_session(store=store, model=ScriptedModel([{"text": "one"}]), cwd=tmp_path, session_id="p")
    await parent.run_turn("first")
    parent_events = len(parent.session.events)
    parent.close()

    child = fork_session("p", store=store, model=ScriptedModel([{"text": "two"}]), child_id="c")
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
        fork_session("nope", store=MemoryStore(), model=ScriptedModel([]), cwd=tmp_path)
    assert caught.value.code == "SESSION_NOT_FOUND"
