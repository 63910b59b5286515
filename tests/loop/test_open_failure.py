"""An entry point whose loop cannot be built releases the session's writer (user trial).

Regression: `resume_session` with a setup whose tools collide opened the writer, then the
loop's construction raised, and the writer stayed open: a correct `resume_session` in the
same process was refused with "already has an open writer". The smallest input: two tools
of one name.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from duraloop import JsonlStore, SessionSetup, resume_session, start_session
from duraloop.errors import DuraloopError
from duraloop.llm import ScriptedModel
from duraloop.tools import tool


def _double(n: int) -> int:
    """Double n."""
    return 2 * n


@pytest.mark.anyio
async def test_a_loop_that_cannot_be_built_leaves_no_writer_open(tmp_path: Path) -> None:
    setup = SessionSetup(
        store=JsonlStore(tmp_path / "st"), model=ScriptedModel([{"text": "one"}]), cwd=tmp_path
    )
    loop = start_session(setup, session_id="s")
    await loop.run_turn("first")
    loop.close()
    colliding = dataclasses.replace(setup, tools=[tool(_double), tool(_double)])
    with pytest.raises(DuraloopError):
        resume_session("s", colliding)
    resumed, _repair = resume_session(
        "s", dataclasses.replace(setup, model=ScriptedModel([{"text": "two"}]))
    )
    result = await resumed.run_turn("second")
    assert result.reason["kind"] == "completed"
    resumed.close()
