"""Property: whatever fails where, every closed step answers every call (Laws 4 and 5).

Hypothesis draws a turn of 1-3 scripted steps, each with 0-4 tool calls mixing parallel-safe
and exclusive instant tools and a random cap, and injects at most one failure: a session
validator vetoing the N-th `tool/call` or `tool/result` append, or the dispatch of the K-th
call raising. After `run_turn` (raising or not) the log must pass `assert_log_valid`: the
invariants, Law 4 for every step, the pairing check and exactly one `turn/end`. A random
search over failure points finds orderings hand-written cases miss.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from duraloop.log import Event
from duraloop.testing import assert_log_valid
from duraloop.tools import ToolCallRequest

from ._support import faulty_pipeline, make_loop, of_type, recorder_tool

steps_strategy = st.lists(
    st.lists(st.sampled_from(["p", "x"]), min_size=0, max_size=4), min_size=1, max_size=3
)
failure_strategy = st.one_of(
    st.none(),
    st.tuples(st.just("veto"), st.sampled_from(["tool/call", "tool/result"]), st.integers(1, 6)),
    st.tuples(st.just("dispatch"), st.just(""), st.integers(1, 6)),
)


class InjectedError(Exception):
    """The fault the property injects."""


def _script(steps: list[list[str]]) -> list[dict[str, Any]]:
    script: list[dict[str, Any]] = []
    for number, kinds in enumerate(steps, start=1):
        if not kinds:
            script.append({"text": f"step {number} answers"})
            return script
        calls = [
            {"id": f"s{number}c{i}", "name": kind, "arguments": {}}
            for i, kind in enumerate(kinds, start=1)
        ]
        script.append({"tool_calls": calls})
    script.append({"text": "done"})
    return script


async def _scenario(
    cwd: Path, steps: list[list[str]], failure: tuple[str, str, int] | None, cap: int
) -> None:
    fired: list[InjectedError] = []
    dispatched: list[str] = []

    async def before_dispatch(call: ToolCallRequest) -> None:
        dispatched.append(call.call_id)
        if failure is not None and failure[0] == "dispatch" and len(dispatched) == failure[2]:
            fired.append(InjectedError(f"dispatch {call.call_id} failed"))
            raise fired[-1]

    record: list[str] = []
    session, _model, loop = make_loop(
        cwd,
        _script(steps),
        [recorder_tool("p", record), recorder_tool("x", record, parallel=False)],
        cap=cap,
        pipeline=faulty_pipeline(before_dispatch=before_dispatch),
    )
    if failure is not None and failure[0] == "veto":
        seen: list[int] = []

        def veto(event: Event) -> None:
            if event.type == failure[1] and not fired:
                seen.append(event.seq)
                if len(seen) == failure[2]:
                    fired.append(InjectedError(f"{failure[1]} #{failure[2]} vetoed"))
                    raise fired[-1]

        session.add_validator(veto)

    raised: BaseException | None = None
    try:
        result = await loop.run_turn("go")
    except InjectedError as exc:
        raised = exc
    if fired:
        assert raised is fired[0], "the original failure propagates"
        reason = of_type(session.events, "turn/end")[0].data["reason"]
        assert reason["kind"] == "error" and str(fired[0]) in reason["error"]["message"]
    else:
        assert raised is None and result.kind == "completed"
    assert_log_valid(session)
    # Law 5: a body ran only for a call that has a tool/call.
    recorded = {e.data["callId"] for e in of_type(session.events, "tool/call")}
    started = {entry.rsplit("-", 1)[1] for entry in record if "-start-" in entry}
    assert started <= recorded


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=steps_strategy, failure=failure_strategy, cap=st.integers(1, 3))
def test_any_single_failure_leaves_every_step_answered(
    tmp_path: Path, steps: list[list[str]], failure: tuple[str, str, int] | None, cap: int
) -> None:
    anyio.run(_scenario, tmp_path, steps, failure, cap, backend="asyncio")
