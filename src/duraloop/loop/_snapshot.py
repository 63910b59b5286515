"""The loop's part of a snapshot: what it folds from the log, written between turns.

See docs/store.md#snapshots.

A snapshot holds the session's derived state (`log.SessionCheckpoint`) and the loop's own
fold of the same events (`LoopFold`): the last turn number, the latest request header and
context, and the pending inbox. A loop over a session restored from a snapshot starts from
that fold and replays only the events after it (`restored_fold`); a loop writes one after a
turn closes once `LoopConfig.snapshot_every` events have been appended since the last one,
and when it closes between turns with anything new (`Snapshots`). A snapshot that cannot be
written is logged and skipped: it is a cache, and the log is already durable.

With it goes the model's encoded form of the derived messages when the model can give one
(`PrefixEncoding`: the Chat Completions adapters), so the first request after a resume is
not converted message by message (`log.EncodedPrefix`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import msgspec

from ..errors import DuraloopError, PairingError
from ..log import (
    CompactionFold,
    EncodedPrefix,
    Message,
    PairingCheck,
    Session,
    SessionCheckpoint,
)

logger = logging.getLogger(__name__)


class LoopFold(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """The loop's fold of a snapshot's covered events.

    Args:
        last_turn: the number of the last turn started (0 if none).
        request_header: the latest `request/header`'s header, or None.
        request_context: the latest `request/context`'s data, or None.
        next_turn: the pending follow-ups (replayed splices after the header's seed length).
        next_step: the pending steering and context.
        usage: the session's usage fold (`log.UsageFold.to_json`); None in a snapshot
            written before budgets (the loop then folds the whole log when it needs it).
        approval_policy: the effective approval policy (None in a snapshot written before
            approvals: `"ask"`, unless an event after the snapshot sets one).
        compaction: the session's compaction fold (`log.CompactionFold.to_json`); None when
            the loop had not folded it (a resume then folds the log when compaction asks).
    """

    last_turn: int
    request_header: dict[str, Any] | None = None
    request_context: dict[str, Any] | None = None
    next_turn: list[dict[str, Any]] = msgspec.field(default_factory=list)
    next_step: list[dict[str, Any]] = msgspec.field(default_factory=list)
    usage: dict[str, Any] | None = None
    approval_policy: str | None = None
    compaction: dict[str, Any] | None = None


def compaction_fold_of(session: Session) -> CompactionFold:
    """Return the session's compaction fold: from its snapshot when it has one, else folded.

    The snapshot's fold is used only when it covers exactly the snapshot's events and
    surface (docs/store.md#snapshots: a cache is never trusted over the log); otherwise the
    whole log is folded (which decodes a restored prefix). The caller feeds it the rest.
    """
    restored = restored_fold(session)
    if restored is not None:
        checkpoint, fold = restored
        data = fold.compaction
        if data is not None:
            try:
                folded = CompactionFold.from_json(data, fold.request_header)
            except (KeyError, TypeError, ValueError) as exc:
                logger.warning("session %s: the snapshot's compaction fold: %s", session.id, exc)
            else:
                if folded.fed == checkpoint.count and folded.nodes == list(checkpoint.nodes):
                    return folded
    folded = CompactionFold()
    folded.feed(session.events)
    return folded


def restored_fold(session: Session) -> tuple[SessionCheckpoint, LoopFold] | None:
    """Return the checkpoint and loop fold a session was restored from, or None.

    None when the session was not restored from a snapshot, or its loop fold does not decode
    (logged: the loop then folds the whole log, which decodes its prefix).
    """
    checkpoint = session.restored_from
    if checkpoint is None:
        return None
    try:
        return checkpoint, msgspec.convert(checkpoint.loop, LoopFold)
    except msgspec.ValidationError as exc:
        logger.warning("session %s: the snapshot's loop fold is unusable: %s", session.id, exc)
        return None


@runtime_checkable
class SnapshotWriter(Protocol):
    """A durability that can take snapshots (`duraloop.store.SessionWriter` is one)."""

    def write_snapshot(
        self, loop: dict[str, Any] | None = None, *, encoded: Sequence[EncodedPrefix] = ()
    ) -> bool:
        """Store a snapshot of the flushed session, with the loop's fold; return if written."""


@runtime_checkable
class PrefixEncoding(Protocol):
    """A model that can encode derived messages for a snapshot (a Chat Completions adapter).

    A model without the method simply writes no encoded prefix (its next cold request after
    a resume converts every message, as without a snapshot).
    """

    def encoded_prefix(self, messages: Sequence[Message]) -> EncodedPrefix | None:
        """Return the model's encoded form of all of `messages` (checked), or None."""


class Snapshots:
    """When a loop writes snapshots, and what its fold holds.

    Args:
        session: the live session.
        every: write after a turn once this many events were appended since the last
            snapshot; None never writes.
    """

    def __init__(self, session: Session, every: int | None) -> None:
        self._session = session
        self._every = every
        restored = session.restored_from
        self._covered = restored.count if restored is not None else 0

    def due(self) -> bool:
        """Whether a closed turn should write one: `every` events appended since the last."""
        return self._every is not None and self._session.seq - self._covered >= self._every

    def pending(self) -> bool:
        """Whether events were appended since the last snapshot (and snapshots are on)."""
        return self._every is not None and self._session.seq > self._covered

    def write(
        self, writer: object, fold: LoopFold, pairing: PairingCheck, model: object = None
    ) -> None:
        """Write a snapshot now, if `writer` takes them and the messages pair.

        A write that fails is logged (the log is durable; only the next resume is slower).

        Args:
            writer: the loop's durability (a `SnapshotWriter`, or anything else: no write).
            fold: the loop's fold of the whole log.
            pairing: the loop's incremental pairing check (brought up to date here).
            model: the loop's model; a `PrefixEncoding` one adds its encoded prefix.
        """
        if not isinstance(writer, SnapshotWriter):
            return
        session = self._session
        try:
            pairing.check(session.messages, generation=session.surface.replace_generation)
        except PairingError as exc:
            logger.debug("session %s: no snapshot of an unpaired history: %s", session.id, exc)
            return
        encoded: list[EncodedPrefix] = []
        if isinstance(model, PrefixEncoding):
            prefix = model.encoded_prefix(session.messages)
            if prefix is not None:
                encoded.append(prefix)
        try:
            written = writer.write_snapshot(msgspec.to_builtins(fold), encoded=encoded)
        except (DuraloopError, OSError) as exc:
            # A cache: the log is durable, only the next resume reads more of it.
            logger.warning("session %s: the snapshot was not written: %s", session.id, exc)
            return
        if written:
            self._covered = session.seq
