"""Crash campaign: SIGKILL real `duraloop run`/`resume` processes, resume, and check every law.

    python benchmarks/crash_campaign.py --kills 1000 --seed 1 [--stores jsonl,jsonl+zstd,sqlite]

Each trial is one session in a fresh store, driven by a chain of real CLI processes with the
scripted model (`--model scripted:FILE`): `duraloop run --session ID`, then `duraloop resume
ID continue` or `duraloop run --session ID` again. Every process but the last is killed with
SIGKILL at one moment of one kind:

- `uniform`: a uniform random time in the process's expected lifetime;
- `after-tool-call`: right after the k-th new `tool/call` is on disk;
- `after-assistant-message`: right after the k-th new `assistant/message` is on disk;
- `after-side-effect`: right after the k-th new side effect (a ledger line of a `bash` call,
  the file of a `write_file` or `edit_file` call) is on disk;
- `during-repair`: a process resuming an interrupted turn, killed at its first write to the
  log (plus 0-2 more units) or at a uniform time before its first write is expected.

The campaign watches the log and the ledger by polling (every 2 ms); production code has no
test hooks. After each process ends, every process the kill orphaned (a `bash` command, a
child between fork and exec) is killed too, as a machine crash would, and the laws of
`_crash_laws` are checked on the store as the campaign's own reader sees it. The last process
of a trial runs a turn to completion, then `duraloop check ID --json` must call the log valid.

Every step of a script mixes a parallel group (`read_file`, `list_dir`, `grep`, among them a
`grep` over a few thousand files that runs for a while) with exclusive `write_file`,
`edit_file` and `bash` calls; each `bash` call appends `<id>:begin` and `<id>:end` to a ledger
outside the workspace. A trial with a violation keeps its directory (scripts, store, ledger,
each process's output) and prints its history as a reproduction.

Prints the kills per moment kind and store, the violations by law (each must be 0) and the
time taken; exits 1 if a law was violated (a law in `KNOWN`, a reported bug awaiting its fix,
only with `--strict`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _crash_laws as laws

STORES = ("jsonl", "jsonl+zstd", "sqlite")
KINDS = (
    "uniform",
    "after-tool-call",
    "after-assistant-message",
    "after-side-effect",
    "during-repair",
)
POLL_SECONDS = 0.002
PROCESS_TIMEOUT_SECONDS = 90.0
TREE_FILES = 4000
KNOWN: dict[str, str] = {}
"""Laws with a known, reported bug: counted and shown, but `--strict` alone fails on them."""
_SCRUBBED = (
    "DURALOOP_MODEL",
    "DURALOOP_HOME",
    "DURALOOP_STORE",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "DEEPSEEK_API_KEY",
    "DEEPSEEK_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
)


@dataclass
class Report:
    """What a campaign did and found."""

    kills: Counter[tuple[str, str]] = field(default_factory=Counter)
    missed: Counter[tuple[str, str]] = field(default_factory=Counter)
    violations: list[tuple[str, str, str]] = field(default_factory=list)
    """(law, store, detail), the detail naming the trial."""
    reproductions: list[str] = field(default_factory=list)
    owed: Counter[str] = field(default_factory=Counter)
    """Recovery results checked: calls a kill left unanswered, by the code repair owed them."""
    processes: int = 0
    trials: int = 0
    seconds: float = 0.0

    def unexpected(self) -> list[tuple[str, str, str]]:
        """The violations of laws not listed in `KNOWN` (a known bug awaiting its fix)."""
        return [v for v in self.violations if v[0] not in KNOWN]

    @property
    def total_kills(self) -> int:
        return sum(self.kills.values())

    def by_law(self) -> Counter[str]:
        return Counter(law for law, _store, _detail in self.violations)

    def render(self) -> str:
        """The figures as a plain-text table."""
        stores = sorted({store for store, _ in self.kills} | {store for store, _ in self.missed})
        width = max([len(k) for k in KINDS] + [5])
        lines = [
            f"crash campaign: {self.total_kills} SIGKILLs in {self.trials} trials, "
            f"{self.processes} processes, {self.seconds:.0f} s",
            "",
            "kills by moment kind and store" + " (targets missed: process ended first)",
            f"{'':{width}} " + " ".join(f"{s:>12}" for s in stores) + f" {'total':>8}",
        ]
        for kind in KINDS:
            row = [self.kills[(s, kind)] for s in stores]
            missed = sum(self.missed[(s, kind)] for s in stores)
            lines.append(
                f"{kind:{width}} "
                + " ".join(f"{n:>12}" for n in row)
                + f" {sum(row):>8}"
                + (f"  ({missed} missed)" if missed else "")
            )
        totals = [sum(self.kills[(s, k)] for k in KINDS) for s in stores]
        lines.append(
            f"{'total':{width}} " + " ".join(f"{n:>12}" for n in totals) + f" {sum(totals):>8}"
        )
        lines += [
            "",
            "calls a kill left unanswered (each checked for its recovery code): "
            + ", ".join(f"{self.owed[c]} {c}" for c in (laws.UNKNOWN, laws.NOT_STARTED)),
        ]
        lines += ["", "violations by law (each must be 0)"]
        counts = self.by_law()
        for law in laws.LAWS:
            known = f"  (known: {KNOWN[law]})" if law in KNOWN and counts[law] else ""
            lines.append(f"  {law:26} {counts[law]}{known}")
        for law, store, detail in self.violations[:50]:
            lines.append(f"  - [{law}] {store}: {detail}")
        if len(self.violations) > 50:
            lines.append(f"  ... {len(self.violations) - 50} more")
        lines += self.reproductions[:10]
        return "\n".join(lines)


# --------------------------------------------------------------------------- stores


@dataclass
class Store:
    """One store under test: its `--store` value and how to read a session from it."""

    kind: str
    root: Path

    @property
    def spec(self) -> str:
        return f"{self.kind}:{self.root}"

    def log_file(self, session_id: str) -> Path | None:
        name = "session.jsonl.zstd" if self.kind == "jsonl+zstd" else "session.jsonl"
        found = list(self.root.glob(f"*/{session_id}/{name}"))
        return found[0] if found else None

    def snapshot(self, session_id: str) -> laws.Snapshot:
        if self.kind == "sqlite":
            return laws.read_sqlite(self.root, session_id)
        path = self.log_file(session_id)
        if path is None:
            return laws.Snapshot()
        return laws.read_zstd(path) if self.kind == "jsonl+zstd" else laws.read_jsonl(path)


class Watcher:
    """Count committed units, `tool/call`s and `assistant/message`s of a growing log, fast."""

    def __init__(self, store: Store, session_id: str) -> None:
        self.store, self.session_id = store, session_id
        self._path: Path | None = None
        self._offset = 0  # bytes of the file already counted
        self.units = self.tool_calls = self.messages = 0
        self._connection: sqlite3.Connection | None = None

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def poll(self) -> tuple[int, int, int]:
        """Return (committed units, tool/calls, assistant/messages) now on disk."""
        if self.store.kind == "sqlite":
            return self._poll_sqlite()
        if self._path is None:
            self._path = self.store.log_file(self.session_id)
            if self._path is None:
                return 0, 0, 0
        try:
            with self._path.open("rb") as handle:
                handle.seek(0, os.SEEK_END)
                size = handle.tell()
                if size < self._offset:  # repair truncated a torn tail: count again
                    self._offset = self.units = self.tool_calls = self.messages = 0
                handle.seek(self._offset)
                fresh = handle.read()
        except FileNotFoundError:
            return 0, 0, 0
        if self.store.kind == "jsonl+zstd":
            used, plaintext, _problem = laws.zstd_frames(fresh)
        else:
            used = fresh.rfind(b"\n") + 1
            plaintext = fresh[:used]
        self._offset += used
        for line in plaintext.split(b"\n")[:-1]:
            self.units += 1
            head = line[:40]
            self.tool_calls += b'"type":"tool/call"' in head
            self.messages += b'"type":"assistant/message"' in head
        return self.units, self.tool_calls, self.messages

    def _poll_sqlite(self) -> tuple[int, int, int]:
        if self._connection is None:
            if not self.store.root.exists():
                return 0, 0, 0
            self._connection = sqlite3.connect(f"file:{self.store.root}?mode=ro", uri=True)
        try:
            row = self._connection.execute(
                "SELECT count(*), coalesce(sum(type = 'tool/call'), 0), "
                "coalesce(sum(type = 'assistant/message'), 0) FROM events WHERE session_id = ?",
                (self.session_id,),
            ).fetchone()
        except sqlite3.OperationalError:  # no schema yet, or busy: nothing new to count
            self.close()
            return 0, 0, 0
        return int(row[0]), int(row[1]), int(row[2])


# --------------------------------------------------------------------------- scripts


@dataclass
class Script:
    """One process's model script and what it will do."""

    responses: list[dict[str, Any]]
    call_ids: list[str]
    tool_calls: int
    messages: int
    effects: int
    edits: list[str]


def make_script(rng: random.Random, prefix: str, ledger: Path, steps: int) -> Script:
    """Build `steps` tool steps and a final text step; every call id starts with `prefix`."""
    responses: list[dict[str, Any]] = []
    ids: list[str] = []
    edits: list[str] = []
    effects = 0
    for step in range(1, steps + 1):
        group = [
            rng.choice(["grep", "list_dir", "read_file", "read_file"])
            for _ in range(rng.randint(2, 3))
        ]
        exclusive = [
            rng.choice(["write_file", "edit_file", "bash", "bash"])
            for _ in range(rng.randint(1, 3))
        ]
        at = rng.randint(0, len(exclusive))
        calls: list[dict[str, Any]] = []
        for number, name in enumerate(exclusive[:at] + group + exclusive[at:], start=1):
            call_id = f"{prefix}s{step}c{number}"
            ids.append(call_id)
            arguments: dict[str, Any]
            if name == "grep":  # walks TREE_FILES files: a parallel call that runs for a while
                arguments = {"pattern": "zzz", "path": "tree"}
            elif name == "list_dir":
                arguments = {"path": "."}
            elif name == "read_file":
                arguments = {"path": rng.choice(["a.txt", "b.txt"])}
            elif name == "write_file":
                arguments = {"path": f"w-{call_id}.txt", "content": f"written by {call_id}\n"}
                effects += 1
            elif name == "edit_file":
                arguments = {"path": f"e-{call_id}.txt", "old": "PENDING", "new": f"DONE {call_id}"}
                edits.append(call_id)
                effects += 1
            else:
                pause = rng.choice([0.02, 0.05, 0.1, 0.2])
                arguments = {
                    "command": f"echo {call_id}:begin >> {ledger}; sleep {pause}; "
                    f"echo {call_id}:end >> {ledger}"
                }
                effects += 2
            calls.append({"id": call_id, "name": name, "arguments": arguments})
        responses.append(
            {"text": f"step {step}", "tool_calls": calls, "delay_ms": rng.randint(0, 60)}
        )
    responses.append({"text": "done", "delay_ms": rng.randint(0, 30)})
    return Script(responses, ids, len(ids), steps + 1, effects, edits)


# --------------------------------------------------------------------------- processes


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env["DURALOOP_HOME"] = str(home)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def kill_orphans(marker: bytes) -> int:
    """SIGKILL every process whose command line holds `marker` (and its group); return the count."""
    killed = 0
    for _ in range(50):
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if marker in cmdline:
                found.append((int(entry.name), int(stat.rsplit(")", 1)[1].split()[2])))
        if not found:
            return killed
        for pid, pgid in found:
            try:
                if pgid not in (os.getpgrp(), 0):
                    os.killpg(pgid, signal.SIGKILL)
                else:
                    os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)
    raise RuntimeError(f"processes holding {marker!r} survive SIGKILL")


@dataclass
class Target:
    """When to kill a process: `reached(elapsed, units, tool_calls, messages, effects)`."""

    kind: str
    description: str
    reached: Callable[[float, int, int, int, int], bool]


@dataclass
class Outcome:
    killed: bool
    returncode: int | None
    seconds: float
    kill_ms: int = 0
    first_write_seconds: float | None = None


# --------------------------------------------------------------------------- campaign


@dataclass
class Campaign:
    """A campaign's state: seed, budget, estimates of process timings, and the report."""

    workdir: Path
    seed: int
    stores: Sequence[str]
    keep: bool = False
    progress: Callable[[str], None] | None = None
    report: Report = field(default_factory=Report)
    lifetimes: dict[str, list[float]] = field(default_factory=dict)
    first_writes: dict[str, list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.workspace = self.workdir / "workspace"
        (self.workspace / "tree").mkdir(parents=True, exist_ok=True)
        (self.workspace / "a.txt").write_text("alpha\n")
        (self.workspace / "b.txt").write_text("beta\n" * 20)
        for index in range(TREE_FILES):
            (self.workspace / "tree" / f"f{index:05d}.txt").write_text("line one\nline two\n" * 4)

    # ---- one process

    def spawn(self, trial: Path, argv: list[str], number: int) -> subprocess.Popen[bytes]:
        out = (trial / f"p{number}.out").open("wb")
        err = (trial / f"p{number}.err").open("wb")
        try:
            return subprocess.Popen(
                [sys.executable, "-m", "duraloop", *argv],
                stdout=out,
                stderr=err,
                env=clean_env(trial / "home"),
                cwd=trial,
                start_new_session=True,
            )
        finally:
            out.close()
            err.close()

    def drive(
        self,
        proc: subprocess.Popen[bytes],
        target: Target | None,
        watcher: Watcher,
        effects: Callable[[], int],
    ) -> Outcome:
        started = time.monotonic()
        base_units = watcher.poll()[0]
        first_write: float | None = None
        while True:
            elapsed = time.monotonic() - started
            units, tool_calls, messages = watcher.poll()
            if first_write is None and units != base_units:
                first_write = elapsed
            if target is not None and target.reached(
                elapsed, units, tool_calls, messages, effects()
            ):
                kill_ms = time.time_ns() // 1_000_000
                proc.send_signal(signal.SIGKILL)
                ended = proc.wait()
                watcher.close()
                if ended != -signal.SIGKILL:  # it exited just before the signal
                    return Outcome(False, ended, elapsed, first_write_seconds=first_write)
                return Outcome(True, ended, elapsed, kill_ms, first_write)
            code = proc.poll()
            if code is not None:
                watcher.close()
                return Outcome(False, code, elapsed, first_write_seconds=first_write)
            if elapsed > PROCESS_TIMEOUT_SECONDS:
                proc.kill()
                proc.wait()
                watcher.close()
                return Outcome(False, None, elapsed)
            time.sleep(POLL_SECONDS)

    def _estimate(self, table: dict[str, list[float]], store: str, default: float) -> float:
        seen = table.get(store, [])
        return statistics.median(seen[-20:]) if seen else default

    def target(
        self, kind: str, store: str, script: Script, base: tuple[int, int, int, int]
    ) -> Target:
        units0, calls0, messages0, effects0 = base
        rng = self.rng
        if kind == "uniform":
            moment = rng.uniform(0, self._estimate(self.lifetimes, store, 2.0))
            return Target(kind, f"at {moment:.3f} s", lambda e, u, c, m, x: e >= moment)
        if kind == "after-tool-call":
            k = rng.randint(1, script.tool_calls)
            return Target(kind, f"after tool/call {k}", lambda e, u, c, m, x: c >= calls0 + k)
        if kind == "after-assistant-message":
            k = rng.randint(1, script.messages)
            return Target(
                kind, f"after assistant/message {k}", lambda e, u, c, m, x: m >= messages0 + k
            )
        if kind == "after-side-effect":
            k = rng.randint(1, max(script.effects, 1))
            return Target(kind, f"after side effect {k}", lambda e, u, c, m, x: x >= effects0 + k)
        if rng.random() < 0.5:
            extra = rng.randint(0, 2)
            return Target(
                kind,
                f"at first log write + {extra} units",
                lambda e, u, c, m, x: u != units0 and abs(u - units0) >= 1 + extra,
            )
        moment = rng.uniform(0, 1.2 * self._estimate(self.first_writes, store, 0.8))
        return Target(
            kind,
            f"at {moment:.3f} s (before repair's expected first write)",
            lambda e, u, c, m, x: e >= moment,
        )

    # ---- one trial

    def trial(self, number: int, store_kind: str, kill_budget: int) -> int:
        """Run one trial; return the number of kills it made."""
        trial = self.workdir / f"trial-{number:04d}-{store_kind.replace('+', '-')}"
        trial.mkdir()
        root = trial / ("store.db" if store_kind == "sqlite" else "store")
        store = Store(store_kind, root)
        session_id = f"crash-{number}"
        ledger = trial / "ledger"
        history: list[str] = [f"trial {trial.name}: store {store.spec}, session {session_id}"]
        found: list[tuple[str, str]] = []
        owed: dict[str, str] = {}
        all_ids: list[str] = []
        previous = laws.Snapshot()
        kills = 0
        process = 0
        final = False
        while True:
            process += 1
            final = kills >= kill_budget
            exists = previous.exists
            steps = 1 if final else self.rng.randint(2, 3)
            script = make_script(self.rng, f"t{number}p{process}", ledger, steps)
            all_ids += script.call_ids
            for call_id in script.edits:
                (self.workspace / f"e-{call_id}.txt").write_text("state: PENDING\n")
            script_file = trial / f"script-{process}.json"
            script_file.write_text(json.dumps(script.responses, indent=1))
            common = [
                "--model",
                f"scripted:{script_file}",
                "--store",
                store.spec,
                "--cwd",
                str(self.workspace),
            ]
            if exists and self.rng.random() < 0.6:
                argv = ["resume", session_id, "continue", *common]
            else:
                argv = ["run", "continue" if exists else "start", "--session", session_id, *common]
            before_calls = laws.calls_of(previous.events)
            open_turn = exists and before_calls.last_turn not in before_calls.turn_ends
            kind: str | None = None
            target: Target | None = None
            watcher = Watcher(store, session_id)
            effect_count = self._effect_counter(ledger, script)
            if not final:
                kind = self._pick_kind(store_kind, open_turn=open_turn)
                base = (*watcher.poll(), effect_count())
                target = self.target(kind, store_kind, script, base[:3] + (base[3],))
            proc = self.spawn(trial, argv, process)
            self.report.processes += 1
            outcome = self.drive(proc, target, watcher, effect_count)
            kill_orphans(str(trial).encode())
            if outcome.first_write_seconds is not None and open_turn:
                self.first_writes.setdefault(store_kind, []).append(outcome.first_write_seconds)
            shown = f"p{process}: duraloop {' '.join(argv[:3])} ... ({script_file.name})"
            if outcome.killed:
                history.append(
                    f"{shown}: SIGKILL {kind} {target.description if target else ''} "
                    f"at {outcome.seconds:.3f} s"
                )
                kills += 1
                assert kind is not None
                self.report.kills[(store_kind, kind)] += 1
            else:
                history.append(
                    f"{shown}: exited {outcome.returncode} after {outcome.seconds:.3f} s"
                    + (f" (target {kind} {target.description} missed)" if target else "")
                )
                if kind is not None:
                    self.report.missed[(store_kind, kind)] += 1
                if steps > 1 and outcome.returncode == 0:
                    self.lifetimes.setdefault(store_kind, []).append(outcome.seconds)
            snapshot = store.snapshot(session_id)
            calls = laws.calls_of(snapshot.events)
            effects = laws.read_effects(ledger, self.workspace, all_ids)
            violations = laws.check_seqs(snapshot) + laws.check_preserved(previous, snapshot)
            violations += laws.check_answers(calls) + laws.check_codes(calls)
            violations += laws.check_effects(calls, effects) + laws.check_owed(owed, calls)
            if outcome.killed:
                fresh = {k: v for k, v in laws.pending_calls(calls).items() if k not in owed}
                owed.update(fresh)
                self.report.owed.update(fresh.values())
                violations += laws.check_head_durable(
                    calls, outcome.kill_ms, since_seq=len(previous.events)
                )
            else:
                err = (trial / f"p{process}.err").read_text(errors="replace")[-400:]
                if outcome.returncode != 0:
                    violations.append(
                        laws.Violation(
                            "process-failed",
                            f"p{process} exited {outcome.returncode}: {err.strip()!r}",
                        )
                    )
                elif calls.last_turn not in calls.turn_ends:
                    violations.append(
                        laws.Violation("process-failed", f"p{process} exited 0 with its turn open")
                    )
            found += [(v.law, f"p{process}: {v.detail}") for v in violations]
            previous = snapshot
            if final or outcome.returncode not in (0, -signal.SIGKILL):
                break
        calls = laws.calls_of(previous.events)
        found += [(v.law, f"final: {v.detail}") for v in laws.check_spurious(calls, owed)]
        checked = subprocess.run(
            [
                sys.executable,
                "-m",
                "duraloop",
                "check",
                session_id,
                "--json",
                "--store",
                store.spec,
            ],
            capture_output=True,
            text=True,
            env=clean_env(trial / "home"),
            cwd=trial,
            timeout=PROCESS_TIMEOUT_SECONDS,
            check=False,
        )
        self.report.processes += 1
        verdict: dict[str, Any] = {}
        try:
            verdict = json.loads(checked.stdout)
        except ValueError:
            pass
        if (
            checked.returncode != 0
            or not verdict.get("valid")
            or verdict.get("openTurn") is not None
        ):
            found.append(
                (
                    "check-invalid",
                    f"check exit {checked.returncode}: "
                    f"{(checked.stdout + checked.stderr).strip()[:300]!r}",
                )
            )
        self._record(trial, store_kind, history, found)
        return kills

    def _effect_counter(self, ledger: Path, script: Script) -> Callable[[], int]:
        writes = [self.workspace / f"w-{cid}.txt" for cid in script.call_ids]
        edits = [self.workspace / f"e-{cid}.txt" for cid in script.edits]

        def count() -> int:
            try:
                lines = ledger.read_bytes().count(b"\n")
            except FileNotFoundError:
                lines = 0
            done = sum(1 for path in writes if path.exists())
            for path in edits:
                try:
                    done += b"DONE" in path.read_bytes()
                except FileNotFoundError:
                    pass
            return lines + done

        return count

    def _pick_kind(self, store: str, *, open_turn: bool) -> str:
        kinds = [k for k in KINDS if open_turn or k != "during-repair"]
        fewest = min(self.report.kills[(store, k)] for k in kinds)
        return self.rng.choice([k for k in kinds if self.report.kills[(store, k)] == fewest])

    def _record(
        self, trial: Path, store: str, history: list[str], found: list[tuple[str, str]]
    ) -> None:
        self.report.trials += 1
        for law, detail in found:
            self.report.violations.append((law, store, f"{trial.name} {detail}"))
        if found:
            text = "\n  ".join(history + [f"[{law}] {detail}" for law, detail in found])
            (trial / "violations.txt").write_text(text + "\n")
            self.report.reproductions.append(
                f"\nreproduction (directory kept: scripts, store, ledger, p*.out/err):\n  {text}"
            )
        elif not self.keep:
            shutil.rmtree(trial)
        if self.progress is not None:
            self.progress(
                f"{trial.name}: {len(history) - 1} processes, "
                f"{len(found)} violations; {self.report.total_kills} kills so far"
            )

    def calibrate(self) -> None:
        """Time one unkilled 3-step process per store (its lifetime scales `uniform` kills)."""
        for number, store in enumerate(self.stores):
            trial = self.workdir / f"calibrate-{number}"
            trial.mkdir()
            spec = Store(store, trial / ("store.db" if store == "sqlite" else "store"))
            script = make_script(random.Random(self.seed), f"cal{number}", trial / "ledger", 3)
            for call_id in script.edits:
                (self.workspace / f"e-{call_id}.txt").write_text("state: PENDING\n")
            (trial / "script.json").write_text(json.dumps(script.responses))
            started = time.monotonic()
            proc = self.spawn(
                trial,
                [
                    "run",
                    "go",
                    "--session",
                    "cal",
                    "--model",
                    f"scripted:{trial / 'script.json'}",
                    "--store",
                    spec.spec,
                    "--cwd",
                    str(self.workspace),
                ],
                0,
            )
            code = proc.wait(timeout=PROCESS_TIMEOUT_SECONDS)
            self.report.processes += 1
            if code != 0:
                raise RuntimeError(
                    f"calibration run failed ({code}): {(trial / 'p0.err').read_text()}"
                )
            self.lifetimes[store] = [time.monotonic() - started]
            shutil.rmtree(trial)

    def run(self, kills: int) -> Report:
        """Make `kills` SIGKILLs, spread evenly over the stores, and return the report."""
        started = time.monotonic()
        self.calibrate()
        budget = {store: kills // len(self.stores) for store in self.stores}
        for store in list(self.stores)[: kills % len(self.stores)]:
            budget[store] += 1
        made = dict.fromkeys(self.stores, 0)
        number = 0
        while any(made[s] < budget[s] for s in self.stores):
            for store in self.stores:
                left = budget[store] - made[store]
                if left <= 0:
                    continue
                number += 1
                made[store] += self.trial(number, store, min(left, self.rng.randint(3, 6)))
        self.report.seconds = time.monotonic() - started
        return self.report


def run_campaign(
    kills: int,
    *,
    seed: int,
    stores: Sequence[str] = STORES,
    workdir: Path | None = None,
    keep: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Run a campaign of `kills` SIGKILLs and return its report (see the module docstring)."""
    if workdir is None:
        workdir = Path(tempfile.mkdtemp(prefix="crash-campaign-"))
    workdir.mkdir(parents=True, exist_ok=True)
    campaign = Campaign(workdir, seed, stores, keep=keep, progress=progress)
    report = campaign.run(kills)
    if not report.violations and not keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=1000, help="SIGKILLs to make in all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stores", default=",".join(STORES), help="comma-separated store kinds")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where trials run (default: a new temp dir, removed if all passed)",
    )
    parser.add_argument("--keep", action="store_true", help="keep every trial's directory")
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 on violations of KNOWN laws too"
    )
    parser.add_argument("--quiet", action="store_true", help="no per-trial progress on stderr")
    args = parser.parse_args(argv)
    stores = [s for s in args.stores.split(",") if s]
    unknown = set(stores) - set(STORES)
    if unknown:
        parser.error(f"unknown store kinds {sorted(unknown)}; use {', '.join(STORES)}")

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    report = run_campaign(
        args.kills,
        seed=args.seed,
        stores=stores,
        workdir=args.workdir,
        keep=args.keep,
        progress=None if args.quiet else progress,
    )
    print(report.render())
    return 1 if (report.violations if args.strict else report.unexpected()) else 0


if __name__ == "__main__":
    sys.exit(main())
