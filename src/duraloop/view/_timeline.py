"""The turns -> steps -> request -> calls of a session, folded in one pass (docs/view.md#summary).

`TimelineFold.feed` takes the events in seq order, once; nothing is kept of an event but the
few numbers and names of the timeline, so a 100k-event log is folded without a second copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from duraloop.log import Event, Price, UsageFold, result_call_id
from duraloop.log import vocabulary as v

from ._cut import cut
from ._explain import RECOVERY_CODES, explanation

_MAX_NAME_CHARS = 200  # a tool, provider or model name the log holds (untrusted)
_MAX_MESSAGE_CHARS = 4_000  # an error message of a turn's end


def _name(value: object) -> str | None:
    return cut(value, _MAX_NAME_CHARS) if isinstance(value, str) else None


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


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
        self.turns: list[dict[str, Any]] = []
        self.open_turn: dict[str, Any] | None = None
        self.last_reason: str | None = None
        self._step: dict[str, Any] | None = None
        self._calls: dict[str, dict[str, Any]] = {}
        self._turn_events: list[Event] = []  # the open turn's, for its usage (references only)

    def feed(self, event: Event) -> None:
        """Fold one event (in seq order, after those fed before)."""
        kind = event.type
        if self.open_turn is not None and kind != v.TURN_START:
            self._turn_events.append(event)
        data = _dict(event.data)
        if kind == v.TURN_START:
            self._turn_start(event, data)
            return
        turn = self.open_turn
        if turn is None:
            return
        if kind == v.TURN_END:
            self._turn_end(event, data, turn)
        elif kind == v.STEP_START:
            self._step_start(event, data, turn)
        elif kind == v.STEP_END and self._step is not None:
            self._step["end"] = event.time
            self._step = None
        elif self._step is not None:
            self._in_step(event, data, self._step)

    def _turn_start(self, event: Event, data: dict[str, Any]) -> None:
        turn = data.get("turn")
        self.open_turn = {
            "turn": turn if isinstance(turn, int) else len(self.turns) + 1,
            "start_seq": event.seq,
            "end_seq": None,
            "start": event.time,
            "end": None,
            "reason": None,
            "error": None,
            "end_seq_of_error": None,
            "usage": None,
            "steps": [],
        }
        self.turns.append(self.open_turn)
        self._step = None
        self._calls = {}
        self._turn_events = [event]

    def _turn_end(self, event: Event, data: dict[str, Any], turn: dict[str, Any]) -> None:
        reason = _dict(data.get("reason"))
        kind = _name(reason.get("kind"))
        turn.update(end_seq=event.seq, end=event.time, reason=kind)
        error = error_json(reason.get("error"))
        if error is not None:
            turn.update(error=error, end_seq_of_error=event.seq)
        self.last_reason = kind
        self._close_usage(turn)
        self._turn_events = []
        self.open_turn = None
        self._step = None

    def close(self) -> None:
        """Settle the open final turn's usage so far (call once, after the last event)."""
        if self.open_turn is not None:
            self._close_usage(self.open_turn)

    def _close_usage(self, turn: dict[str, Any]) -> None:
        # One fold per turn, fed the turn's events at once (`UsageFold.feed` sums per call).
        usage = UsageFold(self.prices).feed(self._turn_events)
        priced = bool(self.prices) and not usage.unpriced
        turn["usage"] = {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "requests": usage.requests,
            "tool_calls": usage.tool_calls,
            "cost": usage.cost if priced else None,
        }

    def _step_start(self, event: Event, data: dict[str, Any], turn: dict[str, Any]) -> None:
        step = data.get("step")
        self._step = {
            "step": step if isinstance(step, int) else len(turn["steps"]) + 1,
            "start_seq": event.seq,
            "start": event.time,
            "end": None,
            "request": {
                "start": event.time,
                "end": None,
                "provider": None,
                "model": None,
                "finish": None,
                "retries": [],
                "message_seq": None,
            },
            "calls": [],
        }
        self._calls = {}
        turn["steps"].append(self._step)

    def _in_step(self, event: Event, data: dict[str, Any], step: dict[str, Any]) -> None:
        kind = event.type
        request = step["request"]
        if kind == v.ASSISTANT_CHUNK:
            chunk = _dict(data.get("chunk"))
            if chunk.get("type") == v.FINISH:
                request["finish"] = _name(_dict(chunk.get("reason")).get("kind"))
                request["end"] = event.time
        elif kind == v.REQUEST_CONTEXT:
            request["provider"] = _name(data.get("provider"))
            request["model"] = _name(data.get("model"))
        elif kind == v.LLM_RETRY:
            request["retries"].append(
                {
                    "seq": event.seq,
                    "time": event.time,
                    "attempt": data.get("retry") if isinstance(data.get("retry"), int) else None,
                    "code": _name(_dict(data.get("failure")).get("code")),
                    "delay_ms": data.get("delayMs")
                    if isinstance(data.get("delayMs"), int | float)
                    else None,
                }
            )
        elif kind == v.ASSISTANT_MESSAGE:
            self._message(event, data, step)
        elif kind == v.TOOL_CALL:
            self._tool_call(event, data, step)
        elif kind == v.TOOL_RESULT:
            self._tool_result(event, data, step)

    def _message(self, event: Event, data: dict[str, Any], step: dict[str, Any]) -> None:
        request = step["request"]
        message = _dict(data.get("message"))
        source = _dict(message.get("source"))
        request["provider"] = _name(source.get("provider")) or request["provider"]
        request["model"] = _name(source.get("model")) or request["model"]
        request["message_seq"] = event.seq
        if request["end"] is None:
            request["end"] = event.time
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == v.BLOCK_TOOL_CALL:
                call_id = block.get("id")
                if isinstance(call_id, str) and call_id not in self._calls:
                    self._call(step, call_id, block.get("name"))

    def _call(self, step: dict[str, Any], call_id: str, name: object) -> dict[str, Any]:
        call: dict[str, Any] = {
            "call_id": cut(call_id, _MAX_NAME_CHARS),
            "name": _name(name),
            "call_seq": None,
            "result_seq": None,
            "start": None,
            "end": None,
            "is_error": False,
            "code": None,
            "recovery": None,
            "aborted": False,
            "explanation": None,
            "rerun_of": None,
        }
        self._calls[call_id] = call
        step["calls"].append(call)
        return call

    def _tool_call(self, event: Event, data: dict[str, Any], step: dict[str, Any]) -> None:
        call_id = data.get("callId")
        if not isinstance(call_id, str):
            return
        call = self._calls.get(call_id) or self._call(step, call_id, data.get("name"))
        call["name"] = call["name"] or _name(data.get("name"))
        call["call_seq"] = event.seq
        call["start"] = event.time
        rerun = data.get(v.RETRY_OF)
        call["rerun_of"] = rerun if isinstance(rerun, int) else None

    def _tool_result(self, event: Event, data: dict[str, Any], step: dict[str, Any]) -> None:
        message = _dict(data.get("message"))
        call_id = result_call_id(message)
        if not isinstance(call_id, str):
            return
        call = self._calls.get(call_id) or self._call(step, call_id, None)
        content = message.get("content")
        first = _dict(content[0]) if isinstance(content, list) and content else {}
        code = _name(_dict(data.get("error")).get("code"))
        call.update(
            result_seq=event.seq,
            end=event.time,
            is_error=first.get("isError") is True,
            code=code,
            recovery=code if code in RECOVERY_CODES else None,
            aborted=code is not None and code.startswith(v.ABORTED),
            explanation=explanation(code),
        )
