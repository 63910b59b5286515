"""Transport activity that re-arms a consumer's stream idle timer.

See docs/providers.md#adapter-guarantees.

A provider may keep a slow response alive with bytes that carry no chunk (DeepSeek's
`: keep-alive` SSE comments while a request is queued, Anthropic's `ping` events). The
consumer of a model stream (the loop's idle timeout) installs a callback with
`watching_stream_activity`; an adapter calls `note_stream_activity()` whenever such bytes
arrive. The callback travels in a context variable: an adapter's async generator runs in
the task that iterates it, so it sees the consumer's context. With no watcher installed,
`note_stream_activity()` does nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_WATCHER: ContextVar[Callable[[], None] | None] = ContextVar(
    "duraloop_stream_activity", default=None
)


def note_stream_activity() -> None:
    """Tell the stream's consumer that the provider is still sending (no chunk to yield)."""
    watcher = _WATCHER.get()
    if watcher is not None:
        watcher()


@contextmanager
def watching_stream_activity(on_activity: Callable[[], None]) -> Iterator[None]:
    """Call `on_activity` for every `note_stream_activity()` made inside the block.

    Args:
        on_activity: e.g. a function that pushes an idle deadline forward.

    Yields:
        None; the watcher is removed when the block exits.
    """
    token = _WATCHER.set(on_activity)
    try:
        yield
    finally:
        _WATCHER.reset(token)
