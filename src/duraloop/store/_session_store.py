"""SessionStore: the coordination every backend shares.

See docs/recovery.md#when-repair-runs, #resume, docs/store.md#coordination.

Single writer per session (a lock taken by `open_writer` and by repairing loads), the id
collision check, seq checks on every append, cold repair on load (truncate a torn tail,
append closers durably), legacy import and the vocabulary refusal on every read (`log._legacy`),
the validation `check` reports on every read (`_validation`), and fork. Backends only store.

The ready-made stores over each backend are in `_stores`; the helpers of this class are
`_claim`, `_fork_cut`, `_validation` and `_summary`.
"""

from __future__ import annotations

import bisect
import builtins
import logging
from collections.abc import Sequence
from dataclasses import replace

from duraloop.errors import (
    SessionNotFoundError,
    StoreError,
    UsageError,
)
from duraloop.log import (
    Event,
    LogCheckReport,
    Session,
    SessionHeader,
    check_log,
    is_safe_int,
    lossless_copy,
)

from ._backend import StorageBackend
from ._claim import RememberedLoads, claim, final_turn_closers, remember_load
from ._fork_cut import fork_session
from ._loaded import LoadedSession, RepairReport
from ._snapshot_load import load_with_snapshot
from ._summary import SessionSummary, list_summaries
from ._validation import judge, readable, refuse_closing_unanswered, refuse_unanswered
from ._writer import SessionWriter, check_batch

logger = logging.getLogger(__name__)


class SessionStore:
    """Persist, load, repair, list and fork session logs over one storage backend.

    Args:
        backend: the storage (see `MemoryStore` and `JsonlStore` for ready-made stores).
    """

    def __init__(self, backend: StorageBackend) -> None:
        self.backend = backend
        self._writers: dict[str, SessionWriter] = {}
        self._loaded = RememberedLoads()

    def open_writer(self, session: Session) -> SessionWriter:
        """Take the session's writer lock and return a writer that persists it.

        A resumed or forked session whose seed reproduces the stored log claims it and writes
        only its suffix (e.g. the `session/end-seed`); a torn tail is truncated first.

        Args:
            session: the live session.

        Returns:
            The writer; call `flush()` at durability points and `close()` at the end.

        Raises:
            SessionLockedError: if another writer (in any process) holds the session.
            SessionExistsError: if a brand-new session reuses an id with a persisted log.
            CorruptLogError: if the stored log is damaged.
        """
        if session.id in self._writers:
            raise StoreError(f'session "{session.id}" already has an open writer in this store')
        release = self.backend.lock(session.id, cwd=session.header.cwd)
        try:
            cursor = claim(self.backend, self._loaded, session)
        except BaseException:
            release()
            raise
        writer = SessionWriter(
            session, backend=self.backend, cursor=cursor, release=release, on_close=self._closed
        )
        self._writers[session.id] = writer
        return writer

    def _closed(self, writer: SessionWriter) -> None:
        if self._writers.get(writer.session.id) is writer:
            del self._writers[writer.session.id]

    def append(self, session_id: str, events: Sequence[Event]) -> None:
        """Append a contiguous batch to a stored session durably, under its writer lock.

        Args:
            session_id: a stored session without an open writer.
            events: events whose first seq is the stored length; empty is a no-op.

        Raises:
            AppendConflictError: if the first seq is not the stored next seq, or seqs gap.
            EventRejectedError: if an event's data is not losslessly JSON-serializable.
            InvariantError: if a `step/end` or `turn/end` would close calls left unanswered.
            SessionNotFoundError: if nothing is stored under the id.
            SessionLockedError: if a writer holds the session.
        """
        batch = list(events)
        if not batch:
            return
        for event in batch:
            what = (
                "session event batch is not losslessly JSON-serializable: "
                f'"{event.type}" seq {event.seq}'
            )
            lossless_copy([event.data, event.surface_op, event.source_event_seqs], what=what)
        release = self.backend.lock(session_id, cwd=None)
        try:
            stored = self.backend.read(session_id)
            check_batch(session_id, batch, len(stored.events))
            refuse_closing_unanswered(session_id, stored.events, batch)
            if stored.torn is None:
                self.backend.append(session_id, batch)
            else:
                self.backend.repair(session_id, stored.torn, stored.recovered() + batch)
        finally:
            release()

    def load(self, session_id: str) -> LoadedSession:
        """Read a session, validate it as `check_log` does, then durably repair it.

        Nothing is written unless the log validates and can be continued; then a torn tail
        is truncated and an interrupted final turn gets its closers.

        Args:
            session_id: the session to load.

        Returns:
            The balanced log, without a `session/end-seed` for the next lifecycle.

        Raises:
            SessionNotFoundError: if nothing is stored under the id.
            SessionLockedError: if another process is writing the session.
            CorruptLogError: if the committed region is damaged or breaks a rule `check`
                enforces.
            UnpairedHistoryError: if a closed step left tool calls unanswered (the message
                names the rescue fork); nothing is written.
            SessionFormatUnsupportedError: for a newer/older format or an unknown event type.
            StoreError: if the repair cannot be written, or the live turn of a writer open
                in this store is not closed.
        """
        loaded = self.prepare(session_id)[0]
        return replace(loaded, events=list(loaded.events))

    def prepare(self, session_id: str) -> tuple[LoadedSession, Session]:
        """Load a session as `load` does and return the session that continues it.

        The validation of the load built the session (seeded with the balanced log, ending
        with the next lifecycle's `session/end-seed`), so a resume validates the log once.

        Args:
            session_id: the session to load.

        Returns:
            What `load` returns, and the unpublished session; pass it to `open_writer`.

        Raises:
            SessionNotFoundError: as `load`.
            SessionLockedError: as `load`.
            CorruptLogError: as `load`.
            UnpairedHistoryError: as `load`.
            SessionFormatUnsupportedError: as `load`.
            StoreError: as `load`.
        """
        live = self._writers.get(session_id)
        if live is not None:
            live.flush()
            stored = self.backend.read(session_id)
            events = readable(stored)
            if final_turn_closers(events, path=stored.path):
                raise StoreError(
                    f'cannot load session "{session_id}" while its live turn is open; use the '
                    "live Session or wait for the turn to close"
                )
            loaded = LoadedSession(stored.header, events, RepairReport())
            return loaded, Session(session_id, seed=events, header=stored.header)
        if not self.backend.exists(session_id):
            # Checked before locking: the lock of an unknown id would create its directory.
            raise SessionNotFoundError(session_id)
        release = self.backend.lock(session_id, cwd=None)
        try:
            fast = load_with_snapshot(self.backend, session_id)
            if not isinstance(fast, str):
                cwd = fast[0].header.cwd
                remember_load(self.backend, self._loaded, session_id, cwd, fast[0].events)
                return fast
            stored = self.backend.read(session_id)
            committed = readable(stored)
            # Judged before anything is written: damage and unanswered history refuse.
            report, session = judge(stored.header, committed, path=stored.path)
            refuse_unanswered(report.unanswered, session_id=session_id)
            closers = list(session.events[len(committed) : len(committed) + report.closers_needed])
            # One durable repair: cut the torn tail, then store the recovered events as they
            # were read (no legacy import) and the closers.
            rewrite = stored.recovered()
            torn_copy = None
            if stored.torn is not None or closers:
                torn_copy = self.backend.repair(
                    session_id, stored.torn, rewrite + closers
                ).torn_copy
            if closers:
                logger.warning(
                    "session %s: closed interrupted turn with %d closers", session_id, len(closers)
                )
            events = committed + closers
            remember_load(self.backend, self._loaded, session_id, stored.header.cwd, events)
        finally:
            release()
        repair = RepairReport(stored.torn_bytes, closers, stored.cut, torn_copy)
        return LoadedSession(stored.header, events, repair, fast), session

    def inspect(self, session_id: str) -> LoadedSession:
        """Read a session and balance it in memory only; never writes.

        Args:
            session_id: the session to read.

        Returns:
            The stored events plus in-memory closers; `repair.truncated_bytes` is what a
            load would cut.

        Raises:
            SessionNotFoundError: if nothing is stored under the id.
            CorruptLogError: if the committed region is damaged or breaks a rule `check`
                enforces (a log with unanswered closed history is returned).
            SessionFormatUnsupportedError: for a newer/older format or an unknown event type.
        """
        stored = self.backend.read(session_id)
        events = readable(stored)
        report, session = judge(stored.header, events, path=stored.path)
        closers = list(session.events[len(events) : len(events) + report.closers_needed])
        return LoadedSession(
            stored.header, events + closers, RepairReport(stored.torn_bytes, closers, stored.cut)
        )

    def check(self, session_id: str) -> LogCheckReport:
        """Judge a stored session as `duraloop check` does; never writes.

        Args:
            session_id: the session to check.

        Returns:
            The `check_log` report of the committed events, with `torn_tail_bytes` set.

        Raises:
            SessionNotFoundError: if nothing is stored under the id.
            CorruptLogError: if the committed region cannot be read at all.
            SessionFormatUnsupportedError: for a newer/older format or an unknown event type.
        """
        stored = self.backend.read(session_id)
        report = check_log(stored.header.id, readable(stored))
        return replace(report, torn_tail_bytes=stored.torn_bytes)

    def read(self, session_id: str) -> tuple[SessionHeader, builtins.list[Event]]:
        """Read a session's stored events exactly as committed; never writes or repairs.

        An open final turn stays open (no closers); a torn tail is left out.

        Args:
            session_id: the session to read.

        Returns:
            The header and the committed events in seq order.

        Raises:
            SessionNotFoundError: if nothing is stored under the id.
            CorruptLogError: if the committed region is damaged or breaks a rule `check`
                enforces (a log with unanswered closed history is returned).
            SessionFormatUnsupportedError: for a newer/older format or an unknown event type.
        """
        stored = self.backend.read(session_id)
        events = readable(stored)
        judge(stored.header, events, path=stored.path)
        return stored.header, events

    def scan(self, session_id: str) -> tuple[SessionHeader, builtins.list[Event]]:
        """Read as `read` does without judging the invariants (docs/store.md#store-contract).

        For a viewer, which shows a log as it is (`list()` marks one breaking a rule of
        `check` damaged); the legacy import and the vocabulary refusal apply. Never writes.

        Raises:
            SessionNotFoundError: if nothing is stored under the id.
            CorruptLogError: if the committed region cannot be read.
            SessionFormatUnsupportedError: for a newer/older format or an unknown event type.
        """
        stored = self.backend.read(session_id)
        return stored.header, readable(stored)

    def read_from(self, session_id: str, from_seq: int) -> builtins.list[Event]:
        """Return the committed events with seq >= `from_seq`, as stored.

        See docs/store.md#store-contract.

        No repair and no closers: an open final turn is served open, a torn tail left out.

        Args:
            session_id: the session to read.
            from_seq: the first seq wanted; at or past the end gives `[]`.

        Returns:
            The physical suffix of the committed prefix, in seq order.

        Raises:
            UsageError: if `from_seq` is not a non-negative safe integer.
            SessionNotFoundError: if nothing is stored under the id.
            CorruptLogError: if the committed region is damaged.
            SessionFormatUnsupportedError: for a newer/older format or an unknown event type.
        """
        if not is_safe_int(from_seq):
            raise UsageError(
                f"read_from from_seq must be a non-negative safe integer, got {from_seq!r}"
            )
        events = self.read(session_id)[1]
        start = bisect.bisect_left(events, from_seq, key=lambda event: event.seq)
        return events[start:]

    def revision(self, session_id: str) -> str:
        """Return an opaque token of the stored log (docs/store.md#store-contract, `listSnapshots`).

        Equal while the log is unchanged (reads, `inspect`, a load that repairs nothing); it
        changes after every append and committed repair, and differs between stores.

        Raises:
            SessionNotFoundError: if nothing is stored under the id.
        """
        token = self.backend.revision(session_id)
        if token is None:
            raise SessionNotFoundError(session_id)
        return token

    def locate(self, session_id: str) -> str | None:
        """Return where the session's log lives (a file path), or None for a memory store.

        Raises:
            SessionNotFoundError: if nothing is stored under the id.
        """
        return self.backend.read(session_id).path

    def exists(self, session_id: str) -> bool:
        """Return whether a persisted log exists for the id."""
        return self.backend.exists(session_id)

    def list(self) -> builtins.list[SessionSummary]:
        """Summarize every persisted session, oldest first (reads each log, no repair).

        A log that cannot be read is still a row: its `damaged` field says why (one damaged
        session never hides the others); damaged rows come last.

        Returns:
            One `SessionSummary` per materialized session.
        """
        return list_summaries(self.backend)

    def fork(
        self, source_id: str, *, boundary: int | None = None, child_id: str | None = None
    ) -> str:
        """Persist a new session seeded with a prefix of another (docs/recovery.md#fork).

        The child log is the seed plus `session/end-seed`, written once; its header has
        `parentSession`, `seedLength` and the parent's cwd. The source is never written.
        A cut inside a turn is closed with crash repair's closers (recovery results,
        `step/end`, `turn/end {interrupted}`); this rescues a session whose closed history
        has unanswered calls (`UnpairedHistoryError` names the cut).

        Args:
            source_id: the session to fork (read without repair).
            boundary: the last inherited seq (inclusive); defaults to the last event, or to
                the last closed turn's `turn/end` while the final turn is open.
            child_id: the child id; a UUID4 is minted when None.

        Returns:
            The child id.

        Raises:
            SessionForkError: `SESSION_ALREADY_EXISTS`, `SESSION_NOT_FOUND`,
                `INVALID_BOUNDARY` or `OPEN_TURN`.
            SessionLockedError: if `boundary` lies inside the open final turn while a writer
                (in any process) holds the source.
            UnpairedHistoryError: if the inherited prefix holds a step closed with calls
                unanswered.
            CorruptLogError: if the source log is damaged.
        """
        return fork_session(
            self.backend, self.open_writer, source_id, boundary=boundary, child_id=child_id
        )
