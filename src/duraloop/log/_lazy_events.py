"""A log whose prefix is decoded only when something reads it (resume from a snapshot).

See docs/store.md#snapshots.

A session resumed from a snapshot holds its derived state (surface, messages, turn counters)
from the snapshot and its events as a `LazyEvents`: the first `prefix_count` events stay on
disk until an index below `prefix_count` (other than a pinned one) is read, then the whole
prefix is decoded once by the loader the store gave (which checks it against the snapshot's
binding again). Everything a resume and a new turn read lies in the tail, so the common path
never decodes the prefix; any other reader still gets exactly the stored events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import overload

from ..errors import CorruptLogError
from ._event import Event

PrefixLoader = Callable[[], list[Event]]
"""Decodes a snapshot's covered prefix: exactly its events, seq 0..n-1, as every read sees them."""


class _SharedPrefix:
    """The prefix every copy of one `LazyEvents` shares: its loader and, once run, its events."""

    __slots__ = ("events", "load")

    def __init__(self, load: PrefixLoader) -> None:
        self.load = load
        self.events: list[Event] | None = None


class LazyEvents(Sequence[Event]):
    """A contiguous log: a prefix decoded on first use, then a tail held in memory.

    Args:
        prefix_count: how many events the prefix holds (seq 0..prefix_count-1).
        load: decodes the prefix; called at most once per `LazyEvents` family.
        pinned: prefix events already known (e.g. the last one), served without a decode.

    Raises:
        CorruptLogError: from an index read that decodes the prefix, if the loader's events
            are not the `prefix_count` events the snapshot covers (or whatever it raises).
    """

    __slots__ = ("_count", "_pinned", "_shared", "_tail")

    def __init__(
        self, prefix_count: int, load: PrefixLoader, pinned: Mapping[int, Event] | None = None
    ) -> None:
        self._count = prefix_count
        self._pinned = dict(pinned or {})
        self._shared = _SharedPrefix(load)
        self._tail: list[Event] = []

    @property
    def prefix_count(self) -> int:
        """How many events the (lazily decoded) prefix holds."""
        return self._count

    @property
    def materialized(self) -> bool:
        """Whether the prefix has been decoded (by this object or a copy)."""
        return self._shared.events is not None

    @property
    def tail(self) -> list[Event]:
        """The events after the prefix (the live list; do not mutate)."""
        return self._tail

    def shares_prefix(self, other: object) -> bool:
        """Return whether `other` is a `LazyEvents` over the very same prefix."""
        return isinstance(other, LazyEvents) and other._shared is self._shared

    def copy(self) -> LazyEvents:
        """Return a copy with its own tail list, sharing the prefix (and its one decode)."""
        clone = LazyEvents.__new__(LazyEvents)
        clone._count = self._count
        clone._pinned = self._pinned
        clone._shared = self._shared
        clone._tail = list(self._tail)
        return clone

    def truncated(self, length: int) -> LazyEvents:
        """Return a copy holding the first `length` events (`length` >= `prefix_count`)."""
        if length < self._count:
            raise ValueError(
                f"cannot cut a LazyEvents inside its prefix ({length} < {self._count})"
            )
        clone = self.copy()
        del clone._tail[length - self._count :]
        return clone

    def append(self, event: Event) -> None:
        """Append one event after the last."""
        self._tail.append(event)

    def extend(self, events: Iterable[Event]) -> None:
        """Append events after the last, in order."""
        self._tail.extend(events)

    def prefix(self) -> list[Event]:
        """Return the decoded prefix, decoding it now if nothing has yet.

        Raises:
            CorruptLogError: if the loader returns another number of events than covered.
        """
        shared = self._shared
        if shared.events is None:
            events = shared.load()
            if len(events) != self._count:
                raise CorruptLogError(
                    f"the log prefix a snapshot covers decodes to {len(events)} events, not "
                    f"{self._count}; remove the session's snapshot file and load it again"
                )
            shared.events = events
        return shared.events

    def __len__(self) -> int:
        return self._count + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...

    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        count = self._count
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1 and start >= count:
                return self._tail[start - count : max(start, stop) - count]
            return [*self.prefix(), *self._tail][index]
        if index < 0:
            index += len(self)
            if index < 0:
                raise IndexError("LazyEvents index out of range")
        if index >= count:
            return self._tail[index - count]
        pinned = self._pinned.get(index)
        return pinned if pinned is not None else self.prefix()[index]

    def __iter__(self) -> Iterator[Event]:
        yield from self.prefix()
        yield from self._tail

    def __reversed__(self) -> Iterator[Event]:
        for index in range(len(self) - 1, -1, -1):
            yield self[index]

    def __repr__(self) -> str:
        state = "decoded" if self.materialized else "on disk"
        return f"<LazyEvents prefix={self._count} ({state}) tail={len(self._tail)}>"


def same_events(events: Sequence[Event], count: int, stored: Sequence[Event]) -> bool:
    """Return whether `events[:count]` is exactly `stored` (the claim check of a writer).

    Two `LazyEvents` over the same prefix compare their tails only (identity first), so a
    session seeded from a snapshot load claims its log without decoding the prefix.

    Args:
        events: the live session's events.
        count: how many of them the stored log must equal.
        stored: the stored events.
    """
    if len(stored) != count or len(events) < count:
        return False
    if isinstance(events, LazyEvents) and isinstance(stored, LazyEvents):
        if not events.shares_prefix(stored):
            return list(events[:count]) == list(stored)
        if stored.prefix_count != events.prefix_count:
            return False
        start = events.prefix_count
        return all(a is b or a == b for a, b in zip(events[start:count], stored.tail, strict=False))
    return list(events[:count]) == list(stored)
