"""The one pending-call tracker and the one recovery-result constructor.

See docs/recovery.md#pending-calls.

Crash repair (`interrupted_turn_closers`) and the loop's live step recovery both use these
two pieces, so the recovery texts, codes and call/result matching exist exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._event import Event
from ._json import JsonObject
from ._messages import Message, result_call_id, tool_result_message
from .vocabulary import (
    ASSISTANT_MESSAGE,
    BLOCK_TEXT,
    BLOCK_TOOL_CALL,
    NOT_STARTED_ERROR,
    NOT_STARTED_TEXT,
    OUTCOME_UNKNOWN_ERROR,
    OUTCOME_UNKNOWN_TEXT,
    RECOVERY_MESSAGE_ID_PREFIX,
    STEP_END,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
)


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A tool call requested by an assistant message and not yet answered.

    Args:
        call_id: the tool-call block id.
        step: the step of the assistant message that requested it.
        call_seq: the seq of its latest `tool/call`, or None if none was recorded.
    """

    call_id: str
    step: int
    call_seq: int | None = None


class PendingToolCalls:
    """Track unanswered tool calls incrementally, one committed event at a time.

    Rules (docs/recovery.md#crash-tail-repair, docs/recovery.md#pending-calls): `turn/start`,
        `turn/end` and `step/end` clear;
    an `assistant/message` registers each tool-call block in content order (a repeated id
    keeps its position and loses its `call_seq`); a `tool/call` annotates a pending entry with
    its seq (an orphan is ignored); a `tool/result` removes its call id. Only identities are
    kept, never event payloads.
    """

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: dict[str, PendingCall] = {}

    def observe(self, event: Event) -> None:
        """Feed one committed event to the tracker."""
        kind = event.type
        if kind == ASSISTANT_MESSAGE:
            data = event.data
            message = data.get("message") if isinstance(data, dict) else None
            if not isinstance(message, dict):
                return
            for block in message.get("content") or ():
                if isinstance(block, dict) and block.get("type") == BLOCK_TOOL_CALL:
                    call_id = block.get("id")
                    if isinstance(call_id, str):
                        self._pending[call_id] = PendingCall(call_id, data.get("step", 0))
        elif kind == TOOL_CALL:
            call_id = event.data.get("callId") if isinstance(event.data, dict) else None
            entry = self._pending.get(call_id) if isinstance(call_id, str) else None
            if entry is not None:
                self._pending[entry.call_id] = PendingCall(entry.call_id, entry.step, event.seq)
        elif kind == TOOL_RESULT:
            data = event.data
            call_id = result_call_id(data.get("message")) if isinstance(data, dict) else None
            if isinstance(call_id, str):
                self._pending.pop(call_id, None)
        elif kind in (TURN_START, TURN_END, STEP_END):
            self._pending.clear()

    def pending(self) -> list[PendingCall]:
        """Return a snapshot of the unanswered calls, in the assistant's call order."""
        return list(self._pending.values())

    def closes_unanswered(self, event: Event) -> bool:
        """Return whether observing `event` would close a step or turn with calls unanswered.

        Law 4: a `step/end` or `turn/end` may only follow a `tool/result` for every call of
        the step's assistant message. Such an event leaves closed history no provider accepts.
        """
        return bool(self._pending) and event.type in (STEP_END, TURN_END)

    def __contains__(self, call_id: object) -> bool:
        return call_id in self._pending

    def __len__(self) -> int:
        return len(self._pending)


@dataclass(frozen=True, slots=True)
class UnansweredStep:
    """A step that was closed with tool calls unanswered: closed history no provider accepts.

    Crash repair closes only an open final turn, so such a step stays broken for good; the
    rescue is a fork cut just before its closing event, whose closers answer the calls.

    Args:
        turn: the turn the step belongs to (None outside any turn).
        step: the step of the unanswered calls.
        closed_at: the seq of the `step/end` (or `turn/end`) that closed them unanswered.
        calls: the unanswered calls, in the assistant's call order.
    """

    turn: int | None
    step: int
    closed_at: int
    calls: tuple[PendingCall, ...]

    @property
    def call_ids(self) -> tuple[str, ...]:
        """The unanswered call ids, in call order."""
        return tuple(call.call_id for call in self.calls)

    @property
    def rescue_seq(self) -> int:
        """The fork cut that keeps everything before the closing event (`fork --at`)."""
        return self.closed_at - 1

    def describe(self) -> str:
        """Return one line saying what is unanswered and where."""
        ids = ", ".join(repr(_bounded(call_id)) for call_id in self.call_ids[:_MAX_IDS_SHOWN])
        if len(self.calls) > _MAX_IDS_SHOWN:
            ids += f" and {len(self.calls) - _MAX_IDS_SHOWN} more"
        return (
            f"turn {self.turn} step {self.step} was closed at seq {self.closed_at} with tool "
            f"call(s) {ids} unanswered (no tool/result)"
        )


_MAX_IDS_SHOWN = 5
"""Call ids named in one line; the rest are counted."""

_MAX_ID_CHARS = 80
"""A call id comes from a model or a foreign log: longer ones are cut in messages."""


def _bounded(call_id: str) -> str:
    return call_id if len(call_id) <= _MAX_ID_CHARS else call_id[:_MAX_ID_CHARS] + "…"


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    """The payload of one recovery `tool/result` and how it joins the surface.

    Args:
        data: the `tool/result` data `{turn, step, message, error}`.
        source_event_seqs: `[call_seq]` for `TOOL_OUTCOME_UNKNOWN`, None for `TOOL_NOT_STARTED`.
    """

    data: JsonObject
    source_event_seqs: list[int] | None


def unanswered_tool_result(call: PendingCall, *, turn: int, seq: int) -> RecoveryResult:
    """Build the recovery result for an unanswered call.

    See docs/recovery.md#crash-tail-repair, docs/loop.md#unanswered-tool-results.

    A call with a recorded `tool/call` gets `TOOL_OUTCOME_UNKNOWN` citing that `tool/call`;
    a call without one gets `TOOL_NOT_STARTED` and cites nothing. Both are error results,
    built with `tool_result_message` as every other tool result is, in dsh's repair key order.

    Args:
        call: the pending call.
        turn: the open turn.
        seq: the seq the recovery event will get; it is part of the message id
            `interrupted-tool-result-<callId>-<seq>`.

    Returns:
        The `tool/result` data and its `sourceEventSeqs`.
    """
    started = call.call_seq is not None
    text = OUTCOME_UNKNOWN_TEXT if started else NOT_STARTED_TEXT
    message = tool_result_message(
        call.call_id,
        [{"type": BLOCK_TEXT, "text": text}],
        is_error=True,
        message_id=f"{RECOVERY_MESSAGE_ID_PREFIX}{call.call_id}-{seq}",
    )
    error = dict(OUTCOME_UNKNOWN_ERROR if started else NOT_STARTED_ERROR)
    data = {"turn": turn, "step": call.step, "message": _in_repair_order(message), "error": error}
    return RecoveryResult(data, [call.call_seq] if call.call_seq is not None else None)


_REPAIR_MESSAGE_KEYS = ("id", "role", "source", "content")
_REPAIR_BLOCK_KEYS = ("type", "toolCallId", "isError", "content")


def _in_repair_order(message: Message) -> JsonObject:
    """Return `message` with the key order dsh's repair writes (the bytes equal dsh's).

    A live tool result is `{id, role, content, source}` with its block
    `{type, toolCallId, content, isError}` (`tool_result_message`); dsh writes a recovery
    result `{id, role, source, content}` with `{type, toolCallId, isError, content}`
    (`fixtures/dsh-sessions/tool-outcome-unknown`). JSON objects are unordered, so only the
    bytes differ; duraloop keeps both, so its logs stay byte-equal to what it wrote before and
    its repair byte-equal to dsh's.
    """
    fields: dict[str, Any] = dict(message)
    [block] = fields["content"]
    fields["content"] = [{key: block[key] for key in _REPAIR_BLOCK_KEYS}]
    return {key: fields[key] for key in _REPAIR_MESSAGE_KEYS}
