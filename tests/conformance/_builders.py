"""Small event builders in the notation of docs/cases.md#log-and-persistence-cases (TS, TE, SS, SE,
U, A, CH, TC, TR, ES).

A builder returns a `Spec` (type, data and surface marker, no seq yet). `build(*specs)` turns
specs into a log with `seq == time == index`, as the spec's repair cases assume; `append(session,
spec)` appends one spec to a live `Session`. A `TR` cites the latest `tool/call` of its call id,
resolved against the events before it, like the loop does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from duraloop.log import Event, Session

PROVIDER = "test-provider"
MODEL = "test-model"


@dataclass(frozen=True)
class Spec:
    """One event without its seq: what a builder returns."""

    type: str
    data: Any
    surface_op: Any = None
    sources: list[int] | None = None
    cite_call: str | None = None
    time: int | None = None

    def at(self, time: int) -> Spec:
        """Return this spec with an explicit `time`."""
        return replace(self, time=time)


def TS(turn: int) -> Spec:  # noqa: N802 - the spec's notation
    return Spec("turn/start", {"turn": turn})


def TE(turn: int, kind: str = "completed", **reason: Any) -> Spec:  # noqa: N802
    # An error or aborted reason needs its failure or cause (docs/log.md#event-types): default one.
    defaults: dict[str, Any] = {
        "error": {"error": {"message": "boom", "code": "UNKNOWN"}},
        "aborted": {"reason": {"kind": "user"}},
    }.get(kind, {})
    return Spec("turn/end", {"turn": turn, "reason": {"kind": kind, **defaults, **reason}})


def SS(turn: int, step: int) -> Spec:  # noqa: N802
    return Spec("step/start", {"turn": turn, "step": step})


def SE(turn: int, step: int) -> Spec:  # noqa: N802
    return Spec("step/end", {"turn": turn, "step": step})


def ES() -> Spec:  # noqa: N802
    return Spec("session/end-seed", {})


def U(  # noqa: N802
    text: str,
    *,
    source: dict[str, Any] | None = None,
    op: Any = "append",
    sources: list[int] | None = None,
    message_id: str | None = None,
) -> Spec:
    message = {
        "id": message_id or f"user-{text}",
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": source or {"kind": "user"},
    }
    return Spec("user/message", message, op, sources)


def txt(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def call(call_id: str, name: str = "bash", arguments: str = "{}") -> dict[str, Any]:
    return {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}


def A(  # noqa: N802
    turn: int,
    step: int,
    *blocks: dict[str, Any],
    op: Any = "append",
    sources: list[int] | None = None,
    message_id: str | None = None,
) -> Spec:
    message = {
        "id": message_id or f"assistant-{turn}-{step}",
        "role": "assistant",
        "content": list(blocks),
        "source": {"kind": "model", "provider": PROVIDER, "model": MODEL},
    }
    return Spec("assistant/message", {"turn": turn, "step": step, "message": message}, op, sources)


def CH(turn: int, step: int, text: str = "x") -> Spec:  # noqa: N802
    chunk = {"type": "text-delta", "index": 0, "text": text}
    return Spec("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk})


def TC(  # noqa: N802
    turn: int, step: int, call_id: str, name: str = "bash", arguments: str = "{}"
) -> Spec:
    data = {"turn": turn, "step": step, "callId": call_id, "name": name, "arguments": arguments}
    return Spec("tool/call", data)


def result_data(
    turn: int,
    step: int,
    call_id: str,
    text: str = "ok",
    *,
    is_error: bool = False,
    error: dict[str, Any] | None = None,
    meta: Any = None,
    message_id: str | None = None,
) -> dict[str, Any]:
    """Return loop-shaped `tool/result` data."""
    message = {
        "source": {"kind": "tool", "callId": call_id},
        "content": [
            {
                "type": "tool-result",
                "toolCallId": call_id,
                "content": [{"type": "text", "text": text}],
                "isError": is_error,
            }
        ],
        "role": "user",
        "id": message_id or f"result-{call_id}",
    }
    data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
    if error is not None:
        data["error"] = error
    if meta is not None:
        data["meta"] = meta
    return data


def TR(  # noqa: N802
    turn: int,
    step: int,
    call_id: str,
    text: str = "ok",
    *,
    is_error: bool = False,
    error: dict[str, Any] | None = None,
    meta: Any = None,
    op: Any = "append",
    sources: list[int] | None = None,
) -> Spec:
    data = result_data(turn, step, call_id, text, is_error=is_error, error=error, meta=meta)
    cite = call_id if sources is None and op == "append" else None
    return Spec("tool/result", data, op, sources, cite_call=cite)


def RAW(  # noqa: N802
    type: str, data: Any, *, op: Any = None, sources: list[int] | None = None
) -> Spec:
    return Spec(type, data, op, sources)


def _sources(spec: Spec, prior: Sequence[Event]) -> list[int] | None:
    if spec.cite_call is None:
        return spec.sources
    for event in reversed(prior):
        if event.type == "tool/call" and event.data.get("callId") == spec.cite_call:
            return [event.seq]
    return None


def build(*specs: Spec) -> list[Event]:
    """Return a log with `seq == index` and `time == seq` unless a spec sets its time."""
    events: list[Event] = []
    for index, spec in enumerate(specs):
        time = index if spec.time is None else spec.time
        events.append(
            Event(spec.type, index, time, spec.data, _sources(spec, events), spec.surface_op)
        )
    return events


def append(session: Session, spec: Spec) -> Event:
    """Append one spec to a live session (its clock sets the time)."""
    return session.append(
        spec.type,
        spec.data,
        surface_op=spec.surface_op,
        source_event_seqs=_sources(spec, session.events),
    )


def fixed_clock(value: int = 1000) -> Any:
    """Return a clock that always reads `value` (no wall-clock dependence)."""
    return lambda: value
