"""The Summary's timeline records (docs/view.md#summary) as msgspec structs.

Untracked by the garbage collector (`gc=False`: they hold no cycles) and encoded straight to
JSON objects with these field names, so the ~70k records of a 100k-event log's timeline
cost neither collector passes nor a conversion.
"""

from __future__ import annotations

from typing import Any

import msgspec


class Usage(msgspec.Struct, gc=False):
    """What a turn spent (`log.UsageFold`); `cost` is None without a price for every model."""

    input_tokens: int
    output_tokens: int
    requests: int
    tool_calls: int
    cost: float | None


class Retry(msgspec.Struct, gc=False):
    """One `llm/retry` of a step's model request."""

    seq: int
    time: int
    attempt: int | None
    code: str | None
    delay_ms: float | None


class Request(msgspec.Struct, gc=False):
    """A step's model request: its route, its finish and its retries."""

    start: int
    end: int | None = None
    provider: str | None = None
    model: str | None = None
    finish: str | None = None
    retries: list[Retry] = msgspec.field(default_factory=list)
    message_seq: int | None = None


class Call(msgspec.Struct, gc=False):
    """One tool call of a step, in model order, with its result's marks.

    `asked` is the time of its latest `approval/asked`; `waiting` is set on the call a paused
    turn waits on: "approval" (no decision yet) or "resume" (decided, not carried out).
    """

    call_id: str
    name: str | None
    call_seq: int | None = None
    result_seq: int | None = None
    start: int | None = None
    end: int | None = None
    is_error: bool = False
    code: str | None = None
    recovery: str | None = None
    aborted: bool = False
    explanation: str | None = None
    rerun_of: int | None = None
    asked: int | None = None
    waiting: str | None = None


class Step(msgspec.Struct, gc=False):
    """One step: its model request and the calls it asked for."""

    step: int
    start_seq: int
    start: int
    request: Request
    end: int | None = None
    calls: list[Call] = msgspec.field(default_factory=list)


class Turn(msgspec.Struct, gc=False):
    """One turn: its end, its failure (recorded in `turn/end`), its usage and its steps.

    `last` is the time of its latest event; `paused` is true for an open turn waiting on an
    approval (docs/approvals.md#pausing): its duration ends at `last`, not now.
    """

    turn: int
    start_seq: int
    start: int
    end_seq: int | None = None
    end: int | None = None
    reason: str | None = None
    error: dict[str, Any] | None = None
    end_seq_of_error: int | None = None
    usage: Usage | None = None
    steps: list[Step] = msgspec.field(default_factory=list)
    last: int | None = None
    paused: bool = False
