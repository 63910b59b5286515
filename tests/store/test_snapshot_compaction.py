"""Snapshots of compacted sessions (docs/store.md#snapshots, docs/compaction.md#the-estimate).

The law of test_snapshots.py for sessions that compacted (pressure and overflow summaries,
pruned tool results, manual compactions): loading with the snapshot gives exactly the state
loading without it gives, including what compaction keeps in the snapshot (`LoopFold.
compaction`: the priced surface, the calibrated estimate, the lock), and a further turn that
compacts again writes the same log either way. A snapshot without the compaction fold (one
written before compaction, or by a loop with compaction off) or with a damaged one is not
believed: the loop folds the log and reaches the same state.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from duraloop.errors import CompactionError, LlmError
from duraloop.llm import ScriptedModel
from duraloop.log import LazyEvents, PrunerConfig, event_to_json
from duraloop.log.vocabulary import (
    COMPACTION_END,
    COMPACTION_PRUNE,
    COMPACTION_START,
    CONTEXT_WINDOW_EXCEEDED,
)
from duraloop.loop import (
    AgentLoop,
    CompactionConfig,
    LoopConfig,
    SessionSetup,
    resume_session,
    start_session,
)
from duraloop.loop._compaction import Compactor
from duraloop.store import JsonlStore, SessionStore, SqliteStore
from duraloop.tools import Tool, ToolContext
from loop._compaction_support import TestSummarizer

BACKENDS = ["jsonl", "jsonl-zstd", "sqlite"]
WINDOW = 2000  # tokens: a few 1,500-character outputs reach the threshold
# A turn: its steps (each the sizes of its parallel tool outputs), then whether it ends in
# an overflowing request (compacted and retried) rather than a plain answer, and whether a
# manual compaction follows it.
Turn = tuple[list[list[int]], bool, bool]
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}")


async def _sized(arguments: Any, context: ToolContext) -> str:
    return (f"{context.call_id}:" + "x" * int(arguments["n"]))[: int(arguments["n"])]


TOOLS = [
    Tool(
        name="sized",
        description="Return an output of n characters.",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
        validator=lambda arguments: arguments,
        body=_sized,
        parallel=True,
    )
]


@contextmanager
def _store(backend: str, root: Path) -> Iterator[SessionStore]:
    """The store of `backend` under `root` (a SQLite one closed afterwards, to be copied)."""
    if backend == "sqlite":
        with SqliteStore(root / "sessions.db") as store:
            yield store
    else:
        yield JsonlStore(root / "sessions", compression="zstd" if "zstd" in backend else "none")


def _snapshots(root: Path) -> list[Path]:
    return [*root.rglob("session.snapshot"), *root.rglob("sessions.db.snapshots/*.snapshot")]


def _copy(root: Path, to: Path, *, snapshot: bool) -> Path:
    """Copy the store; without `snapshot`, delete its snapshots (a load reads the log)."""
    shutil.copytree(root, to)
    if not snapshot:
        for path in _snapshots(to):
            path.unlink()
    return to


def _config(every: int | None, *, compaction: bool = True) -> LoopConfig:
    return LoopConfig(
        max_steps=10,
        retry=None,
        snapshot_every=every,
        system_prompt="You are a test agent.",
        compaction=CompactionConfig(
            summarizer=TestSummarizer(),
            threshold_ratio=0.6,
            retain_tokens=200,
            pruner=PrunerConfig(800, 200, 100),
        )
        if compaction
        else None,
    )


def _script(turns: list[Turn], tag: str) -> list[Any]:
    script: list[Any] = []
    for number, (steps, overflow, _) in enumerate(turns):
        for step, sizes in enumerate(steps):
            calls = [
                {"id": f"{tag}{number}s{step}c{k}", "name": "sized", "arguments": {"n": n}}
                for k, n in enumerate(sizes)
            ]
            script.append({"text": "", "tool_calls": calls})
        if overflow:
            script.append({"error": {"code": CONTEXT_WINDOW_EXCEEDED, "message": "too long"}})
        script.append({"text": f"turn {tag}{number} done"})
    return script


def _setup(store: SessionStore, workspace: Path, script: list[Any], **config: Any) -> SessionSetup:
    model = ScriptedModel(script, context_window=WINDOW)
    return SessionSetup(
        store=store, model=model, tools=TOOLS, cwd=workspace, config=_config(**config)
    )


async def _run(
    store: SessionStore,
    workspace: Path,
    turns: list[Turn],
    *,
    session_id: str | None,
    tag: str = "t",
    every: int | None,
    compaction: bool = True,
) -> str:
    """Run `turns` (compacting manually after those that say so); return the session id."""
    setup = _setup(store, workspace, _script(turns, tag), every=every, compaction=compaction)
    loop = start_session(setup) if session_id is None else resume_session(session_id, setup)[0]
    with loop:
        for number, (_, _, compact) in enumerate(turns):
            try:
                await loop.run_turn(f"prompt {tag}{number} " + "p" * 200)
            except LlmError:
                pass  # an overflow compaction found nothing to shadow: the turn failed
            if compact:
                try:
                    await loop.compact()
                except CompactionError:
                    pass  # e.g. the summary would not be smaller
    return loop.session.id


def _state(store: SessionStore, session_id: str, workspace: Path) -> dict[str, Any]:
    """What a loop over the loaded session knows, compaction first (from the snapshot's
    fold, or folded from the log)."""
    loaded, session = store.prepare(session_id)
    loop = AgentLoop(
        session,
        model=ScriptedModel([], context_window=WINDOW),
        tools=TOOLS,
        cwd=workspace,
        config=_config(None),
    )
    compactor = loop.compaction
    assert compactor is not None
    fold, estimate = compactor.fold.to_json(), compactor.estimate()
    events = session.events
    prefix_decoded = not isinstance(events, LazyEvents) or events.materialized
    return {
        "snapshot": loaded.snapshot,
        "prefix_decoded": prefix_decoded,  # only for the with-snapshot load's own checks
        "repair": (loaded.repair.truncated_bytes, [e.type for e in loaded.repair.closers]),
        "fold": fold,
        "estimate": estimate,
        "events": [*events[:-1], events[-1].type],  # the new end-seed's time is the clock's
        "messages": session.derive_messages(),
        "nodes": list(session.surface.nodes),
        "generation": session.surface.replace_generation,
        "last_turn": loop.last_turn,
        "usage": loop.usage,
    }


def _same(a: dict[str, Any], b: dict[str, Any], *, ids: bool = True) -> None:
    """Assert two loads' states are equal (but how they were loaded); without `ids`, up to
    the random ids and times of what two processes wrote (`_normalized`)."""
    ignored = ("snapshot", "prefix_decoded") if ids else ("snapshot", "prefix_decoded", "events")
    left = {k: v for k, v in a.items() if k not in ignored}
    right = {k: v for k, v in b.items() if k not in ignored}
    if not ids:
        left["messages"] = _renamed(repr(left["messages"]), {})
        right["messages"] = _renamed(repr(right["messages"]), {})
    assert left == right


def _renamed(text: str, seen: dict[str, str]) -> str:
    """`text` with each random id replaced by its order of appearance (in `seen`)."""
    return UUID.sub(lambda match: seen.setdefault(match.group(0), f"id{len(seen)}"), text)


def _normalized(store: SessionStore, session_id: str) -> list[Any]:
    """The stored log without its times, each random id replaced by its order of appearance."""
    _, events = store.read(session_id)
    seen: dict[str, str] = {}
    normalized = []
    for stored in events:
        data = event_to_json(stored)
        data.pop("time", None)
        normalized.append(_renamed(repr(data), seen))
    return normalized


def _loads_and_continues_alike(backend: str, tmp: Path, root: Path, sid: str) -> None:
    """Load with and without the snapshot: equal state; one more compacting turn on each:
    the same log and, loaded again, the same state."""
    workspace = tmp / "ws"
    a = _copy(root, tmp / "a", snapshot=True)
    b = _copy(root, tmp / "b", snapshot=False)
    with _store(backend, a) as store:
        with_snapshot = _state(store, sid, workspace)
    with _store(backend, b) as store:
        without = _state(store, sid, workspace)
    assert without["snapshot"] == "none"
    _same(with_snapshot, without)
    more: list[Turn] = [([[1500, 1500], [1500]], False, True)]
    logs, states = [], []
    for copy in (a, b):
        with _store(backend, copy) as store:
            before = len(store.read(sid)[1])
            anyio.run(lambda: _run(store, workspace, more, session_id=sid, tag="m", every=None))
            _, events = store.read(sid)
            assert any(e.type == COMPACTION_START for e in events[before:]), "compacted again"
            logs.append(_normalized(store, sid))
            states.append(_state(store, sid, workspace))
    assert logs[0] == logs[1]
    _same(states[0], states[1], ids=False)


def _start(backend: str, tmp: Path, turns: list[Turn], every: int | None) -> tuple[Path, str]:
    workspace = tmp / "ws"
    workspace.mkdir()
    root = tmp / "store"
    root.mkdir()
    with _store(backend, root) as store:
        sid = anyio.run(lambda: _run(store, workspace, turns, session_id=None, every=every))
    return root, sid


COMPACTING: list[Turn] = [
    ([[1500], [1500, 300]], False, False),  # pressure before step 3: prune, then a summary
    ([[300]], True, False),  # an overflow: compacted, retried in the same step
    ([[1500, 1500]], False, True),  # then a manual compaction between turns
    ([[10]], False, False),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_compacted_session_loads_the_same_with_and_without_its_snapshot(
    tmp_path: Path, backend: str
) -> None:
    root, sid = _start(backend, tmp_path, COMPACTING, every=5)
    with _store(backend, _copy(root, tmp_path / "check", snapshot=True)) as store:
        state = _state(store, sid, tmp_path / "ws")
    assert state["snapshot"] == "used"
    assert not state["prefix_decoded"], "the fold came from the snapshot, not the prefix"
    with _store(backend, root) as store:  # the tail after the snapshot compacts too
        anyio.run(
            lambda: _run(store, tmp_path / "ws", COMPACTING, session_id=sid, tag="l", every=None)
        )
        loaded, session = store.prepare(sid)
        _, events = store.read(sid)
    assert loaded.snapshot == "used" and session.restored_from is not None
    covered = session.restored_from.count
    for part in (events[:covered], events[covered:]):  # before the snapshot, and after it
        kinds = [e.type for e in part]
        assert kinds.count(COMPACTION_START) >= 2 and COMPACTION_PRUNE in kinds
        assert any(e.type == COMPACTION_START and e.data["turn"] is None for e in part)
    _loads_and_continues_alike(backend, tmp_path, root, sid)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_snapshot_without_a_compaction_fold_is_folded_from_the_log(
    tmp_path: Path, backend: str
) -> None:
    """A snapshot of a loop with compaction off carries no compaction fold (as one written
    before compaction): a loop with compaction on folds the log and gets the same state."""
    root, sid = _start(backend, tmp_path, COMPACTING, every=None)
    with _store(backend, root) as store:
        plain: list[Turn] = [([[10]], False, False)]
        anyio.run(
            lambda: _run(
                store, tmp_path / "ws", plain, session_id=sid, tag="o", every=1, compaction=False
            )
        )
    assert _snapshots(root)
    with _store(backend, _copy(root, tmp_path / "check", snapshot=True)) as store:
        loaded, session = store.prepare(sid)
        assert loaded.snapshot == "used"
        assert session.restored_from is not None
        assert session.restored_from.loop.get("compaction") is None
    with _store(backend, _copy(root, tmp_path / "state", snapshot=True)) as store:
        assert _state(store, sid, tmp_path / "ws")["prefix_decoded"], "folded from the log"
    _loads_and_continues_alike(backend, tmp_path, root, sid)


DAMAGES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "garbage": lambda fold: {"fed": fold["fed"]},  # not a fold: from_json fails
    "nodes": lambda fold: {**fold, "nodes": [0, 1, 2], "prices": [1, 1, 1]},  # another surface
    "fed": lambda fold: {**fold, "fed": fold["fed"] - 1},  # not the snapshot's event count
    "prices": lambda fold: {**fold, "prices": fold["prices"][:-1]},  # lengths differ
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_compaction_fold_in_the_snapshot_is_not_believed(
    tmp_path: Path, damage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot is whole (its digest matches) but its compaction fold lies: the loop
    folds the log instead and reaches the state of a load without the snapshot."""
    real = Compactor.fold_json

    def damaged(self: Compactor) -> dict[str, Any] | None:
        fold = real(self)
        return None if fold is None else DAMAGES[damage](fold)

    monkeypatch.setattr(Compactor, "fold_json", damaged)
    root, sid = _start("jsonl", tmp_path, COMPACTING, every=3)
    monkeypatch.undo()
    with _store("jsonl", _copy(root, tmp_path / "check", snapshot=True)) as store:
        state = _state(store, sid, tmp_path / "ws")
    assert state["snapshot"] == "used"
    assert state["prefix_decoded"], "the damaged fold was not believed: the log was folded"
    _loads_and_continues_alike("jsonl", tmp_path, root, sid)


# --------------------------------------------------------------------------- the property

_step = st.lists(st.sampled_from([10, 300, 1500]), min_size=1, max_size=3)
_turn = st.tuples(st.lists(_step, max_size=3), st.booleans(), st.booleans())


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    first=st.lists(_turn, min_size=1, max_size=4),
    later=st.lists(_turn, max_size=2),
    every=st.sampled_from([1, 7, 1000]),
    backend=st.sampled_from(BACKENDS),
    cut=st.one_of(st.none(), st.floats(0.0, 1.0)),
)
def test_property_compacted_sessions_load_the_same_with_and_without_the_snapshot(
    tmp_path_factory: pytest.TempPathFactory,
    first: list[Turn],
    later: list[Turn],
    every: int,
    backend: str,
    cut: float | None,
) -> None:
    """Random sessions that compact (pressure, overflow, manual, pruned results), snapshots
    every few events, then more turns by a writer taking none (a longer tail), and a crash
    (a JSONL log cut at a random byte, maybe inside a compaction): the loads with and
    without the snapshot agree, and so do the logs of one more compacting turn."""
    tmp = tmp_path_factory.mktemp("prop")
    root, sid = _start(backend, tmp, first, every=every)
    if later:
        with _store(backend, root) as store:
            anyio.run(lambda: _run(store, tmp / "ws", later, session_id=sid, tag="l", every=None))
    with _store(backend, root) as store:
        _, events = store.read(sid)
    event(f"compactions: {min(3, sum(e.type == COMPACTION_START for e in events))}")
    event(f"snapshot: {'yes' if _snapshots(root) else 'no'}")
    if cut is not None and backend != "sqlite":  # a crash: the log ends at a random byte
        (log,) = root.rglob("session.jsonl*")
        data = log.read_bytes()
        log.write_bytes(data[: int(len(data) * (0.25 + 0.75 * cut))])
    try:
        with _store(backend, _copy(root, tmp / "probe", snapshot=True)) as store:
            closers = _state(store, sid, tmp / "ws")["repair"][1]
        event(f"repair closes a compaction: {COMPACTION_END in closers}")
    except Exception as exc:  # the same refusal must come without a snapshot
        event(f"refused: {type(exc).__name__}")
        with pytest.raises(type(exc)), _store(backend, _copy(root, tmp / "c", snapshot=False)) as b:
            _state(b, sid, tmp / "ws")
        return
    _loads_and_continues_alike(backend, tmp, root, sid)
