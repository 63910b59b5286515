"""The derived state of a session at a clean point, as a snapshot stores it.

See docs/store.md#snapshots.

A checkpoint is what `Session.checkpoint()` returns between turns (no turn open): how many
events it covers, the surface fold, the derived messages, the next turn number, the last
covered event, the encoded forms of the messages a model adapter left (`EncodedPrefix`), and
an opaque object of the layer above (the loop's own fold: inbox, request bookkeeping).
`Session.restore()` rebuilds a session from it plus the events after it; the store binds it
to the exact bytes of the log prefix it covers and never trusts it otherwise.

Encoded, a checkpoint is newline-separated sections of compact JSON (msgspec never writes a
raw newline): a head line (everything but the big parts), the body of each encoded prefix,
in the head's order, then the derived messages as one JSON array (last, so a store may leave
that section on disk until it is read: `MessagesSource`). Decoding parses the head only; the
messages and the encoded bodies stay bytes until something reads them (`LazyMessages`), so a
resume costs nothing proportional to the history.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

import msgspec

from ._event import Event

MessagesSource: TypeAlias = "bytes | memoryview | Callable[[], bytes]"
"""A checkpoint's derived messages as one JSON array: the bytes, or a function that reads
them (checking them against the snapshot's digest, raising `CorruptLogError` if they changed)."""


class EncodedPrefix(msgspec.Struct, frozen=True, kw_only=True):
    """A model adapter's encoded form of a checkpoint's derived messages (all of them).

    Opaque to the log: the adapter that wrote it reads it back when its `key` is its own.

    Args:
        key: the encoding's identity: adapter family, format version and every option the
            bytes depend on; an adapter uses an encoded prefix only under its own key.
        messages: how many derived messages it encodes (the checkpoint's, or it is ignored).
        body: one line of JSON (no raw newline), as the adapter wrote it.
        meta: small JSON the adapter needs with it (e.g. tool-id aliases).
    """

    key: str
    messages: int
    body: bytes | memoryview
    meta: dict[str, Any] = msgspec.field(default_factory=dict)


class _EncodedHead(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    key: str
    messages: int
    meta: dict[str, Any] = msgspec.field(default_factory=dict)


class _Head(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    count: int
    nodes: list[int]
    replace_generation: int
    message_count: int
    next_turn: int
    last_event: Event
    loop: dict[str, Any] = msgspec.field(default_factory=dict)
    encoded: list[_EncodedHead] = msgspec.field(default_factory=list)


class SessionCheckpoint(msgspec.Struct, kw_only=True):
    """A session's derived state after its first `count` events, at a clean point.

    Args:
        count: the events covered (seq 0..count-1); the session was between turns.
        nodes: the surface's node seqs, in order.
        replace_generation: how many surface replaces the covered events made.
        message_count: how many derived messages there are.
        messages: the derived messages (oldest first) as one JSON array, not decoded (or
            the function that reads that array).
        next_turn: the number the next `turn/start` must carry.
        last_event: the covered log's last event (seq count-1).
        loop: the loop's own fold of the covered events (JSON it writes and reads alone).
        encoded: encoded forms of all `message_count` messages, at most one per key.
    """

    count: int
    nodes: list[int]
    replace_generation: int
    message_count: int
    messages: MessagesSource
    next_turn: int
    last_event: Event
    loop: dict[str, Any] = msgspec.field(default_factory=dict)
    encoded: list[EncodedPrefix] = msgspec.field(default_factory=list)


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(_Head)


def encode_checkpoint(checkpoint: SessionCheckpoint) -> bytes:
    """Encode a checkpoint as its newline-separated JSON sections.

    Raises:
        ValueError: if a section is not one line (an encoded body holding a raw newline).
    """
    head = _Head(
        count=checkpoint.count,
        nodes=checkpoint.nodes,
        replace_generation=checkpoint.replace_generation,
        message_count=checkpoint.message_count,
        next_turn=checkpoint.next_turn,
        last_event=checkpoint.last_event,
        loop=checkpoint.loop,
        encoded=[
            _EncodedHead(key=e.key, messages=e.messages, meta=e.meta) for e in checkpoint.encoded
        ],
    )
    messages = checkpoint.messages
    sections = [_encoder.encode(head), *(bytes(encoded.body) for encoded in checkpoint.encoded)]
    sections.append(messages() if callable(messages) else bytes(messages))
    if any(b"\n" in section for section in sections[1:]):
        raise ValueError("a checkpoint section holds a raw newline")
    return b"\n".join(sections)


def decode_checkpoint(
    data: bytes, start: int = 0, *, messages: Callable[[], bytes] | None = None
) -> SessionCheckpoint:
    """Decode a checkpoint's head and check its shape is consistent; keep the rest as bytes.

    The messages and encoded bodies are not parsed here (the snapshot's body digest vouches
    for their bytes; they are views into `data`, not copies); each must look like one JSON
    array.

    Args:
        data: holds the encoded checkpoint from `start` to its end.
        start: where the checkpoint begins in `data`.
        messages: reads the last section (the messages) when `data` stops before it (a
            store that left it on disk); None when `data` holds every section.

    Raises:
        ValueError: (msgspec's `ValidationError`/`DecodeError`, or ours) if it is not a
            checkpoint or its parts disagree (counts, seqs out of range, sections).
    """
    view = memoryview(data)
    sections: list[memoryview] = []
    while True:
        end = data.find(b"\n", start)
        if end < 0:
            sections.append(view[start:])
            break
        sections.append(view[start:end])
        start = end + 1
    head = _decoder.decode(sections[0])
    count = head.count
    if (
        count <= 0
        or head.last_event.seq != count - 1
        or head.next_turn < 1
        or head.replace_generation < 0
        or head.message_count < 0
        or (head.nodes and (min(head.nodes) < 0 or max(head.nodes) >= count))
    ):
        raise ValueError("the checkpoint's counts and seqs disagree")
    expected = 1 + len(head.encoded) + (messages is None)
    if len(sections) != expected:
        raise ValueError("the checkpoint's sections are not its head's")
    source: MessagesSource = sections[-1] if messages is None else messages
    if messages is None and not _is_array(sections[-1]):
        raise ValueError("the checkpoint's messages are not a JSON array")
    encoded = []
    for entry, body in zip(head.encoded, sections[1 : 1 + len(head.encoded)], strict=True):
        if not _is_array(body):
            raise ValueError(f"the checkpoint's encoded prefix {entry.key!r} is not a JSON array")
        encoded.append(
            EncodedPrefix(key=entry.key, messages=entry.messages, body=body, meta=entry.meta)
        )
    return SessionCheckpoint(
        count=count,
        nodes=head.nodes,
        replace_generation=head.replace_generation,
        message_count=head.message_count,
        messages=source,
        next_turn=head.next_turn,
        last_event=head.last_event,
        loop=head.loop,
        encoded=encoded,
    )


def _is_array(section: memoryview) -> bool:
    return len(section) >= 2 and section[0] == 0x5B and section[-1] == 0x5D  # "[" ... "]"
