"""The Session: an append-only, event-sourced log with its surface and derived messages.

Appends are synchronous: snapshot and check the data (lossless JSON), check the envelope,
surface and relational invariants, run veto validators, commit, then notify observers (each
observer's failure is contained and logged). An append from inside an observer is refused.
Derived messages are maintained incrementally on append, so building the next request costs
nothing proportional to the history; only a surface `replace` triggers a rebuild.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import EventRejectedError
from ._checkpoint import EncodedPrefix, SessionCheckpoint
from ._event import Event, check_envelope, now_ms
from ._header import SessionHeader
from ._invariants import InvariantChecker
from ._json import MAX_SAFE_INTEGER, JsonValue, check_lossless, lossless_copy
from ._lazy_events import LazyEvents, PrefixLoader
from ._lazy_messages import LazyMessages, checkpoint_messages
from ._messages import Message
from ._messages import project as project  # looked up here per call: tests count projections
from ._restore import restore_session
from ._surface import Surface
from ._validate import check_message_shape, check_vocabulary
from .vocabulary import ASSISTANT_CHUNK, END_SEED

logger = logging.getLogger(__name__)

Observer = Callable[[Event], None]
"""Called after each commit with the committed event. Must not append."""

Validator = Callable[[Event], None]
"""Called before each commit; raising vetoes the append (nothing is committed)."""


class Session:
    """One conversation's append-only log.

    Args:
        session_id: the session id.
        seed: events to start from (resume, fork, replay). Each is validated; unless the
            seed already ends with `session/end-seed`, one is appended
            (docs/log.md#seeds-and-end-seed). None starts a fresh, empty session.
        header: the session metadata; synthesized as `{version 0, id, createdAt now}`.
        check_invariants: enforce docs/log.md#invariants on the seed and on every append.
        clock: returns epoch milliseconds for new events.

    Raises:
        EventRejectedError: if the seed breaks an envelope, JSON, message-shape, surface or
            (with `check_invariants`) relational rule; the message names the seq.
    """

    paired_messages: tuple[int, int] | None = None
    """`(messages, replace generation)` a load's judge found paired (`log.validate_log`), so
    the loop's incremental pairing check starts after them; None when nothing was judged."""

    def __init__(
        self,
        session_id: str,
        *,
        seed: Sequence[Event] | None = None,
        header: SessionHeader | None = None,
        check_invariants: bool = True,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.id = session_id
        self.header = header or SessionHeader(id=session_id, created_at=clock())
        self._clock = clock
        self._events: list[Event] | LazyEvents = []
        self.restored_from: SessionCheckpoint | None = None
        """The snapshot checkpoint this session was restored from (`restore`), else None."""
        self._surface = Surface()
        self._messages: list[Message] | LazyMessages = []
        self._generation = 0
        self._invariants = InvariantChecker() if check_invariants else None
        self._validators: list[Validator] = []
        self._observers: list[Observer] = []
        self._notifying = False
        self._latest: dict[str, int] = {}
        if seed is not None:
            self._load_seed(seed)
            if not self._events or self._events[-1].type != END_SEED:
                self.append(END_SEED, {})
        self.first_live_seq = len(seed) if seed is not None else 0

    @classmethod
    def restore(
        cls,
        session_id: str,
        *,
        checkpoint: SessionCheckpoint,
        load_prefix: PrefixLoader,
        tail: Sequence[Event],
        header: SessionHeader | None = None,
        clock: Callable[[], int] = now_ms,
    ) -> Session:
        """Rebuild a seeded session from a snapshot checkpoint plus the events after it.

        See `restore_session` (the arguments, the result and the errors are its).
        """
        session = cls(session_id, header=header, clock=clock)
        restore_session(session, checkpoint=checkpoint, load_prefix=load_prefix, tail=tail)
        return session

    def checkpoint(
        self, loop: dict[str, Any] | None = None, *, encoded: Sequence[EncodedPrefix] = ()
    ) -> SessionCheckpoint | None:
        """Return the derived state of the whole log, or None when no snapshot may be taken.

        A checkpoint is taken only at a clean point: invariants are checked, no turn and no
        compaction is open, and the log is not empty. See docs/store.md#snapshots.

        Args:
            loop: the loop's own fold to store with it (JSON; `{}` when None).
            encoded: a model adapter's encoded forms of the messages (`checkpoint_messages`).
        """
        invariants = self._invariants
        if invariants is None or invariants.open_turn is not None or not self._events:
            return None
        if invariants.compaction.open is not None:
            return None
        raw, kept = checkpoint_messages(self._messages, encoded)
        return SessionCheckpoint(
            count=len(self._events),
            nodes=list(self._surface.nodes),
            replace_generation=self._surface.replace_generation,
            message_count=len(self._messages),
            messages=raw,
            next_turn=invariants.next_turn,
            last_event=self._events[-1],
            loop=loop or {},
            encoded=kept,
        )

    @property
    def events(self) -> Sequence[Event]:
        """The whole log in seq order (a read-only view; do not mutate)."""
        return self._events

    @property
    def seq(self) -> int:
        """The seq the next appended event will get (the log's length)."""
        return len(self._events)

    @property
    def surface(self) -> Surface:
        """The surface fold (model-visible node seqs)."""
        return self._surface

    def append(
        self,
        type: str,
        data: JsonValue,
        *,
        surface_op: str | dict[str, Any] | None = None,
        source_event_seqs: Sequence[int] | None = None,
        copy: bool = True,
    ) -> Event:
        """Validate and commit one event, then notify observers.

        Args:
            type: the event type, e.g. `tool/call`.
            data: the JSON payload; it is copied, so later changes by the caller are ignored.
            surface_op: `"append"` or a replace dict; required on surface types only.
            source_event_seqs: seqs of earlier events this surface event cites.
            copy: False hands `data` over without a copy (it is still checked); the caller
                must never mutate it afterwards. duraloop's loop passes False for events it
                builds itself.

        Returns:
            The committed event.

        Raises:
            EventRejectedError: if the data is not lossless JSON, its payload shape is one a
                load would refuse, a surface or relational rule is broken, or it is called
                from inside an observer.
            Exception: whatever a validator raises to veto the append, unchanged.
        """
        if self._notifying:
            raise EventRejectedError(
                f're-entrant append of "{type}" from a session observer is not allowed'
            )
        if copy:
            copied = lossless_copy(data, what=f'session event "{type}"')
        else:
            check_lossless(data, what=f'session event "{type}"')
            copied = data
        return self._append_checked(type, copied, surface_op, source_event_seqs)

    def append_lossless(
        self,
        type: str,
        data: JsonValue,
        *,
        surface_op: str | None = None,
        source_event_seqs: Sequence[int] | None = None,
    ) -> Event:
        """Commit an event whose `data` is lossless JSON by construction: `append` less one check.

        For payloads the caller built itself from values already known to be lossless JSON
        (duraloop's scheduler: its `tool/call` and `tool/result` events, after checking the
        parts that came from elsewhere, docs/scheduler.md#results). It skips only the walk
        that `append(copy=False)` makes to check that `data` is lossless JSON; every other
        check (vocabulary, surface, invariants, payload shape, validators) runs as in
        `append`. Anything not built that way must go through `append`, which refuses it.

        Args:
            type: the event type.
            data: the payload, handed over without a copy: never mutate it afterwards.
            surface_op: `"append"` or None.
            source_event_seqs: seqs of earlier events this surface event cites.

        Returns:
            The committed event.

        Raises:
            EventRejectedError: as `append` does for every rule but the lossless-JSON one.
            Exception: whatever a validator raises to veto the append, unchanged.
        """
        if self._notifying:
            raise EventRejectedError(
                f're-entrant append of "{type}" from a session observer is not allowed'
            )
        return self._append_checked(type, data, surface_op, source_event_seqs)

    def _append_checked(
        self,
        type: str,
        copied: JsonValue,
        surface_op: str | dict[str, Any] | None,
        source_event_seqs: Sequence[int] | None,
    ) -> Event:
        # A str is a Sequence too: keep it as it is so the surface check rejects it as "must
        # be an array" instead of splitting it into characters.
        sources: Any = (
            source_event_seqs
            if source_event_seqs is None or isinstance(source_event_seqs, str | bytes)
            else list(source_event_seqs)
        )
        op = surface_op
        if op is not None and op != "append":
            op = lossless_copy(surface_op, what=f'surfaceOp of "{type}"')
        event = Event(type, len(self._events), self._clock(), copied, sources, op)
        check_vocabulary(event)
        self._commit(event, run_validators=True)
        return event

    def observe(self, observer: Observer) -> Callable[[], None]:
        """Call `observer(event)` after every commit.

        Returns:
            A function that removes the observer.
        """
        self._observers.append(observer)
        return lambda: self._observers.remove(observer) if observer in self._observers else None

    def add_validator(self, validator: Validator) -> Callable[[], None]:
        """Run `validator(event)` before every commit; an exception vetoes the append.

        Returns:
            A function that removes the validator.
        """
        self._validators.append(validator)
        return lambda: self._validators.remove(validator) if validator in self._validators else None

    def derive_messages(self) -> list[Message]:
        """Return the model history: the surface's messages in order.

        See docs/log.md#surface-and-derived-messages (`request_history` for a request).

        Returns:
            A fresh list of the (shared, treat-as-immutable) message dicts.
        """
        return list(self._messages)

    def request_history(self) -> Sequence[Message]:
        """Return the derived messages for a model request, without decoding a restored prefix.

        The same messages, in a sequence later appends do not change: a fresh list, or a
        restored session's `LazyMessages` copy (docs/store.md#snapshots).
        """
        messages = self._messages
        return messages.copy() if isinstance(messages, LazyMessages) else list(messages)

    @property
    def messages(self) -> Sequence[Message]:
        """The derived messages as a live read-only view (no copy; do not mutate)."""
        return self._messages

    def _load_seed(self, seed: Sequence[Event], *, start: int = 0) -> None:
        # The compaction invariants look ahead in the seed for the end-seed that makes an
        # inherited bracket stale (docs/log.md#invariants); a refused seed drops the session.
        invariants = self._invariants
        if invariants is not None:
            invariants.compaction.begin_seed(seed, start)
        self._load_events(seed, start)
        if invariants is not None:
            invariants.compaction.end_seed()

    def _load_events(self, seed: Sequence[Event], start: int) -> None:
        append = self._events.append
        invariants = self._invariants
        # The open turn and step only change on the general path: kept in locals for the
        # fast path, as is the last seq (set on the checker before it sees another event).
        open_turn = open_step = None
        if invariants is not None:
            open_turn, open_step = invariants.open_turn, invariants.open_step
        chunks = False
        index = start - 1
        for index, event in enumerate(seed, start):
            # Fast path for the commonest event, a stream chunk of the open step: the same
            # checks as the general path below (envelope, no surface fields, names the open
            # turn and step), inlined. Anything unusual takes the general path.
            if (
                event.type == ASSISTANT_CHUNK
                and open_step is not None
                and event.seq == index
                and type(event.time) is int
                and -MAX_SAFE_INTEGER <= event.time <= MAX_SAFE_INTEGER
                and event.surface_op is None
                and event.source_event_seqs is None
                and type(data := event.data) is dict
                and data.get("step") == open_step
                and data.get("turn") == open_turn
            ):
                append(event)
                chunks = True
                continue
            if chunks and invariants is not None:
                invariants.last_seq = index - 1  # the fast path's last chunk
                chunks = False
            if event.seq != index:
                raise EventRejectedError(
                    f"seed must be contiguous from 0: event at index {index} has seq {event.seq}"
                )
            check_envelope(event)
            check_vocabulary(event)
            check_message_shape(event)
            self._commit(event, run_validators=False)
            if invariants is not None:
                open_turn, open_step = invariants.open_turn, invariants.open_step
        if chunks and invariants is not None:
            invariants.last_seq = index

    def _commit(self, event: Event, *, run_validators: bool) -> None:
        plan = self._surface.plan(event, self._events)
        if self._invariants is not None:
            self._invariants.check(event)
        if run_validators:
            # A live append gets the shape check a load runs (after the surface and relational
            # rules, whose messages the spec's cases pin): nothing a load refuses is written.
            check_message_shape(event)
            for validator in list(self._validators):
                validator(event)
        self._events.append(event)
        self._latest[event.type] = event.seq
        if self._invariants is not None:
            self._invariants.commit(event)
        if plan is not None:
            self._surface.apply(plan)
            if plan.start_index is None:
                message = project(event)
                if message is not None:
                    self._messages.append(message)
            else:
                self._rebuild_messages()
        if self._observers:
            self._notify(event)

    def _rebuild_messages(self) -> None:
        events = self._events
        projected = (project(events[seq]) for seq in self._surface.nodes)
        self._messages = [message for message in projected if message is not None]

    def _notify(self, event: Event) -> None:
        self._notifying = True
        try:
            for observer in list(self._observers):
                try:
                    observer(event)
                except Exception:
                    logger.exception("session %s observer failed on seq %d", self.id, event.seq)
        finally:
            self._notifying = False

    def latest_seq(self, kind: str) -> int | None:
        """Return the seq of the latest event of type `kind` this session validated, or None.

        Every seeded and appended event counts, except stream chunks (`assistant/chunk`: the
        seed's fast path keeps no index; not to be asked for); a session restored from a
        snapshot knows only the events after it (`restored_from`). Readers of the whole log
        (the loop's resume) ask this instead of walking it.
        """
        return self._latest.get(kind)
