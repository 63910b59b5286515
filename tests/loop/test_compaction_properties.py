"""Property: random sessions compacted at random points always pair, and law 4 holds.

Issue 13's property test (docs/compaction.md). Hypothesis draws a session: turns of scripted
steps, each with 0-3 parallel tool calls (a tool returning sized outputs, one raising, one
cancelling the turn from its body, one whose pre-execute hook cancels it), text answers and
failed model requests (`CONTEXT_WINDOW_EXCEEDED` among them), manual `await loop.compact()`
between turns, and crashes (the log cut at a random point of what the last action wrote, or
inside a compaction bracket there, repaired with `interrupted_turn_closers`, and continued
by a new loop over `Session(seed=...)`). Compaction also runs on
its own: a small context window (random threshold, retained tail and kept turns, pruner on
or off) triggers it before steps and after overflows; the summarizer sometimes fails,
cancels the turn, or writes a summary too long to use.

After every turn, compaction and crash, and at the end: `assert_log_valid` (law 4,
invariants, pairing), both providers' pre-send checks on the exact payloads, replay derives
the same messages, each checkpoint cites everything it shadows (and nothing of the open step
or the kept turns), each `compaction/start` ends before any turn boundary, and the loop's
incremental fold equals a fresh fold of the log.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from duraloop.errors import CompactionError, LlmError, ToolError
from duraloop.llm import ScriptedModel
from duraloop.log import Event, PrunerConfig, Session, interrupted_turn_closers
from duraloop.log.vocabulary import (
    AUTH,
    COMPACTION_END,
    COMPACTION_START,
    CONTEXT_WINDOW_EXCEEDED,
    SERVER,
    TURN_END,
)
from duraloop.loop import AgentLoop, CompactionConfig, LoopConfig, Summary, SummaryRequest
from duraloop.tools import Tool, ToolCallRequest, ToolContext, ToolHooks, TurnCancelled

from ._compaction_checks import ProviderPayloads, assert_session_state

# A response: ("calls", [(tool, output size)]) (`[("text", size)]`: a text answer), or
# ("error", code).
# An action: ("turn", (prompt size, responses)), ("compact", None) or ("crash", where).
Action = tuple[str, Any]

SIZES = [10, 300, 1500, 1500, 5000]

_fraction = st.floats(0.0, 1.0)
_call = st.tuples(
    st.sampled_from(["sized"] * 12 + ["boom"] * 2 + ["cancel", "hooked"]), st.sampled_from(SIZES)
)
_calls = st.tuples(st.just("calls"), st.lists(_call, min_size=1, max_size=3))
_ending = st.one_of(
    st.tuples(st.just("calls"), st.sampled_from(SIZES).map(lambda n: [("text", n)])),
    st.tuples(st.just("error"), st.sampled_from([CONTEXT_WINDOW_EXCEEDED] * 3 + [AUTH, SERVER])),
)
# A turn: its prompt's size, then steps calling tools and an ending (a text answer or a
# failed request; an overflow compacts and retries, so the script runs on into later turns).
_turn = st.tuples(
    st.sampled_from(SIZES),
    st.tuples(st.lists(_calls, min_size=1, max_size=5), _ending).map(
        lambda parts: [*parts[0], parts[1]]
    ),
)
_action = st.one_of(
    st.tuples(st.just("turn"), _turn),
    st.tuples(st.just("turn"), _turn),
    st.tuples(st.just("turn"), _turn),
    st.tuples(st.just("compact"), st.none()),
    st.tuples(st.just("crash"), st.tuples(st.sampled_from(["anywhere", "bracket"]), _fraction)),
)
_compaction = st.fixed_dictionaries(
    {
        "window": st.one_of(st.none(), *[st.integers(1000, 3000)] * 3),
        "threshold_ratio": st.floats(0.3, 0.95),
        "retain_tokens": st.one_of(st.none(), st.integers(1, 800)),
        "keep_turns": st.integers(0, 2),
        "pruner": st.sampled_from([None, PrunerConfig(2000, 500, 200), PrunerConfig(800, 200, 10)]),
    }
)
_summaries = st.lists(
    st.sampled_from(["ok"] * 6 + ["fail", "cancel", "long"]), min_size=1, max_size=6
)


@dataclass
class Outcome:
    """What a scenario left: the final session, and how often it compacted, pruned, tore."""

    session: Session
    checkpoints: int
    pruned: int
    torn: int


class SummaryError(Exception):
    """The failure the chaos summarizer raises."""


class Harness:
    """What outlives a crash: the script, the configuration, and the loop now running.

    Args:
        script: every model response of the session, consumed in order across loops.
        options: the drawn compaction options (`_compaction`).
        summaries: the summarizer's behaviours, used in turn: `ok` (dsh's test summary),
            `fail`, `cancel` (cancels the turn or the manual compaction, then answers) and
            `long` (a summary not smaller than what it replaces).
        cwd: the workspace.
    """

    def __init__(
        self,
        script: list[dict[str, Any]],
        options: dict[str, Any],
        summaries: list[str],
        cwd: Path,
    ) -> None:
        self.script = script
        self.window: int | None = options["window"]
        self.summaries = summaries
        self.cwd = cwd
        self.consumed = 0  # responses the models of earlier loops used up
        self.calls = 0
        self.model = ScriptedModel([])
        self.loop: AgentLoop | None = None
        self.config = LoopConfig(
            max_steps=6,
            retry=None,
            system_prompt="You are a test agent.",
            compaction=CompactionConfig(
                summarizer=self.summarize,
                threshold_ratio=options["threshold_ratio"],
                retain_tokens=options["retain_tokens"],
                keep_turns=options["keep_turns"],
                pruner=options["pruner"],
            ),
        )

    def cancel(self) -> None:
        """Cancel what the running loop does (a turn, or a manual compaction)."""
        assert self.loop is not None
        self.loop.cancel()

    async def summarize(self, request: SummaryRequest) -> Summary:
        """Summarize as the drawn behaviours say, in turn."""
        behaviour = self.summaries[self.calls % len(self.summaries)]
        self.calls += 1
        if behaviour == "fail":
            raise SummaryError("the summarizer failed on purpose")
        if behaviour == "cancel":
            self.cancel()
            await anyio.lowlevel.checkpoint()
        text = "long " * 20_000 if behaviour == "long" else "small checkpoint"
        return Summary(
            summary=[{"type": "text", "text": text}], provider="summary-provider", model="m"
        )

    def start(self, session: Session) -> AgentLoop:
        """Start a loop over `session`, its model answering from the unconsumed script."""
        self.consumed += min(len(self.model.requests), len(self.script) - self.consumed)
        self.model = ScriptedModel(self.script[self.consumed :], context_window=self.window)
        self.loop = AgentLoop(
            session,
            model=self.model,
            tools=self.tools(),
            cwd=self.cwd,
            config=self.config,
            tool_hooks=ToolHooks(pre_execute=[self.hook]),
        )
        return self.loop

    def hook(self, call: ToolCallRequest) -> None:
        if call.name == "hooked":
            self.cancel()

    def tools(self) -> list[Tool]:
        async def sized(args: Any, ctx: ToolContext) -> str:
            return (f"{ctx.call_id}:" + "x" * int(args["n"]))[: max(1, int(args["n"]))]

        async def boom(args: Any, ctx: ToolContext) -> str:
            raise ToolError(f"{ctx.call_id} failed on purpose", code="TEST_FAILURE")

        async def cancel(args: Any, ctx: ToolContext) -> str:
            self.cancel()
            await anyio.lowlevel.checkpoint()
            return "cancelled the turn"

        bodies = {"sized": sized, "hooked": sized, "boom": boom, "cancel": cancel}
        return [
            Tool(
                name=name,
                description=f"The {name} tool.",
                parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
                validator=lambda arguments: arguments,
                body=body,
                parallel=True,
            )
            for name, body in bodies.items()
        ]


@pytest.fixture(scope="module")
def payloads() -> Iterator[ProviderPayloads]:
    """The two providers' payload checks, built once for every example."""
    checks = ProviderPayloads()
    yield checks
    anyio.run(checks.aclose)


def _script(actions: list[Action]) -> list[dict[str, Any]]:
    script: list[dict[str, Any]] = []
    counter = 0
    for kind, payload in actions:
        if kind != "turn":
            continue
        for response_kind, body in payload[1]:
            if response_kind == "error":
                script.append({"error": {"code": body, "message": f"{body} on purpose"}})
                continue
            if body[0][0] == "text":
                script.append({"text": "answer " + "t" * body[0][1]})
                continue
            calls = []
            for name, size in body:
                counter += 1
                calls.append({"id": f"c{counter}", "name": name, "arguments": {"n": size}})
            script.append({"text": "", "tool_calls": calls})
    return script


def _cut(events: list[Event], start: int, where: str, fraction: float) -> int:
    """Where a crash ends the log: anywhere in the events from `start` (those the last
    action wrote), or inside a bracket there (after a `compaction/start`, its summary or
    its checkpoint) when it wrote one."""
    cuts = list(range(start, len(events) + 1))
    if where == "bracket":
        inside, open_bracket = [], False
        for event in events[start:]:
            open_bracket = (open_bracket or event.type == COMPACTION_START) and (
                event.type != COMPACTION_END
            )
            if open_bracket:
                inside.append(event.seq + 1)
        cuts = inside or cuts
    return cuts[min(len(cuts) - 1, int(fraction * len(cuts)))]


async def _scenario(
    cwd: Path,
    payloads: ProviderPayloads,
    actions: list[Action],
    options: dict[str, Any],
    summaries: list[str],
) -> Outcome:
    keep_turns = options["keep_turns"]
    harness = Harness(_script(actions), options, summaries, cwd)
    session = Session("s")
    loop = harness.start(session)
    torn = mark = 0
    for kind, payload in actions:
        if kind != "crash":
            mark = len(session.events)  # a crash cuts into what the last action wrote
        if kind == "turn":
            try:
                await loop.run_turn("prompt " + "p" * payload[0])
            except LlmError:
                pass
        elif kind == "compact":
            try:
                await loop.compact()
            except (CompactionError, SummaryError, TurnCancelled):
                pass
        else:
            events = list(session.events)
            prefix = events[: _cut(events, mark, *payload)]
            closers = interrupted_turn_closers(prefix)
            torn += any(closer.type == COMPACTION_END for closer in closers)
            session = Session("s", seed=[*prefix, *closers])
            loop = harness.start(session)
            mark = len(session.events)
        assert_session_state(session, loop, payloads, keep_turns=keep_turns)
    walk = assert_session_state(session, loop, payloads, keep_turns=keep_turns)
    return Outcome(session, walk.checkpoints, walk.pruned, torn)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    actions=st.lists(_action, min_size=4, max_size=12),
    options=_compaction,
    summaries=_summaries,
)
def test_property_compacted_sessions_always_pair_and_keep_law_4(
    tmp_path: Path,
    payloads: ProviderPayloads,
    actions: list[Action],
    options: dict[str, Any],
    summaries: list[str],
) -> None:
    outcome = anyio.run(_scenario, tmp_path, payloads, actions, options, summaries)
    events = outcome.session.events
    event(f"checkpoints: {min(outcome.checkpoints, 3)}{'+' if outcome.checkpoints > 3 else ''}")
    event(f"pruned results: {'some' if outcome.pruned else 'none'}")
    event(f"crashes inside a compaction: {'some' if outcome.torn else 'none'}")
    for reason in sorted({e.data["reason"]["kind"] for e in events if e.type == TURN_END}):
        event(f"a turn ended {reason}")
    for e in events:
        if e.type == COMPACTION_END and "error" in e.data:
            event("compaction failed: " + e.data["error"][:30])
        if e.type == COMPACTION_START:
            event("compaction turn-owned" if e.data["turn"] else "compaction manual")
