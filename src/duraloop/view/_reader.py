"""Reads of the store for the API: off the event loop, one at a time, cached by revision.

See docs/view.md#reads. A read of a 100k-event log costs a whole decode, so the last logs
read are kept with the store's `revision` token (a cheap stat or row): paging and a
reloaded page reuse them until the log changes. The store's calls are blocking, so they run
in a worker thread, one at a time (a store is not shared between threads at once).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from duraloop.log import Event, SessionHeader
from duraloop.store import DamagedLog, SessionStore, SessionSummary

_KEPT_LOGS = 2
"""How many sessions' events are kept in memory (the page open, and one more)."""

T = TypeVar("T")


@dataclass
class Loaded:
    """One session as read, at one revision.

    Args:
        header: its header.
        events: its committed events.
        revision: the store's revision token read before the events.
        derived: values computed from these events (the summary), by name.
    """

    header: SessionHeader
    events: list[Event]
    revision: str
    derived: dict[str, Any] = field(default_factory=dict)


class StoreReader:
    """The view's access to one store (see the module docstring).

    Args:
        store: the store served.
    """

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._limiter = anyio.CapacityLimiter(1)
        self._logs: OrderedDict[str, Loaded] = OrderedDict()
        self._listed: tuple[tuple[tuple[str, str | None], ...], list[SessionSummary]] | None = None

    async def call(self, function: Callable[[], T]) -> T:
        """Run a blocking store call in a worker thread, one at a time."""
        return await anyio.to_thread.run_sync(function, limiter=self._limiter)

    async def revision(self, session_id: str) -> str:
        """Return the session's revision token (raises `SessionNotFoundError`)."""
        return await self.call(lambda: self.store.revision(session_id))

    async def load(self, session_id: str) -> Loaded:
        """Return the session's events, read again only when its revision changed.

        Raises:
            SessionNotFoundError: if nothing is stored under the id.
            CorruptLogError: if the log is damaged.
            SessionFormatUnsupportedError: for a format this duraloop cannot read.
        """
        return await self.call(lambda: self._load(session_id))

    def _load(self, session_id: str) -> Loaded:
        revision = self.store.revision(session_id)
        kept = self._logs.get(session_id)
        if kept is not None and kept.revision == revision:
            self._logs.move_to_end(session_id)
            return kept
        self._logs.pop(session_id, None)  # the old copy goes before the new one is read
        header, events = self.store.scan(session_id)
        loaded = Loaded(header, events, revision)
        self._logs[session_id] = loaded
        while len(self._logs) > _KEPT_LOGS:
            self._logs.popitem(last=False)
        return loaded

    async def summaries(self) -> list[SessionSummary]:
        """Return `store.list()`, listed again only when some session's revision changed.

        The revisions are cheap (a stat, a row); `list()` reads every log, so a sessions
        page polled while nothing changes costs no read.
        """
        return await self.call(self._summaries)

    def _summaries(self) -> list[SessionSummary]:
        store = self.store
        ids = [
            entry.session_id if isinstance(entry, DamagedLog) else entry.id
            for entry in store.backend.list_headers()
        ]
        key = tuple(sorted((session_id, store.backend.revision(session_id)) for session_id in ids))
        if self._listed is None or self._listed[0] != key:
            self._listed = (key, store.list())
        return self._listed[1]

    def forget(self, session_id: str) -> None:
        """Drop the kept copy of a session (after this server wrote it)."""
        self._logs.pop(session_id, None)
