"""Idempotency keys, and the outcome-unknown calls a re-run may answer.

See docs/recovery.md#idempotency-keys, docs/recovery.md#re-running-outcome-unknown-calls.

A call's key is derived from the session that first recorded the call and the call's id,
nothing else, so it is the same in every process, across a crash and resume, and when an
explicit `--retry-unknown` re-runs the call. A fork's own calls get keys of the fork; a call
the fork inherited in its seed keeps the key its parent gave it. This module is the one home
of that derivation and of the search for re-runnable `TOOL_OUTCOME_UNKNOWN` results; the loop
decides which of them to re-run (only tools declared idempotent) and appends the events.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._event import Event
from ._header import SessionHeader
from ._messages import result_call_id
from .vocabulary import (
    BLOCK_TEXT,
    IDEMPOTENCY_KEY_PREFIX,
    RERUN_CALL_ID_INFIX,
    RERUN_FAILED_TEXT,
    RERUN_SUCCEEDED_TEXT,
    RETRY_OF,
    SURFACE_APPEND,
    TOOL_CALL,
    TOOL_OUTCOME_UNKNOWN,
    TOOL_RESULT,
)

_KEY_HEX_DIGITS = 32
"""Hex digits of SHA-256 kept in a key (128 bits)."""


def idempotency_key(session_id: str, call_id: str) -> str:
    """Return the idempotency key of one tool call (docs/recovery.md#idempotency-keys).

    `"dl1-"` + the SHA-256 of `session_id`, a NUL and `call_id`, its first 32 hex digits: 36 ASCII
    characters of `[a-z0-9-]`, accepted by the APIs that take idempotency keys (Stripe
    allows 255 characters, most cloud APIs 64 or more). Deterministic: no clock, no salt.

    Args:
        session_id: the session that first recorded the call (`call_origin`).
        call_id: the tool-call block id the model issued.

    Returns:
        The key.
    """
    digest = hashlib.sha256(f"{session_id}\0{call_id}".encode("utf-8", "surrogatepass"))
    return IDEMPOTENCY_KEY_PREFIX + digest.hexdigest()[:_KEY_HEX_DIGITS]


def call_origin(header: SessionHeader, call_seq: int | None) -> str:
    """Return the session whose key a call uses: the parent's for a call a fork inherited.

    See docs/recovery.md#idempotency-keys. A call is inherited when its `tool/call` lies in
    the fork's seed (`call_seq < header.seed_length`); a fork of a fork names only its
    direct parent, so a call inherited through two forks uses the middle session's key.

    Args:
        header: the session's header (`parentSession`, `seedLength`).
        call_seq: the seq of the call's `tool/call`, or None for a call being recorded now.

    Returns:
        `header.parent_session` for an inherited call, else `header.id`.
    """
    parent, seed_length = header.parent_session, header.seed_length
    if call_seq is not None and parent and seed_length is not None and call_seq < seed_length:
        return parent
    return header.id


@dataclass(frozen=True, slots=True)
class UnknownCall:
    """One `TOOL_OUTCOME_UNKNOWN` result and the call it answers.

    Args:
        result_seq: the seq of the `TOOL_OUTCOME_UNKNOWN` `tool/result` (appended).
        call_seq: the seq of the `tool/call` it cites.
        call_id: the call's id.
        name: the tool name recorded in the `tool/call`.
        arguments: the raw argument text recorded in the `tool/call`.
        origin_session_id: the session whose key the call uses (`call_origin`).
        current: whether the result is still a surface node (not compacted or replaced).
        rerun_seq: the seq of the re-run `tool/call` whose result replaced it, or None.
        attempts: the re-run `tool/call`s recorded for it so far (finished or not).
    """

    result_seq: int
    call_seq: int
    call_id: str
    name: str
    arguments: str
    origin_session_id: str
    current: bool
    rerun_seq: int | None
    attempts: int = 0

    @property
    def idempotency_key(self) -> str:
        """The call's key (`idempotency_key` of its origin session and call id)."""
        return idempotency_key(self.origin_session_id, self.call_id)

    @property
    def rerun_call_id(self) -> str:
        """The `callId` of the next re-run's `tool/call`: `<callId>-rerun-<attempt>`.

        A re-run's `tool/call` needs an id of its own: dsh's conversation view refuses a
        second `tool/call` with an id it has seen
        (docs/recovery.md#re-running-outcome-unknown-calls).
        """
        return f"{self.call_id}{RERUN_CALL_ID_INFIX}{self.attempts + 1}"


def outcome_unknown_calls(
    events: Sequence[Event], surface_nodes: Sequence[int], header: SessionHeader
) -> list[UnknownCall]:
    """Return every `TOOL_OUTCOME_UNKNOWN` result of a log whose `tool/call` is known, in order.

    See docs/recovery.md#re-running-outcome-unknown-calls. A result counts when it joined the
    surface by `append` and cites a `tool/call` of the same call id (crash repair's and the
    loop's recovery results, and a body that could not be interrupted, all do).

    Args:
        events: the log.
        surface_nodes: its current surface (`Session.surface.nodes`).
        header: its header, for the calls a fork inherited.

    Returns:
        One `UnknownCall` per such result, in log order.
    """
    current = set(surface_nodes)
    retry_calls: dict[int, object] = {}
    attempts: dict[object, int] = {}
    reruns: dict[int, int] = {}
    found: list[tuple[Event, Event]] = []
    for event in events:
        data: Any = event.data
        if event.type == TOOL_CALL and isinstance(data, dict) and RETRY_OF in data:
            retry_calls[event.seq] = data[RETRY_OF]
            attempts[data[RETRY_OF]] = attempts.get(data[RETRY_OF], 0) + 1
        elif event.type != TOOL_RESULT or not isinstance(data, dict):
            continue
        elif event.surface_op == SURFACE_APPEND:
            call = _cited_call(event, events)
            if call is not None and _is_outcome_unknown(data):
                found.append((event, call))
        elif isinstance(event.surface_op, dict):
            start = event.surface_op.get("start")
            for source in event.source_event_seqs or ():
                if source in retry_calls and isinstance(start, int):
                    reruns[start] = source
    return [
        UnknownCall(
            result_seq=result.seq,
            call_seq=call.seq,
            call_id=call.data["callId"],
            name=str(call.data.get("name", "")),
            arguments=str(call.data.get("arguments", "")),
            origin_session_id=call_origin(header, call.seq),
            current=result.seq in current,
            rerun_seq=reruns.get(result.seq),
            attempts=attempts.get(call.seq, 0),
        )
        for result, call in found
    ]


def _is_outcome_unknown(data: dict[str, Any]) -> bool:
    error = data.get("error")
    return isinstance(error, dict) and error.get("code") == TOOL_OUTCOME_UNKNOWN


def _cited_call(result: Event, events: Sequence[Event]) -> Event | None:
    call_id = result_call_id(result.data.get("message"))
    for source in result.source_event_seqs or ():
        if type(source) is int and 0 <= source < len(events):
            call = events[source]
            data = call.data
            if call.type == TOOL_CALL and isinstance(data, dict) and data.get("callId") == call_id:
                return call
    return None


def rerun_result_data(original: dict[str, Any], content: list[Any]) -> dict[str, Any]:
    """Return a `tool/result`'s data with only its first block's `content` replaced.

    The content-only rewrite rule (docs/log.md#surface-and-derived-messages): turn, step,
    error, meta, message id, `isError` and every other field stay as they were.

    Args:
        original: the replaced result's data.
        content: the new content blocks.

    Returns:
        The replacement's data (a new dict; `original` is not changed).
    """
    message = original["message"]
    first, *rest = message["content"]
    return {**original, "message": {**message, "content": [{**first, "content": content}, *rest]}}


def rerun_text(key: str, *, failed: bool) -> dict[str, str]:
    """Return the text block that opens a re-run's replacement content.

    The text ends with `RERUN_FAILED_TEXT` or `RERUN_SUCCEEDED_TEXT`: the content-only rule
    leaves no other field where the re-run's outcome could be written, so `rerun_result`
    reads it back from that sentence (docs/recovery.md#re-running-outcome-unknown-calls).

    Args:
        key: the idempotency key the re-run used.
        failed: whether the re-run itself returned an error.

    Returns:
        A `text` block saying the call was re-run, with which key, and how it ended.
    """
    how = RERUN_FAILED_TEXT if failed else RERUN_SUCCEEDED_TEXT
    return {
        "type": BLOCK_TEXT,
        "text": "The outcome of this tool call was unknown (it was interrupted after it was "
        f"recorded), so it was re-run on request with the same idempotency key {key}; the tool "
        f"is declared idempotent. {how}",
    }
