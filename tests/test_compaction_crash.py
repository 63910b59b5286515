"""A process SIGKILLed inside a compaction: the load closes it, the history is unchanged.

See docs/compaction.md#failures. A real child process writes a JSONL session and kills
itself with SIGKILL while its summarizer runs: after `compaction/start` is durable (it is
flushed before the summary request), before any replacement. Two owners: a standalone
compaction between turns (`loop.compact()`), and a pressure compaction owned by the open
turn. The parent resumes the session: repair appends `compaction/end {error}` first (then
the interrupted turn's closers), the derived messages are those before the compaction, the
log passes every check, and the session goes on and compacts again.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from duraloop.llm import ScriptedModel
from duraloop.log import is_checkpoint
from duraloop.log.vocabulary import COMPACTION_END, COMPACTION_START, TURN_END
from duraloop.loop import CompactionConfig, LoopConfig, SessionSetup, resume_session
from duraloop.store import JsonlStore
from duraloop.testing import assert_log_valid

CHILD = textwrap.dedent(
    """
    import os, signal, sys, anyio
    from duraloop.llm import ScriptedModel
    from duraloop.loop import CompactionConfig, LoopConfig, SessionSetup, start_session
    from duraloop.store import JsonlStore
    from duraloop.tools import tool

    root, where = sys.argv[1], sys.argv[2]

    @tool
    def big(i: int) -> str:
        '''Return a large output.

        Args:
            i: the call number.
        '''
        return "x" * 6000

    async def die(request):
        os.kill(os.getpid(), signal.SIGKILL)

    calls = [{"tool_calls": [{"id": f"c{i}", "name": "big", "arguments": {"i": i}}]}
             for i in range(6)]
    model = ScriptedModel([{"text": "first"}, *calls, {"text": "done"}],
                          context_window=None if where == "manual" else 6000)
    config = LoopConfig(compaction=CompactionConfig(summarizer=die, pruner=None),
                        system_prompt="test")
    setup = SessionSetup(store=JsonlStore(root), model=model, tools=[big], cwd=root,
                         config=config)

    async def main():
        loop = start_session(setup, session_id="crash")
        await loop.run_turn("the first prompt " * 200)
        if where == "manual":
            await loop.compact()
        else:
            await loop.run_turn("read the pages")
        print("NOT KILLED")

    anyio.run(main)
    """
)


def _summary_model() -> ScriptedModel:
    return ScriptedModel([{"text": "## Current Work\n- resumed after the crash"}] * 5)


@pytest.mark.parametrize("where", ["manual", "pressure"])
def test_sigkill_during_the_summary_is_closed_on_load_with_the_history_unchanged(
    tmp_path: Path, where: str
) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script), str(tmp_path), where],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr
    store = JsonlStore(tmp_path)
    _, stored = store.read("crash")
    starts = [e for e in stored if e.type == COMPACTION_START]
    assert len(starts) == 1 and not [e for e in stored if e.type == COMPACTION_END]
    owner = None if where == "manual" else starts[0].data["turn"]
    assert owner == (None if where == "manual" else 2)

    config = LoopConfig(
        compaction=CompactionConfig(summarizer_model=_summary_model(), pruner=None),
        system_prompt="test",
    )
    setup = SessionSetup(
        store=store, model=ScriptedModel([{"text": "after"}]), cwd=tmp_path, config=config
    )
    loop, _ = resume_session("crash", setup)
    with loop:
        events = loop.session.events
        start = starts[0].seq
        end = next(e for e in events[start:] if e.type == COMPACTION_END)
        assert end.data["error"] == "interrupted: the process ended during compaction"
        assert end.data["turn"] == owner
        after = [e.type for e in events[end.seq + 1 :]]
        if where == "pressure":
            assert TURN_END in after  # the crashed turn closes after the bracket
        assert not any(is_checkpoint(e.data) for e in events if e.type == "user/message")
        assert_log_valid(loop.session)
        assert anyio.run(loop.compact) is not None  # the lock is free again
        assert is_checkpoint(loop.session.derive_messages()[0])
        assert anyio.run(loop.run_turn, "go on").text == "after"
        assert_log_valid(loop.session)
