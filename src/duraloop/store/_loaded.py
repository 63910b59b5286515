"""What `SessionStore.load` returns: the balanced log and what its repair did."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from duraloop.log import Event, SessionHeader

from ._tail import TornTail


@dataclass(frozen=True, slots=True)
class RepairReport:
    """What a load repaired.

    Args:
        truncated_bytes: bytes cut from a torn tail (SQLite: rows), 0 if none.
        closers: the events appended to close an interrupted final turn.
        cut: what the torn tail held: events by type, unreadable lines, the call ids of
            dropped `tool/call`s (None without a torn tail).
        torn_copy: where the load kept the bytes (SQLite: rows) it cut, `<log>.torn-<time>`
            beside the log; None when nothing was cut or nothing was written (`inspect`).
    """

    truncated_bytes: int = 0
    closers: list[Event] = field(default_factory=list)
    cut: TornTail | None = None
    torn_copy: str | None = None

    @property
    def cut_text(self) -> str:
        """Return `"; it held <what>; kept in <copy>"` for a torn tail, else `""` (D12).

        The CLI prints it after "truncated a torn tail of N bytes".
        """
        text = f"; it held {self.cut.describe()}" if self.cut is not None else ""
        return text + (f"; kept in {self.torn_copy}" if self.torn_copy is not None else "")

    @property
    def repaired(self) -> bool:
        """Whether anything was truncated or appended."""
        return bool(self.truncated_bytes or self.closers)


@dataclass(frozen=True, slots=True)
class LoadedSession:
    """A stored session, balanced: every turn closed (docs/recovery.md#when-repair-runs).

    Args:
        header: the stored header.
        events: the stored events plus closers, without a `session/end-seed` for this
            lifecycle; resume with `Session(header.id, seed=events, header=header)`. After
            a load through a snapshot it is a `LazyEvents` (the covered prefix is decoded
            when first read).
        repair: what the load truncated and appended.
        snapshot: how the load used the session's snapshot (docs/store.md#snapshots):
            `"none"` (there is none, or the load does not read snapshots), `"used"`, or
            `"ignored: <why>"` (damaged or stale; the log was read alone).
    """

    header: SessionHeader
    events: Sequence[Event]
    repair: RepairReport
    snapshot: str = "none"
