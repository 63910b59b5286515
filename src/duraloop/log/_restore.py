"""Restoring a session from a snapshot checkpoint plus the events after it.

See docs/store.md#snapshots. `Session.restore` builds an empty session and hands it here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._checkpoint import SessionCheckpoint
from ._event import Event
from ._lazy_events import LazyEvents, PrefixLoader
from ._lazy_messages import restored_messages
from .vocabulary import END_SEED

if TYPE_CHECKING:
    from ._session import Session


def restore_session(
    session: Session,
    *,
    checkpoint: SessionCheckpoint,
    load_prefix: PrefixLoader,
    tail: Sequence[Event],
) -> None:
    """Make the new, empty `session` the one a checkpoint plus `tail` stand for.

    The same session as `Session(session_id, seed=prefix + tail)` with invariants checked,
    when the checkpoint is that prefix's (the store verified it against the log bytes): the
    tail is validated event by event as a seed is, and the prefix's events and derived
    messages are decoded only if something reads them (`LazyEvents`, `LazyMessages`, which
    also carries the checkpoint's encoded prefixes to a request encoder).

    Args:
        session: a session just constructed, without a seed.
        checkpoint: the derived state after the prefix (`Session.checkpoint()` wrote it).
        load_prefix: decodes the prefix's events when first read.
        tail: the events after the prefix (closers included), seq `checkpoint.count` on.

    Raises:
        EventRejectedError: if a tail event breaks a rule a seed's event would.

    The session then ends with the next lifecycle's `session/end-seed`.
    """
    count = checkpoint.count
    session._events = LazyEvents(count, load_prefix, {count - 1: checkpoint.last_event})
    session.restored_from = checkpoint
    session._surface.restore(checkpoint.nodes, checkpoint.replace_generation)
    session._messages = restored_messages(checkpoint)
    invariants = session._invariants
    if invariants is not None:
        invariants.last_seq = count - 1
        invariants.next_turn = checkpoint.next_turn
    session._load_seed(tail, start=count)
    if session._events[-1].type != END_SEED:
        session.append(END_SEED, {})
    session.first_live_seq = count + len(tail)
