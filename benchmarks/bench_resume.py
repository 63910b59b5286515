"""Scenario R (README.md#performance): a NEW process resumes a session and builds a request.

Three logs are built once (not timed), then each is resumed 3 times, every time by a fresh
child process working on a fresh copy of the pristine store:

- `10-step` and `1000-step`: the scenario-S session (one turn, N steps x 3 no-op tool
  calls), written by the loop on a durable JSONL store (so with the snapshot its turn end
  writes, docs/store.md#snapshots) with a model that encodes each request as the OpenAI
  adapter sends it (so the snapshot also carries the encoded prefix, as a real session's).
- `100k-event`: ~100k events over many turns (user message; a step with reasoning, text and
  2 tool calls; a step with text and 3 tool calls; a final text step); the last turn runs
  after the last snapshot, and the log is then cut after its last `tool/call` (an
  interrupted final turn) and ends in a torn half line, so the load truncates the tail AND
  appends closers.

Every case is resumed with its snapshot and without it (the copy's snapshot removed), in
alternation.

The child times, with perf_counter, exactly what `duraloop.loop.resume_session` does plus
building the next request (its steps are repeated here so each phase is timed):
`load` (`SessionStore.prepare`: read, scan, validate as `check` does while building the
`Session(seed=...)`, truncate the torn tail, append closers durably; through a snapshot:
verify it, read the tail, restore), `seed` (now empty: prepare built the session),
`writer+loop` (`open_writer`, `AgentLoop`; the end-seed joins the next batch), `derive+pairing`
(`request_history` as a step takes it, without decoding the snapshot's messages, + the loop's
incremental pairing check) and `encode` (the Chat Completions body of the whole history,
`OpenAIChatModel.encode_request` on a fresh adapter, which starts from the snapshot's encoded
prefix and converts only the messages after it; issue 11's target: <= 4 ms for the 1000-step
session).
After the resume, outside its phases, the child also times the Anthropic adapter's cold
encode of the same history and `msgspec.json.encode` of the messages (the reference speed).
The parent also reports the child's whole
wall time (interpreter start and imports included).

    /work/venv/bin/python benchmarks/bench_resume.py [--runs 3] [--events 100000]
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _scenario as sc
import anyio
import msgspec

TARGET_ENCODE_MS = 4.0
"""Issue 11: the first request after resume at msgspec speed (msgspec.json.encode of the
same messages took ~3.9 ms on the machine of the issue's figures)."""
PHASES = ("load", "seed", "writer+loop", "derive+pairing", "encode")


# --------------------------------------------------------------------------- building logs


def _large_turn_script(turn: int) -> list[dict[str, Any]]:
    names = [t.name for t in sc.NOOP_TOOLS]
    return [
        {
            "reasoning": f"Turn {turn}: I should look at two things before answering the user.",
            "text": "Let me check the workspace first.",
            "tool_calls": [{"name": names[k], "arguments": {"i": turn}} for k in range(2)],
        },
        {
            "text": "Now three more checks in parallel.",
            "tool_calls": [{"name": names[k], "arguments": {"i": turn}} for k in range(3)],
        },
        {"text": f"Done with turn {turn}: everything looks fine and nothing needs changing."},
    ]


async def _build(
    root: Path,
    script: Sequence[dict[str, Any]],
    prompts: Sequence[str],
    max_steps: int,
    *,
    session_id: str | None = None,
    snapshot_every: int | None = 1000,
) -> str:
    """Run the loop on a durable JSONL store; it writes snapshots as a real session does.

    With `session_id`, the stored session is resumed and continued instead.
    """
    from duraloop.loop import LoopConfig, SessionSetup, resume_session, start_session

    workspace = root / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    setup = SessionSetup(
        store=sc.JsonlStore(root / "store"),
        model=sc.EncodingModel(script),
        tools=sc.NOOP_TOOLS,
        cwd=workspace,
        config=LoopConfig(max_steps=max_steps, snapshot_every=snapshot_every),
    )
    loop = start_session(setup) if session_id is None else resume_session(session_id, setup)[0]
    for prompt in prompts:
        result = await loop.run_turn(prompt)
        if result.kind != "completed":
            raise RuntimeError(f"building turn ended {result.reason}")
    loop.close()
    return loop.session.id


def build_steps_log(root: Path, steps: int) -> str:
    """Persist the scenario-S session of `steps` steps under `root`."""
    return anyio.run(_build, root, sc.step_script(steps), ["Run the benchmark task."], steps + 1)


def build_large_log(root: Path, events: int) -> tuple[str, int]:
    """Persist a ~`events`-event session, cut into an interrupted turn with a torn tail.

    Returns:
        The session id and the number of complete events left in the file.
    """
    turns = max(1, events // 87 + 1)  # one turn of the script is 87 events
    script = [r for turn in range(1, turns + 1) for r in _large_turn_script(turn)]
    prompts = [f"Task {turn}: check the workspace and report." for turn in range(1, turns + 1)]
    # All turns but the last write snapshots as usual; the last turn (cut below, the crash)
    # runs after the last snapshot, so the resume reads the snapshot plus that turn.
    sid = anyio.run(_build, root, script[:-3], prompts[:-1], 10)
    last = functools.partial(_build, session_id=sid, snapshot_every=None)
    anyio.run(last, root, script[-3:], prompts[-1:], 10)
    path = sc.log_path(sc.JsonlStore(root / "store"), sid)
    data = path.read_bytes()
    cut = data.rfind(b'"type":"tool/call"')
    cut = data.index(b"\n", cut) + 1
    kept = data[:cut]
    following = data[cut : data.index(b"\n", cut)]
    path.write_bytes(kept + following[: len(following) // 2])
    lines = kept.count(b"\n") - 1
    return sid, lines


def copy_to_sqlite(root: Path, session_id: str, target: Path) -> str:
    """Store the JSONL session under `root` in a SQLite store at `target` (one batch).

    The loop over the copied session writes its snapshot as it closes between turns, as
    the loop that wrote the JSONL log did (docs/store.md#snapshots).
    """
    from duraloop.log import Session
    from duraloop.loop import AgentLoop
    from duraloop.store import SqliteStore

    header, events = sc.JsonlStore(root / "store").read(session_id)
    (target / "store").mkdir(parents=True)
    with SqliteStore(target / "sessions.db") as store:
        session = Session(session_id, seed=events, header=header)
        writer = store.open_writer(session)
        model = sc.EncodingModel([{"text": "unused"}])
        loop = AgentLoop(
            session, model=model, tools=sc.NOOP_TOOLS, cwd=header.cwd or ".", durability=writer
        )
        loop.close()
        writer.close()
    if not (target / "sessions.db.snapshots").is_dir():
        raise RuntimeError("the SQLite copy has no snapshot")
    return session_id


# --------------------------------------------------------------------------- the child


def child(root: str, session_id: str) -> None:
    """Resume `session_id` from the store under `root`, build the next request, print timings."""
    from duraloop.llm import ToolSchema
    from duraloop.loop import AgentLoop, default_system_prompt
    from duraloop.store import SessionStore, SqliteStore

    sqlite = Path(root) / "sessions.db"
    store: SessionStore = (
        SqliteStore(sqlite) if sqlite.exists() else sc.JsonlStore(Path(root) / "store")
    )
    model = sc.EncodingModel([{"text": "unused"}])
    marks = [time.perf_counter()]
    # `prepare` is `load` plus the session its validation built (resume_session's first
    # step), so the `seed` phase is empty: the log is validated and folded once.
    loaded, session = store.prepare(session_id)
    marks.append(time.perf_counter())
    marks.append(time.perf_counter())
    writer = store.open_writer(session)
    loop = AgentLoop(
        session,
        model=model,
        tools=sc.NOOP_TOOLS,
        cwd=loaded.header.cwd or ".",
        durability=writer,
    )
    marks.append(time.perf_counter())
    # What a step does before its request: the derived messages and the loop's incremental
    # pairing check (which a snapshot resume starts with the covered messages checked).
    messages = session.request_history()
    loop._state.pairing.check(messages, generation=session.surface.replace_generation)
    marks.append(time.perf_counter())
    system = default_system_prompt(loop.cwd, [t.name for t in loop.registry])
    tools = [ToolSchema(**schema) for schema in loop.registry.schemas()]
    body = sc.encode_request(model._adapter, messages, system, tools)
    marks.append(time.perf_counter())
    materialized = bool(getattr(session.events, "materialized", True))
    messages_decoded = bool(getattr(messages, "materialized", True))
    seeded = bool(getattr(model._adapter._encoder, "seeded", False))
    loop.close()
    # Not phases of the resume (not in its total), timed on the same messages, decoded
    # first (untimed): the Anthropic adapter's cold encode, and msgspec.json.encode of the
    # history as reference.
    decoded = list(messages)
    anthropic = sc.AnthropicMessagesModel("bench-model", api_key="sk-ant-bench-not-used")
    started = time.perf_counter()
    sc.encode_request(anthropic, decoded, system, tools)
    anthropic_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    msgspec.json.encode(decoded)
    msgspec_ms = (time.perf_counter() - started) * 1000
    phases = {name: (marks[i + 1] - marks[i]) * 1000 for i, name in enumerate(PHASES)}
    print(
        json.dumps(
            {
                "phases_ms": phases,
                "anthropic_encode_ms": anthropic_ms,
                "msgspec_encode_ms": msgspec_ms,
                "total_ms": (marks[-1] - marks[0]) * 1000,
                "ready_ms": (marks[-2] - marks[0]) * 1000,
                "events": len(loaded.events),
                "messages": len(messages),
                "request_bytes": len(body),
                "truncated_bytes": loaded.repair.truncated_bytes,
                "closers": len(loaded.repair.closers),
                "snapshot": loaded.snapshot,
                "prefix_decoded": materialized,
                "messages_decoded": messages_decoded,
                "encoder_seeded": seeded,
            }
        )
    )


def run_child(pristine: Path, session_id: str, *, snapshot: bool) -> tuple[dict[str, Any], float]:
    """Copy the pristine store, resume it in a new process; return its report and wall ms.

    Without `snapshot`, the copy has no snapshot files (the whole log is read).
    A pristine directory holding `sessions.db` is a SQLite store (the child opens that).
    """
    with tempfile.TemporaryDirectory(prefix="duraloop-bench-r-") as tmp:
        if (pristine / "sessions.db").exists():
            shutil.copy(pristine / "sessions.db", Path(tmp) / "sessions.db")
            if snapshot:
                shutil.copytree(
                    pristine / "sessions.db.snapshots", Path(tmp) / "sessions.db.snapshots"
                )
        shutil.copytree(pristine / "store", Path(tmp) / "store")
        if not snapshot:
            for path in (Path(tmp) / "store").rglob("session.snapshot"):
                path.unlink()
        started = time.perf_counter()
        out = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--child", tmp, session_id],
            check=True,
            capture_output=True,
            text=True,
        )
        wall = (time.perf_counter() - started) * 1000
    return json.loads(out.stdout.strip().splitlines()[-1]), wall


# --------------------------------------------------------------------------- report


def _median(values: Sequence[float]) -> float:
    return sorted(values)[len(values) // 2]


def measure(runs: int, steps: int, events: int) -> list[sc.Figure]:
    """Build the logs, resume each `runs` times in new processes, print and return figures."""
    summary: list[sc.Figure] = []
    with tempfile.TemporaryDirectory(prefix="duraloop-bench-rb-") as build:
        roots = {name: Path(build) / name for name in ("tiny", "steps", "large")}
        started = time.perf_counter()
        ids = {
            "tiny": build_steps_log(roots["tiny"], 10),
            "steps": build_steps_log(roots["steps"], steps),
            "large": build_large_log(roots["large"], events)[0],
        }
        print(
            f"  built the logs in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        roots["sqlite"] = Path(build) / "sqlite"
        ids["sqlite"] = copy_to_sqlite(roots["steps"], ids["steps"], roots["sqlite"])
        labels = {
            "tiny": "10-step",
            "steps": f"{steps}-step",
            "large": f"{events // 1000}k-event",
            "sqlite": f"{steps}-step SQLite",
        }
        reports: dict[tuple[str, bool], list[tuple[dict[str, Any], float]]] = {}
        for key in ("tiny", "steps", "large", "sqlite"):
            for snapshot in (True, False):
                reports[key, snapshot] = []
            for _ in range(runs):  # interleaved: with, then without, the snapshot
                for snapshot in (True, False):
                    reports[key, snapshot].append(
                        run_child(roots[key], ids[key], snapshot=snapshot)
                    )
            if key == "sqlite":
                size = (roots[key] / "sessions.db").stat().st_size
            else:
                size = sc.log_path(sc.JsonlStore(roots[key] / "store"), ids[key]).stat().st_size
            first = reports[key, True][0][0]
            print(
                f"  {labels[key]}: {first['events']} events, {size / 1e6:.2f} MB, "
                f"{first['total_ms']:.1f} ms (snapshot {first['snapshot']}; decoded: events "
                f"{first['prefix_decoded']}, messages {first['messages_decoded']}; encoder "
                f"seeded {first['encoder_seeded']})",
                file=sys.stderr,
                flush=True,
            )
    print("Scenario R: a new process resumes the session and builds the next request (ms)")
    rows = []
    for (key, snapshot), items in reports.items():
        first = items[0][0]
        row: list[object] = [
            labels[key],
            "yes" if snapshot else "no",
            first["snapshot"],
            first["events"],
            first["messages"],
            f"{first['truncated_bytes']}/{first['closers']}",
        ]
        row += [sc.median_of([r["phases_ms"][p] for r, _ in items]) for p in PHASES]
        row.append(sc.median_of([r["ready_ms"] for r, _ in items]))
        row.append(sc.median_of([r["total_ms"] for r, _ in items]))
        row.append(sc.median_of([w for _, w in items]))
        rows.append(row)
    headers = ("session", "snapshot", "load used", "events", "messages", "torn B/closers")
    print(
        sc.table(
            (*headers, *PHASES, "ready (no encode)", "total (in child)", "process wall"),
            rows,
        )
    )
    print()

    def figure(name: str, values: list[float], target: float | None, unit: str = "ms") -> None:
        median = _median(values)
        verdict = (
            f"<= {target:g} {unit} (ratio {median / target:.2f}x target)" if target else "(info)"
        )
        summary.append(
            sc.Figure(
                "R",
                name,
                sc.median_of(values) + f" {unit}",
                verdict,
                None if target is None else median <= target,
            )
        )

    def ready(key: str, *, snapshot: bool) -> list[float]:
        return [r["ready_ms"] for r, _ in reports[key, snapshot]]

    figure(
        f"resume {labels['steps']} -> request built (no encode)",
        ready("steps", snapshot=True),
        10.0,
    )
    tiny = _median(ready("tiny", snapshot=True))
    ratio = _median(ready("steps", snapshot=True)) / tiny if tiny else float("inf")
    summary.append(
        sc.Figure(
            "R",
            f"ratio R({labels['steps']}) / R({labels['tiny']})",
            f"{ratio:.2f}",
            "<= 2.0",
            ratio <= 2.0,
        )
    )
    steps_runs = reports["steps", True]
    encode = [r["phases_ms"]["encode"] for r, _ in steps_runs]
    body_mb = steps_runs[0][0]["request_bytes"] / 1e6
    figure(
        f"encode the first request after resume ({body_mb:.2f} MB, Chat Completions)",
        encode,
        TARGET_ENCODE_MS,
    )
    figure(
        "  same history, Anthropic Messages adapter",
        [r["anthropic_encode_ms"] for r, _ in steps_runs],
        None,
    )
    reference = [r["msgspec_encode_ms"] for r, _ in steps_runs]
    figure("  same history, msgspec.json.encode of the messages (reference)", reference, None)
    figure(
        f"resume {labels['steps']} + request encoded (whole)",
        [r["total_ms"] for r, _ in reports["steps", True]],
        None,
    )
    figure("  same without the snapshot", ready("steps", snapshot=False), None)
    figure(
        f"{labels['large']}: resume with a snapshot (load+repair+loop)",
        ready("large", snapshot=True),
        100.0,
    )
    figure(f"{labels['large']}: resume without a snapshot", ready("large", snapshot=False), 400.0)
    figure(f"resume {labels['sqlite']} -> request built", ready("sqlite", snapshot=True), 15.0)
    figure(
        f"  whole new process wall, {labels['steps']} with snapshot",
        [w for _, w in reports["steps", True]],
        None,
    )
    print(sc.figures_table(summary))
    return summary


def main(argv: list[str] | None = None) -> list[sc.Figure]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=sc.RUNS)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--child", nargs=2, metavar=("ROOT", "SESSION_ID"))
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return []
    return measure(args.runs, args.steps, args.events)


if __name__ == "__main__":
    main()
