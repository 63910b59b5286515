"""Event builders for the store tests, and the contract's `oneTurnLog`.

See docs/cases.md#persistence-contract-cases.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from duraloop.log import Event, SessionHeader

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared"
FIXTURES = SHARED / "fixtures" / "dsh-sessions"


def ev(
    type: str, seq: int, time: int, data: Any, *, op: Any = None, src: list[int] | None = None
) -> Event:
    """Build one event."""
    return Event(type, seq, time, data, src, op)


def ts(seq: int, turn: int, time: int | None = None) -> Event:
    return ev("turn/start", seq, seq if time is None else time, {"turn": turn})


def te(seq: int, turn: int, kind: str = "completed", time: int | None = None) -> Event:
    return ev(
        "turn/end", seq, seq if time is None else time, {"turn": turn, "reason": {"kind": kind}}
    )


def ss(seq: int, turn: int, step: int, time: int | None = None) -> Event:
    return ev("step/start", seq, seq if time is None else time, {"turn": turn, "step": step})


def se(seq: int, turn: int, step: int, time: int | None = None) -> Event:
    return ev("step/end", seq, seq if time is None else time, {"turn": turn, "step": step})


def user(seq: int, text: str, msg_id: str, time: int | None = None) -> Event:
    data = {
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
        "role": "user",
        "id": msg_id,
    }
    return ev("user/message", seq, seq if time is None else time, data, op="append")


def assistant(
    seq: int, turn: int, step: int, blocks: list[Any], msg_id: str, time: int | None = None
) -> Event:
    message = {
        "role": "assistant",
        "content": blocks,
        "source": {"kind": "model", "provider": "mock", "model": "mock"},
        "id": msg_id,
    }
    return ev(
        "assistant/message",
        seq,
        seq if time is None else time,
        {"turn": turn, "step": step, "message": message},
        op="append",
    )


def call_block(call_id: str, name: str = "bash") -> dict[str, Any]:
    return {"type": "tool-call", "id": call_id, "name": name, "arguments": "{}"}


def tool_call(seq: int, turn: int, step: int, call_id: str, name: str = "bash") -> Event:
    data = {"turn": turn, "step": step, "callId": call_id, "name": name, "arguments": "{}"}
    return ev("tool/call", seq, seq, data)


def text_chunk(
    seq: int, time: int, text: str, *, turn: int = 1, step: int = 1, index: int = 0
) -> Event:
    chunk = {"type": "text-delta", "index": index, "text": text}
    return ev("assistant/chunk", seq, time, {"turn": turn, "step": step, "chunk": chunk})


def one_turn_log() -> list[Event]:
    """docs/cases.md#persistence-contract-cases `oneTurnLog`: seqs 0..5, time = seq + 1."""
    return [
        ts(0, 1, time=1),
        user(1, "hi", "one-turn-user", time=2),
        ss(2, 1, 1, time=3),
        assistant(3, 1, 1, [{"type": "text", "text": "hello"}], "one-turn-assistant", time=4),
        se(4, 1, 1, time=5),
        te(5, 1, time=6),
    ]


def meta(session_id: str, cwd: str | None = None) -> SessionHeader:
    return SessionHeader(id=session_id, created_at=1000, cwd=cwd)
