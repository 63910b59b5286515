"""LazyEvents (docs/store.md#snapshots): a prefix decoded once, on the first read below the tail."""

from __future__ import annotations

import pytest

from duraloop.errors import CorruptLogError
from duraloop.log import Event, LazyEvents, same_events


def _events(start: int, stop: int) -> list[Event]:
    return [Event("x/y", seq, 0, {"n": seq}) for seq in range(start, stop)]


class _Loader:
    def __init__(self, count: int) -> None:
        self.calls = 0
        self.count = count

    def __call__(self) -> list[Event]:
        self.calls += 1
        return _events(0, self.count)


def _lazy(prefix: int = 5, tail: int = 3) -> tuple[LazyEvents, _Loader]:
    loader = _Loader(prefix)
    events = LazyEvents(prefix, loader, {prefix - 1: _events(prefix - 1, prefix)[0]})
    events.extend(_events(prefix, prefix + tail))
    return events, loader


def test_tail_reads_and_the_pinned_last_prefix_event_do_not_decode_the_prefix() -> None:
    events, loader = _lazy()
    assert len(events) == 8
    assert events[-1].seq == 7 and events[5].seq == 5
    assert [e.seq for e in events[5:]] == [5, 6, 7]
    assert events[4].seq == 4  # pinned
    assert loader.calls == 0 and not events.materialized


def test_a_read_inside_the_prefix_decodes_it_once_for_every_copy() -> None:
    events, loader = _lazy()
    copy = events.copy()
    assert events[0].seq == 0
    assert [e.seq for e in copy] == list(range(8))
    assert [e.seq for e in reversed(events)] == list(range(7, -1, -1))
    assert events[2:6] == _events(2, 6)
    assert loader.calls == 1 and copy.materialized


def test_out_of_range_index_raises_index_error() -> None:
    events, _ = _lazy()
    with pytest.raises(IndexError):
        events[8]
    with pytest.raises(IndexError):
        events[-9]


def test_truncated_keeps_the_prefix_and_refuses_a_cut_inside_it() -> None:
    events, loader = _lazy()
    cut = events.truncated(6)
    assert len(cut) == 6 and len(events) == 8
    assert cut.shares_prefix(events)
    with pytest.raises(ValueError, match="inside its prefix"):
        events.truncated(4)
    assert loader.calls == 0


def test_a_loader_returning_other_events_than_covered_is_corruption() -> None:
    events = LazyEvents(5, _Loader(4))
    with pytest.raises(CorruptLogError, match="decodes to 4 events, not 5"):
        events[0]


def test_same_events_compares_tails_only_over_a_shared_prefix() -> None:
    events, loader = _lazy()
    stored = events.truncated(7)
    assert same_events(events, 7, stored)
    assert not same_events(events, 6, stored)  # another length
    other = events.copy()
    other.tail[1] = Event("x/y", 6, 0, {"n": "changed"})
    assert not same_events(other, 7, stored)
    assert loader.calls == 0
    plain = _events(0, 7)
    assert same_events(events, 7, plain)  # against a list: the prefix is decoded
    assert loader.calls == 1
