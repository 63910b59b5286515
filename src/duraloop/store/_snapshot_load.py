"""Loading a session through its snapshot: the fast path of `SessionStore.prepare`.

See docs/store.md#snapshots.

Under the session's lock, the backend verifies the snapshot against the log as read now and
decodes only the tail after its covered prefix; the tail is judged as a whole-log load
judges it (`log.validate_after_checkpoint`), repaired the same way (torn tail cut, closers
appended durably), and the session is restored from the checkpoint. Any doubt sends the load
to the whole-log path, which gives every verdict and message: a snapshot that cannot be used
(reported, with why), a tail with damage, legacy shapes or unanswered history.
"""

from __future__ import annotations

import logging

from duraloop.errors import CorruptLogError, SessionFormatUnsupportedError
from duraloop.log import Event, LazyEvents, Session, readable_events, validate_after_checkpoint

from ._backend import StorageBackend
from ._files import collector_paused
from ._loaded import LoadedSession, RepairReport
from ._snapshot import SnapshotIgnoredError
from ._validation import readable

logger = logging.getLogger(__name__)


def load_with_snapshot(
    backend: StorageBackend, session_id: str
) -> tuple[LoadedSession, Session] | str:
    """Load and repair a session through its snapshot, or say why the log must be read alone.

    The caller holds the session's lock.

    Args:
        backend: the store's backend.
        session_id: the session.

    Returns:
        The load and the restored session (as `SessionStore.prepare`), or the `snapshot`
        value for the whole-log load's `LoadedSession`: `"none"`, or `"ignored: <why>"`.

    Raises:
        StoreError: if the repair cannot be written.
    """
    try:
        with collector_paused():  # the checkpoint's messages are many acyclic containers
            read = backend.read_snapshot(session_id)
        if read is None:
            return "none"
        stored = read.stored
        tail = readable(stored)
    except SnapshotIgnoredError as exc:
        logger.warning("session %s: snapshot ignored: %s; reading the whole log", session_id, exc)
        return f"ignored: {exc}"
    except (CorruptLogError, SessionFormatUnsupportedError) as exc:
        logger.debug(
            "session %s: the tail after the snapshot needs the full read: %s", session_id, exc
        )
        return "none"
    header = stored.header
    if tail is not stored.events:
        return "none"  # legacy shapes in the tail: the whole-log import numbers them

    def load_prefix() -> list[Event]:
        return readable_events(read.load_prefix(), session_id=header.id, path=stored.path)

    checkpoint = read.checkpoint
    report, session = validate_after_checkpoint(
        header.id, checkpoint, tail, load_prefix=load_prefix, header=header
    )
    if report.problems or session is None:
        return "none"  # the whole-log load names the problem
    end = checkpoint.count + len(tail)
    closers = list(session.events[end : end + report.closers_needed])
    torn_copy = None
    if stored.torn is not None or closers:
        torn_copy = backend.repair(session_id, stored.torn, stored.recovered() + closers).torn_copy
    if closers:
        logger.warning(
            "session %s: closed interrupted turn with %d closers", session_id, len(closers)
        )
    events = session.events
    if not isinstance(events, LazyEvents):  # pragma: no cover - restore always makes one
        raise TypeError("a restored session holds LazyEvents")
    repair = RepairReport(stored.torn_bytes, closers, stored.cut, torn_copy)
    loaded = LoadedSession(header, events.truncated(end + len(closers)), repair, "used")
    return loaded, session
