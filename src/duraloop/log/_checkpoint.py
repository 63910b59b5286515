"""The derived state of a session at a clean point, as a snapshot stores it.

See docs/store.md#snapshots.

A checkpoint is what `Session.checkpoint()` returns between turns (no turn open): how many
events it covers, the surface fold, the derived messages, the next turn number, the last
covered event, and an opaque object of the layer above (the loop's own fold: inbox, request
bookkeeping). `Session.restore()` rebuilds a session from it plus the events after it; the
store binds it to the exact bytes of the log prefix it covers and never trusts it otherwise.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ._event import Event


class SessionCheckpoint(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """A session's derived state after its first `count` events, at a clean point.

    Args:
        count: the events covered (seq 0..count-1); the session was between turns.
        nodes: the surface's node seqs, in order.
        replace_generation: how many surface replaces the covered events made.
        messages: the derived messages (the surface's messages, oldest first).
        next_turn: the number the next `turn/start` must carry.
        last_event: the covered log's last event (seq count-1).
        loop: the loop's own fold of the covered events (JSON it writes and reads alone).
    """

    count: int
    nodes: list[int]
    replace_generation: int
    messages: list[dict[str, Any]]
    next_turn: int
    last_event: Event
    loop: dict[str, Any] = msgspec.field(default_factory=dict)


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(SessionCheckpoint)


def encode_checkpoint(checkpoint: SessionCheckpoint) -> bytes:
    """Encode a checkpoint as compact JSON."""
    return _encoder.encode(checkpoint)


def decode_checkpoint(raw: bytes) -> SessionCheckpoint:
    """Decode a checkpoint and check its shape is consistent.

    Raises:
        ValueError: (msgspec's `ValidationError`/`DecodeError`, or ours) if it is not a
            checkpoint or its parts disagree (counts, seqs out of range).
    """
    checkpoint = _decoder.decode(raw)
    count = checkpoint.count
    if (
        count <= 0
        or checkpoint.last_event.seq != count - 1
        or checkpoint.next_turn < 1
        or checkpoint.replace_generation < 0
        or any(not 0 <= seq < count for seq in checkpoint.nodes)
    ):
        raise ValueError("the checkpoint's counts and seqs disagree")
    return checkpoint
