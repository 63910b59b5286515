"""What `SessionStore.load` returns: the balanced log and what its repair did."""

from __future__ import annotations

from dataclasses import dataclass, field

from duraloop.log import Event, SessionHeader


@dataclass(frozen=True, slots=True)
class RepairReport:
    """What a load repaired.

    Args:
        truncated_bytes: bytes cut from a torn tail (SQLite: rows), 0 if none.
        closers: the events appended to close an interrupted final turn.
    """

    truncated_bytes: int = 0
    closers: list[Event] = field(default_factory=list)

    @property
    def repaired(self) -> bool:
        """Whether anything was truncated or appended."""
        return bool(self.truncated_bytes or self.closers)


@dataclass(frozen=True, slots=True)
class LoadedSession:
    """A stored session, balanced: every turn closed (session-spec 4.3).

    Args:
        header: the stored header.
        events: the stored events plus closers, without a `session/end-seed` for this
            lifecycle; resume with `Session(header.id, seed=events, header=header)`.
        repair: what the load truncated and appended.
    """

    header: SessionHeader
    events: list[Event]
    repair: RepairReport
