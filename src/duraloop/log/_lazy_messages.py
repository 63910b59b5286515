"""Derived messages whose snapshot-covered prefix is decoded only when something reads it.

See docs/store.md#snapshots.

A session restored from a snapshot holds the checkpoint's derived messages as the JSON bytes
the snapshot stored (`LazyMessages`), the same idea as `LazyEvents` for its events: the
messages appended after the snapshot live in a tail list, and the covered prefix is decoded
once, by the first read of an index below `prefix_count` (or an iteration, an equality, a
slice reaching into it). A resume, its pairing check and a request encoder seeded from the
snapshot's encoded prefix (`encodings`) read only the tail; any other reader (show, fork,
compaction, hooks) gets exactly the messages a whole-log load derives.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

import msgspec

from ..errors import CorruptLogError
from ._checkpoint import EncodedPrefix, MessagesSource, SessionCheckpoint
from ._messages import Message

_decoder = msgspec.json.Decoder(list[dict[str, Any]])
_encoder = msgspec.json.Encoder()


class _SharedMessages:
    """The prefix every copy of one `LazyMessages` shares: its JSON and, once decoded, its list."""

    __slots__ = ("decodes", "encodings", "messages", "raw")

    def __init__(self, raw: MessagesSource, encodings: Mapping[str, EncodedPrefix]) -> None:
        self.raw = raw
        self.encodings = dict(encodings)
        self.messages: list[Message] | None = None
        self.decodes = 0

    def read(self) -> bytes | memoryview:
        """Return the prefix's JSON, read now if a function stands for it.

        What was read is kept: a later snapshot may replace the file it came from.
        """
        raw = self.raw
        if callable(raw):
            raw = self.raw = raw()
        return raw


class LazyMessages(Sequence[Message]):
    """Derived messages: a prefix kept as JSON until first read, then a tail in memory.

    Args:
        prefix_count: how many messages the prefix holds.
        raw: the prefix as one JSON array (a snapshot's messages section), or the function
            that reads it (`MessagesSource`; it raises `CorruptLogError` if it changed).
        encodings: encoded forms of exactly the prefix, by encoding key (see `EncodedPrefix`);
            only a store that verified the snapshot may pass them.

    Raises:
        CorruptLogError: from a read that decodes the prefix, if `raw` does not decode to
            `prefix_count` message objects.
    """

    __slots__ = ("_count", "_shared", "_tail")

    def __init__(
        self,
        prefix_count: int,
        raw: MessagesSource,
        encodings: Mapping[str, EncodedPrefix] | None = None,
    ) -> None:
        self._count = prefix_count
        self._shared = _SharedMessages(raw, encodings or {})
        self._tail: list[Message] = []

    @property
    def prefix_count(self) -> int:
        """How many messages the (lazily decoded) prefix holds."""
        return self._count

    @property
    def materialized(self) -> bool:
        """Whether the prefix has been decoded (by this object or a copy)."""
        return self._shared.messages is not None

    @property
    def decodes(self) -> int:
        """How many times the prefix was decoded (0 or 1; for tests)."""
        return self._shared.decodes

    @property
    def tail(self) -> list[Message]:
        """The messages after the prefix (the live list; do not mutate)."""
        return self._tail

    @property
    def token(self) -> object:
        """An object identifying the shared prefix (equal for every copy; see `shares_prefix`)."""
        return self._shared

    def shares_prefix(self, token: object) -> bool:
        """Return whether `token` is this object's `token` (the very same prefix)."""
        return token is self._shared

    def encoding(self, key: str) -> EncodedPrefix | None:
        """Return the encoded form of the prefix stored under `key`, or None."""
        return self._shared.encodings.get(key)

    def copy(self) -> LazyMessages:
        """Return a copy with its own tail list, sharing the prefix (and its one decode)."""
        clone = LazyMessages.__new__(LazyMessages)
        clone._count = self._count
        clone._shared = self._shared
        clone._tail = list(self._tail)
        return clone

    def append(self, message: Message) -> None:
        """Append one message after the last."""
        self._tail.append(message)

    def extend(self, messages: Iterable[Message]) -> None:
        """Append messages after the last, in order."""
        self._tail.extend(messages)

    def prefix(self) -> list[Message]:
        """Return the decoded prefix, decoding it now if nothing has yet.

        Raises:
            CorruptLogError: if the stored JSON is not `prefix_count` message objects.
        """
        shared = self._shared
        if shared.messages is None:
            try:
                messages: list[Message] = _decoder.decode(shared.read())  # type: ignore[assignment]
            except msgspec.MsgspecError as exc:
                raise CorruptLogError(
                    f"the messages a snapshot holds do not decode ({exc}); remove the "
                    "session's snapshot file and load it again"
                ) from None
            if len(messages) != self._count:
                raise CorruptLogError(
                    f"the messages a snapshot holds are {len(messages)}, not {self._count}; "
                    "remove the session's snapshot file and load it again"
                )
            shared.decodes += 1
            shared.messages = messages
        return shared.messages

    def encoded(self) -> bytes:
        """Return all the messages as one JSON array, without decoding the prefix.

        The same bytes as `msgspec.json.encode(list(self))` (the prefix's JSON is kept
        as stored, which msgspec wrote).
        """
        raw = bytes(self._shared.read())
        if not self._tail:
            return raw
        tail = _encoder.encode(self._tail)
        if not self._count:
            return tail
        return b"".join((raw[:-1], b",", tail[1:]))

    def __len__(self) -> int:
        return self._count + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        count = self._count
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1 and stop <= start:
                return []
            if step == 1 and start >= count:
                return self._tail[start - count : stop - count]
            return [*self.prefix(), *self._tail][index]
        if index < 0:
            index += len(self)
            if index < 0:
                raise IndexError("LazyMessages index out of range")
        if index >= count:
            return self._tail[index - count]
        return self.prefix()[index]

    def __iter__(self) -> Iterator[Message]:
        yield from self.prefix()
        yield from self._tail

    def __reversed__(self) -> Iterator[Message]:
        for index in range(len(self) - 1, -1, -1):
            yield self[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyMessages):
            if other._shared is self._shared and other._count == self._count:
                return self._tail == other._tail
            return list(self) == list(other)
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(other) == len(self) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __repr__(self) -> str:
        state = "decoded" if self.materialized else "JSON"
        return f"<LazyMessages prefix={self._count} ({state}) tail={len(self._tail)}>"


def restored_messages(checkpoint: SessionCheckpoint) -> LazyMessages:
    """Return a checkpoint's derived messages, undecoded, with its encoded prefixes of them."""
    covered = checkpoint.message_count
    encodings = {e.key: e for e in checkpoint.encoded if e.messages == covered}
    return LazyMessages(covered, checkpoint.messages, encodings)


def checkpoint_messages(
    messages: Sequence[Message], encoded: Sequence[EncodedPrefix]
) -> tuple[bytes, list[EncodedPrefix]]:
    """Return the messages as a checkpoint stores them, and the encoded prefixes it keeps.

    Args:
        messages: the session's derived messages (a `LazyMessages` is not decoded).
        encoded: a model adapter's encoded forms of them; one that does not cover exactly
            `messages` is left out, as is a repeated key.

    Returns:
        The messages as one JSON array, and the encoded prefixes kept.
    """
    if isinstance(messages, LazyMessages):
        raw = messages.encoded()
    else:
        raw = _encoder.encode(messages)
    kept: dict[str, EncodedPrefix] = {}
    for prefix in encoded:
        if prefix.messages == len(messages):
            kept.setdefault(prefix.key, prefix)
    return raw, list(kept.values())
