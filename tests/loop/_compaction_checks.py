"""Whole-log checks of compaction (docs/compaction.md), shared by the property tests.

`assert_compaction_log` walks a log once and mirrors its surface: every replace is at a
place the rules allow (a checkpoint at the head, inside its bracket, citing what it
shadows, never the open step nor the last `keep_turns` turns; a pruned result right after
its `compaction/prune`, replacing one `tool/result` of the same call), and every
`compaction/start` is closed by its own `compaction/end` before any turn boundary.
`assert_session_state` adds the checks every test asserts after a turn: `assert_log_valid`,
both providers' pairing rules, replay, and the loop's incremental fold against a fresh one.
"""

from __future__ import annotations

from collections.abc import Sequence

from duraloop.llm import (
    ModelRequest,
    check_anthropic_messages,
    check_chat_completions_messages,
)
from duraloop.llm._anthropic import AnthropicMessagesModel
from duraloop.llm._chat_completions import OpenAIChatModel
from duraloop.log import CompactionFold, Event, Message, Session, is_checkpoint
from duraloop.log.vocabulary import (
    COMPACTION_END,
    COMPACTION_PRUNE,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    END_SEED,
    STEP_END,
    STEP_START,
    SURFACE_APPEND,
    SURFACE_TYPES,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from duraloop.loop import AgentLoop
from duraloop.testing import assert_log_valid

from ._compaction_support import CLOSED_PORT, TOOLS


class ProviderPayloads:
    """Both providers' exact request payloads of a history, checked as before a send.

    `assert_pairs_for_both_providers` with the two adapters built once (building one costs
    an SSL context, most of a property example's time); nothing is ever sent.
    """

    def __init__(self) -> None:
        self.openai = OpenAIChatModel("gpt-test", api_key="sk-test", base_url=CLOSED_PORT)
        self.anthropic = AnthropicMessagesModel(
            "claude-test", api_key="sk-ant-test", base_url=CLOSED_PORT
        )

    def check(self, messages: Sequence[Message]) -> None:
        """Raise the pre-send pairing error either provider would, if any."""
        request = ModelRequest(messages=list(messages), system="s", tools=TOOLS)
        openai = self.openai.payload(request)["messages"]
        check_chat_completions_messages(openai, provider="openai")
        check_anthropic_messages(self.anthropic.payload(request)["messages"])

    async def aclose(self) -> None:
        """Close both adapters' clients."""
        await self.openai.aclose()
        await self.anthropic.aclose()


class _Walk:
    """The state of one pass over a log: the surface mirror, the open turn, step, bracket."""

    def __init__(self, events: Sequence[Event], keep_turns: int) -> None:
        self.events = events
        self.keep_turns = keep_turns
        self.nodes: list[int] = []
        self.turn_starts: list[int] = []
        self.turn: int | None = None
        self.step: int | None = None
        self.bracket: Event | None = None
        self.checkpoints = 0
        self.pruned = 0

    def boundary(self, kind: str, event: Event) -> None:
        assert self.bracket is None, (
            f"{kind} at seq {event.seq} inside the compaction bracket opened at seq "
            f"{self.bracket.seq}"
        )

    def kept_from(self) -> int:
        """The index of the first surface node no compaction or prune may replace.

        The kept nodes are the surface's tail of nodes newer than the open step's
        `step/start` and the `turn/start` of the oldest kept turn (docs/compaction.md).
        """
        bound = self.step
        if self.keep_turns > 0 and self.turn_starts:
            assert len(self.turn_starts) >= self.keep_turns, (
                f"fewer turns ({len(self.turn_starts)}) than keep_turns={self.keep_turns}: "
                "nothing may be compacted"
            )
            oldest = self.turn_starts[-self.keep_turns]
            bound = oldest if bound is None else min(bound, oldest)
        index = len(self.nodes)
        while bound is not None and index > 0 and self.nodes[index - 1] > bound:
            index -= 1
        return index

    def lifecycle(self, event: Event) -> None:
        kind, data = event.type, event.data
        if kind == TURN_START:
            self.boundary(kind, event)
            self.turn, self.step = data["turn"], None
            self.turn_starts.append(event.seq)
        elif kind == TURN_END:
            self.boundary(kind, event)
            assert data["turn"] == self.turn
            self.turn, self.step = None, None
        elif kind == END_SEED:
            self.boundary(kind, event)
        elif kind == STEP_START:
            self.step = event.seq
        elif kind == STEP_END:
            self.step = None
        elif kind == COMPACTION_START:
            assert self.bracket is None, f"nested compaction/start at seq {event.seq}"
            assert data["turn"] == self.turn, "a compaction is owned by the open turn, or none"
            self.bracket = event
        elif kind == COMPACTION_END:
            opened = self.bracket
            assert opened is not None, f"compaction/end at seq {event.seq} without a start"
            assert data["compactionId"] == opened.data["compactionId"]
            assert data["turn"] == opened.data["turn"]
            self.bracket = None

    def replace(self, event: Event) -> None:
        op = event.surface_op
        first, last = self.nodes.index(op["start"]), self.nodes.index(op["end"])
        shadowed = self.nodes[first : last + 1]
        kept = self.kept_from()
        assert last < kept, (
            f"seq {event.seq} replaced {shadowed}, inside the open step or the kept turns "
            f"(surface nodes {self.nodes[kept:]})"
        )
        self.nodes[first : last + 1] = [event.seq]
        if event.type == USER_MESSAGE and is_checkpoint(event.data):
            self.checkpoint(event, first, shadowed)
        else:
            self.prune(event, first, last, shadowed)

    def checkpoint(self, event: Event, first: int, shadowed: list[int]) -> None:
        self.checkpoints += 1
        opened = self.bracket
        assert opened is not None, f"checkpoint at seq {event.seq} outside a compaction bracket"
        assert first == 0, "a checkpoint replaces the oldest span, from the surface head"
        cited = event.source_event_seqs or []
        assert set(shadowed) <= set(cited), f"checkpoint {event.seq} cites {cited}: {shadowed}"
        summary = self.events[event.seq - 1]
        assert summary.type == COMPACTION_SUMMARY
        assert summary.data["compactionId"] == opened.data["compactionId"]
        assert summary.data["shadowedSeqs"] == shadowed
        assert cited == [opened.seq, summary.seq, *shadowed]

    def prune(self, event: Event, first: int, last: int, shadowed: list[int]) -> None:
        self.pruned += 1
        assert event.type == TOOL_RESULT and first == last, f"seq {event.seq}: not a prune"
        (old,) = shadowed
        note = self.events[event.seq - 1]
        assert note.type == COMPACTION_PRUNE and note.data["shadowedSeqs"] == [old]
        original = self.events[old]
        assert original.type == TOOL_RESULT
        assert event.source_event_seqs == [old]
        was, now = original.data["message"], event.data["message"]
        assert now["source"] == was["source"] and now["id"] == was["id"]
        assert now["content"][0]["isError"] == was["content"][0]["isError"]


def assert_compaction_log(events: Sequence[Event], *, keep_turns: int) -> _Walk:
    """Assert the compaction rules over a whole log; return the walk (its surface mirror).

    Args:
        events: the log, in order.
        keep_turns: the `CompactionConfig.keep_turns` every compaction of it ran with.
    """
    walk = _Walk(events, keep_turns)
    for event in events:
        walk.lifecycle(event)
        if event.type in SURFACE_TYPES:
            if event.surface_op == SURFACE_APPEND:
                walk.nodes.append(event.seq)
            else:
                walk.replace(event)
    assert walk.bracket is None, f"compaction/start at seq {walk.bracket.seq} never ended"
    return walk


def assert_session_state(
    session: Session, loop: AgentLoop, payloads: ProviderPayloads, *, keep_turns: int
) -> _Walk:
    """Every property a compacted session must have between turns; return the log walk.

    `assert_log_valid` (law 4, invariants, pairing), `assert_compaction_log`, the exact
    payloads of both providers pass their pre-send checks, replaying the log derives the
    same messages, and the loop's incremental compaction fold equals one folded afresh.
    """
    assert_log_valid(session)
    events = list(session.events)
    walk = assert_compaction_log(events, keep_turns=keep_turns)
    assert walk.nodes == list(session.surface.nodes)
    messages = session.derive_messages()
    payloads.check(messages)
    assert Session("x", seed=events).derive_messages() == messages
    compactor = loop.compaction
    assert compactor is not None
    fresh = CompactionFold()
    fresh.feed(events)
    assert compactor.fold.to_json() == fresh.to_json()
    assert compactor.estimate() == fresh.tokens()
    return walk
