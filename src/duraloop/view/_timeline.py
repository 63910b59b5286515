"""The turns -> steps -> request -> calls of a session, folded in one pass (docs/view.md#summary).

`TimelineFold.feed` takes the events in seq order, once; nothing is kept of an event but the
few numbers and names of the timeline (`_shapes`), so a 100k-event log is folded without a
second copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from duraloop.log import Event, Price, UsageFold, result_call_id
from duraloop.log import vocabulary as v

from ._cut import cut
from ._explain import RECOVERY_CODES, explanation
from ._shapes import Call, Request, Retry, Step, Turn, Usage

_MAX_NAME_CHARS = 200  # a tool, provider or model name the log holds (untrusted)
_MAX_MESSAGE_CHARS = 4_000  # an error message of a turn's end


def _name(value: object) -> str | None:
    return cut(value, _MAX_NAME_CHARS) if isinstance(value, str) else None


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: object) -> int | None:
    return value if type(value) is int else None


def error_json(error: object) -> dict[str, Any] | None:
    """Return a failure's `{"name", "code", "message"}` (strings bounded), or None."""
    if not isinstance(error, dict):
        return None
    message = error.get("message")
    return {
        "name": _name(error.get("name")),
        "code": _name(error.get("code")),
        "message": cut(message, _MAX_MESSAGE_CHARS) if isinstance(message, str) else None,
    }


class TimelineFold:
    """Folds a log into the Summary's `turns` (docs/view.md#summary), fed in seq order.

    Args:
        prices: `provider:model` -> `Price`, for each turn's cost (empty: cost is null).
    """

    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        self.prices = dict(prices or {})
        self.turns: list[Turn] = []
        self.open_turn: Turn | None = None
        self.last_reason: str | None = None
        self._step: Step | None = None
        self._calls: dict[str, Call] = {}
        self._turn_events: list[Event] = []  # the open turn's, for its usage (references only)

    def feed(self, event: Event) -> None:
        """Fold one event (in seq order, after those fed before)."""
        kind = event.type
        if kind == v.TURN_START:
            self._turn_start(event)
            return
        turn = self.open_turn
        if turn is None:
            return
        self._turn_events.append(event)
        turn.last = event.time
        step = self._step
        if kind == v.TURN_END:
            self._turn_end(event, turn)
        elif kind == v.STEP_START:
            self._step_start(event, turn)
        elif step is None:
            return
        elif kind == v.STEP_END:
            step.end = event.time
            self._step = None
        elif kind == v.TOOL_CALL:
            self._tool_call(event, step)
        elif kind == v.TOOL_RESULT:
            self._tool_result(event, step)
        elif kind == v.ASSISTANT_MESSAGE:
            self._message(event, step)
        elif kind == v.APPROVAL_ASKED:
            asked = _dict(event.data).get("callId")
            if isinstance(asked, str) and asked in self._calls:
                self._calls[asked].asked = event.time
        elif kind == v.ASSISTANT_CHUNK:
            chunk = _dict(_dict(event.data).get("chunk"))
            if chunk.get("type") == v.FINISH:
                step.request.finish = _name(_dict(chunk.get("reason")).get("kind"))
                step.request.end = event.time
        elif kind == v.REQUEST_CONTEXT:
            data = _dict(event.data)
            step.request.provider = _name(data.get("provider"))
            step.request.model = _name(data.get("model"))
        elif kind == v.LLM_RETRY:
            data = _dict(event.data)
            delay = data.get("delayMs")
            retry = Retry(
                seq=event.seq,
                time=event.time,
                attempt=_int(data.get("retry")),
                code=_name(_dict(data.get("failure")).get("code")),
                delay_ms=delay if isinstance(delay, int | float) else None,
            )
            step.request.retries.append(retry)

    def close(self) -> None:
        """Settle the open final turn's usage so far (call once, after the last event)."""
        if self.open_turn is not None:
            self.open_turn.usage = self._usage()

    def _turn_start(self, event: Event) -> None:
        number = _int(_dict(event.data).get("turn"))
        turn = Turn(
            turn=number if number is not None else len(self.turns) + 1,
            start_seq=event.seq,
            start=event.time,
            last=event.time,
        )
        self.open_turn = turn
        self.turns.append(turn)
        self._step = None
        self._calls = {}
        self._turn_events = [event]

    def _turn_end(self, event: Event, turn: Turn) -> None:
        reason = _dict(_dict(event.data).get("reason"))
        turn.end_seq, turn.end = event.seq, event.time
        turn.reason = self.last_reason = _name(reason.get("kind"))
        turn.error = error_json(reason.get("error"))
        if turn.error is not None:
            turn.end_seq_of_error = event.seq
        turn.usage = self._usage()
        self._turn_events = []
        self.open_turn = None
        self._step = None

    def _usage(self) -> Usage:
        # One fold per turn, fed the turn's events at once (`UsageFold.feed` sums per call).
        usage = UsageFold(self.prices).feed(self._turn_events)
        priced = bool(self.prices) and not usage.unpriced
        return Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            requests=usage.requests,
            tool_calls=usage.tool_calls,
            cost=usage.cost if priced else None,
        )

    def _step_start(self, event: Event, turn: Turn) -> None:
        number = _int(_dict(event.data).get("step"))
        self._step = Step(
            step=number if number is not None else len(turn.steps) + 1,
            start_seq=event.seq,
            start=event.time,
            request=Request(start=event.time),
        )
        self._calls = {}
        turn.steps.append(self._step)

    def _message(self, event: Event, step: Step) -> None:
        request = step.request
        message = _dict(_dict(event.data).get("message"))
        source = _dict(message.get("source"))
        request.provider = _name(source.get("provider")) or request.provider
        request.model = _name(source.get("model")) or request.model
        request.message_seq = event.seq
        if request.end is None:
            request.end = event.time
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == v.BLOCK_TOOL_CALL:
                call_id = block.get("id")
                if isinstance(call_id, str) and call_id not in self._calls:
                    self._call(step, call_id, block.get("name"))

    def _call(self, step: Step, call_id: str, name: object) -> Call:
        call = Call(call_id=cut(call_id, _MAX_NAME_CHARS), name=_name(name))
        self._calls[call_id] = call
        step.calls.append(call)
        return call

    def _tool_call(self, event: Event, step: Step) -> None:
        data = _dict(event.data)
        call_id = data.get("callId")
        if not isinstance(call_id, str):
            return
        call = self._calls.get(call_id) or self._call(step, call_id, data.get("name"))
        call.name = call.name or _name(data.get("name"))
        call.call_seq, call.start = event.seq, event.time
        call.rerun_of = _int(data.get(v.RETRY_OF))

    def _tool_result(self, event: Event, step: Step) -> None:
        data = _dict(event.data)
        message = _dict(data.get("message"))
        call_id = result_call_id(message)
        if not isinstance(call_id, str):
            return
        call = self._calls.get(call_id) or self._call(step, call_id, None)
        content = message.get("content")
        first = _dict(content[0]) if isinstance(content, list) and content else {}
        code = _name(_dict(data.get("error")).get("code"))
        call.result_seq, call.end = event.seq, event.time
        call.is_error = first.get("isError") is True
        call.code = code
        call.recovery = code if code in RECOVERY_CODES else None
        call.aborted = code is not None and code.startswith(v.ABORTED)
        call.explanation = explanation(code)
