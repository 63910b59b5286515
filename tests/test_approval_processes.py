"""Durable approvals across real processes (issue 12), and SIGKILL at every point of one.

A turn paused on an asking call (`requires_approval`) is left by its process, decided by a
second and carried out by a third; a process holding the session's writer locks out a second
one. Then a property over kill points: a child (`_approval_child.py`) SIGKILLs itself before
the ask is durable, while paused, before `decide()` has flushed, between the acknowledged
decision and the call's `tool/call`, or inside the approved body; the test resumes in its own
process, finishes the turn if it is still paused, and checks the laws on the stored log:
`duraloop.testing.assert_log_valid` (every closed step's calls answered in order, one
`turn/end` per turn, a provider-acceptable history), no body run twice, no body run without a
durable `allowed-once` before its `tool/call` (nor without a `tool/call`), and no
acknowledged decision lost. Each body appends its call id to a marker file, so the bodies run
are counted from outside the log. JSONL and SQLite stores alike.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import _approval_child as child
from duraloop.log import Event, Session
from duraloop.loop import AgentLoop, resume_session
from duraloop.store import SessionStore
from duraloop.testing import assert_log_valid

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

STORE_KINDS = ("jsonl", "sqlite")
TIMEOUT_SECONDS = 30.0
FEEDBACK = "not the build dir, delete dist instead"


@dataclass(frozen=True)
class Site:
    """Where one session lives: its store and the tools' workspace (with the marker file)."""

    kind: str
    root: Path

    @property
    def store_path(self) -> Path:
        return self.root / ("store" if self.kind == "jsonl" else "store.db")

    @property
    def workspace(self) -> Path:
        return self.root / "ws"

    def plan(self, phase: str, **options: Any) -> child.Plan:
        return child.Plan(
            phase=phase,
            store_kind=self.kind,
            store_path=str(self.store_path),
            workspace=str(self.workspace),
            **options,
        )

    def store(self) -> SessionStore:
        return child.open_store(self.kind, self.store_path)

    def bodies_run(self) -> Counter[str]:
        marker = self.workspace / "marker"
        lines = marker.read_text(encoding="utf-8").splitlines() if marker.exists() else []
        return Counter(lines)


def _new_site(kind: str, root: Path) -> Site:
    site = Site(kind, root)
    site.workspace.mkdir(parents=True)
    return site


@pytest.fixture(params=STORE_KINDS)
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Site:
    return _new_site(str(request.param), tmp_path)


def _spawn(plan: child.Plan) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        child.run_child(plan), capture_output=True, text=True, timeout=TIMEOUT_SECONDS, check=False
    )


def _ok(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def _killed(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == -signal.SIGKILL, (result.returncode, result.stderr)
    return result.stdout.splitlines()


def _stored(site: Site) -> list[Event]:
    """The committed events as stored (no repair, nothing written)."""
    store = site.store()
    try:
        return store.read(child.SESSION)[1]
    finally:
        _close(store)


def _close(store: SessionStore) -> None:
    close = getattr(store, "close", None)
    if close is not None:
        close()


def _check_laws(site: Site, events: Sequence[Event]) -> None:
    """Every law of the module docstring on a finished log and the marker file."""
    assert_log_valid(Session(child.SESSION, seed=events))
    calls = Counter(e.data["callId"] for e in events if e.type == "tool/call")
    assert all(n == 1 for n in calls.values()), f"a call recorded twice: {calls}"
    bodies = site.bodies_run()
    assert all(n == 1 for n in bodies.values()), f"a body ran twice: {bodies}"
    assert set(bodies) <= set(calls), f"a body ran without a tool/call: {bodies} {calls}"
    if child.DANGER_ID in bodies:
        (call_seq,) = [e.seq for e in events if _is_call(e, child.DANGER_ID)]
        assert _outcomes(events, before=call_seq) == ["allowed-once"], describe(events)


def _is_call(event: Event, call_id: str) -> bool:
    return event.type == "tool/call" and event.data["callId"] == call_id


def _outcomes(events: Sequence[Event], *, before: int | None = None) -> list[str]:
    """The outcomes decided for the danger call's asks (before seq `before`)."""
    asks = {
        e.data["id"]
        for e in events
        if e.type == "approval/asked" and e.data["callId"] == child.DANGER_ID
    }
    return [
        str(e.data["outcome"])
        for e in events
        if e.type == "approval/decided"
        and e.data["id"] in asks
        and (before is None or e.seq < before)
    ]


def _result_of(events: Sequence[Event], call_id: str) -> Event:
    (result,) = [
        e
        for e in events
        if e.type == "tool/result" and e.data["message"]["source"]["callId"] == call_id
    ]
    return result


def describe(events: Sequence[Event]) -> str:
    return " ".join(f"{e.seq}:{e.type}" for e in events if not e.type.startswith("assistant/c"))


# --------------------------------------------------------------------- three processes


def test_pause_decide_and_continue_in_three_processes_runs_the_body_once(site: Site) -> None:
    # After a warm-up turn, so the later processes load through its snapshot.
    started = _ok(_spawn(site.plan("run", before=1, after=1, warm=True)))
    assert started[0] == f"PAUSED {child.DANGER_ID}"
    assert site.bodies_run() == Counter({"b0": 1})  # the earlier call ran; danger waits
    assert [e.type for e in _stored(site)][-1] == "approval/asked"  # no step/end nor turn/end

    decided = _ok(_spawn(site.plan("decide", allow=True)))
    assert decided == [f"RESUMED {child.DANGER_ID} closers=0", child.ACK]
    assert site.bodies_run() == Counter({"b0": 1})  # deciding runs nothing
    assert _outcomes(_stored(site)) == ["allowed-once"]
    overruled = _spawn(site.plan("decide", allow=False, feedback="no"))
    assert overruled.returncode == 1 and "is already decided (allowed-once)" in overruled.stderr
    assert _outcomes(_stored(site)) == ["allowed-once"]  # an acknowledged decision stands

    continued = _ok(_spawn(site.plan("continue")))
    assert continued[:2] == [f"RESUMED {child.DANGER_ID} closers=0", "ENDED completed"]
    assert site.bodies_run() == Counter({"b0": 1, child.DANGER_ID: 1, "a0": 1})
    events = _stored(site)
    _check_laws(site, events)
    assert events[-1].type == "turn/end" and events[-1].data["reason"] == {"kind": "completed"}
    result = _result_of(events, child.DANGER_ID)
    assert "error" not in result.data
    assert "deleted build" in json.dumps(result.data["message"]["content"])


def test_a_rejection_decided_elsewhere_never_runs_the_body_and_the_model_hears_why(
    site: Site,
) -> None:
    _ok(_spawn(site.plan("run", before=0, after=1)))
    _ok(_spawn(site.plan("decide", allow=False, feedback=FEEDBACK)))
    continued = _ok(_spawn(site.plan("continue")))
    assert continued[1] == "ENDED completed"
    assert child.DANGER_ID not in site.bodies_run()
    assert site.bodies_run() == Counter({"a0": 1})  # the call after the rejected one still ran

    events = _stored(site)
    _check_laws(site, events)
    assert _outcomes(events) == ["rejected"]
    result = _result_of(events, child.DANGER_ID)
    content = result.data["message"]["content"][0]
    assert content["isError"] is True and FEEDBACK in json.dumps(content)
    # The log's history as the next request derives it carries the feedback, before the
    # assistant message that answered it; and it is what the model was sent.
    messages = Session(child.SESSION, seed=events).derive_messages()
    texts = [json.dumps(m) for m in messages]
    where = next(i for i, text in enumerate(texts) if FEEDBACK in text)
    assert messages[where]["role"] == "user" and messages[-1]["role"] == "assistant"
    assert where < len(messages) - 1
    request = continued[2].removeprefix("REQUEST ")
    assert FEEDBACK in request and json.loads(request)[-1]["role"] == "user"


def test_a_second_process_is_locked_out_while_the_paused_one_holds_the_writer(
    site: Site,
) -> None:
    holder = subprocess.Popen(
        child.run_child(site.plan("hold")),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == f"PAUSED {child.DANGER_ID}"
        locked = _spawn(site.plan("probe"))
        assert locked.returncode == 3 and locked.stdout.splitlines() == ["LOCKED"], locked.stderr
        holder.stdin.write("close\n")
        holder.stdin.flush()
        out, err = holder.communicate(timeout=TIMEOUT_SECONDS)
        assert holder.returncode == 0 and out.splitlines() == ["CLOSED"], err
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert _ok(_spawn(site.plan("probe"))) == [f"RESUMED {child.DANGER_ID} closers=0"]
    assert _ok(_spawn(site.plan("decide-continue")))[1:3] == [child.ACK, "ENDED completed"]
    _check_laws(site, _stored(site))


# --------------------------------------------------------------------- kill anywhere

FIRST_PROCESS_KILLS = ("ask-appended", "paused")


def _finish_in_this_process(site: Site, kill: str, acked: bool, allow: bool) -> None:
    """Resume after the kill, check the state it left, and finish a paused turn."""
    store = site.store()
    try:
        loop, report = resume_session(
            child.SESSION, child.setup(store, site.workspace, child.REST_OF_SCRIPT)
        )
        with loop:
            paused = loop.paused
            interrupted = any(
                e.type == "turn/end" and e.data["reason"] == {"kind": "interrupted"}
                for e in report.closers
            )
            assert (paused is None) == interrupted, (paused, describe(report.closers))
            if acked:  # a decision acknowledged is never lost
                assert paused is None or paused.decided
            if kill == "ask-appended":
                assert paused is None or not paused.decided  # closed as interrupted, or asked
            elif kill == "paused":
                assert paused is not None and not paused.decided
            elif kill == "body":
                assert paused is None  # its tool/call was durable: outcome unknown
                code = _result_of(loop.session.events, child.DANGER_ID).data["error"]["code"]
                assert code == "TOOL_OUTCOME_UNKNOWN"
            else:
                assert paused is not None or kill == "call-appended"
            if paused is not None:
                anyio.run(_decide_and_continue, loop, paused.decided, allow)
    finally:
        _close(store)


async def _decide_and_continue(loop: AgentLoop, decided: bool, allow: bool) -> None:
    if not decided:
        await loop.decide(child.DANGER_ID, allow=allow)
    assert (await loop.continue_turn()).kind == "completed"


def _run_killed_trial(
    site: Site, kill: str, before: int, after: int, allow: bool, warm: bool
) -> None:
    plan = site.plan("run", before=before, after=after, allow=allow, warm=warm)
    acked = False
    if kill in FIRST_PROCESS_KILLS:
        _killed(_spawn(replace(plan, kill=kill)))
    else:
        assert _ok(_spawn(plan))[0] == f"PAUSED {child.DANGER_ID}"
        phase = "decide" if kill == "decided-appended" else "decide-continue"
        out = _killed(_spawn(replace(plan, phase=phase, kill=kill)))
        acked = child.ACK in out
        assert acked == (kill != "decided-appended"), out
    if kill == "body":
        assert site.bodies_run()[child.DANGER_ID] == 1  # it was killed inside the body
    _finish_in_this_process(site, kill, acked, allow)

    events = _stored(site)
    _check_laws(site, events)
    outcomes = _outcomes(events)
    if acked:
        assert outcomes[:1] == ["allowed-once" if allow else "rejected"], describe(events)
    if not allow:
        assert child.DANGER_ID not in site.bodies_run()


@pytest.mark.parametrize("kind", STORE_KINDS)
@settings(max_examples=4, deadline=None, database=None)
@given(
    kill=st.sampled_from(child.KILL_POINTS),
    before=st.integers(min_value=0, max_value=3),
    after=st.integers(min_value=0, max_value=1),
    allow=st.booleans(),
    warm=st.booleans(),
)
@example(kill="ask-appended", before=2, after=1, allow=True, warm=False)
@example(kill="paused", before=0, after=0, allow=False, warm=True)
@example(kill="decided-appended", before=1, after=0, allow=True, warm=False)
@example(kill="continue-begins", before=1, after=1, allow=False, warm=True)
@example(kill="call-appended", before=0, after=1, allow=True, warm=False)
@example(kill="body", before=3, after=1, allow=True, warm=True)
def test_sigkill_anywhere_around_an_approval_resumes_to_a_lawful_log(
    tmp_path_factory: pytest.TempPathFactory,
    kind: str,
    kill: str,
    before: int,
    after: int,
    allow: bool,
    warm: bool,
) -> None:
    allow = allow or kill == "body"  # a rejected call has no body to be killed in
    site = _new_site(kind, tmp_path_factory.mktemp(f"{kind}-{kill}"))
    _run_killed_trial(site, kill, before, after, allow, warm)
