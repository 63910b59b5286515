"""`AgentLoop.compact`: manual compaction between turns (docs/compaction.md#manual)."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import CompactionError, UsageError
from ..log import Session, open_turn_start
from ._compaction import Compactor
from ._compaction_run import CompactionResult
from ._driver import TurnDriver
from ._durability import GroupCommit


class CompactionMethods:
    """`AgentLoop`'s manual compaction; the loop provides the state."""

    session: Session
    _compaction: Compactor | None
    _driver: TurnDriver
    _durability: GroupCommit
    _check_open: Callable[[], None]

    @property
    def compaction(self) -> Compactor | None:
        """The loop's compactor (its estimate, window and fold), or None when compaction is off."""
        return self._compaction

    async def compact(self, *, source_command_id: str | None = None) -> CompactionResult | None:
        """Compact the session's history now, between turns, and make it durable.

        Everything but the newest indivisible unit (a message, or an assistant message with
        all its tool results) is summarized into one checkpoint, as a standalone
        compaction (`compaction/start {turn: null}`). While it runs no turn starts: waking
        sends are latched and run after it.

        Args:
            source_command_id: the `command/run` that asked for it (`/compact`), if any.

        Returns:
            What was compacted, or None when there is nothing to compact yet (nothing is
            written).

        Raises:
            UsageError: if the loop is closed, or compaction is off (`LoopConfig.compaction`
                is None).
            CompactionError: `busy` while a turn runs or is paused, or another compaction
                holds the session's lock; `summary` or `changed` when the compaction failed
                (its `compaction/end` records why; the history is unchanged).
        """
        self._check_open()
        compactor = self._compaction
        if compactor is None:
            raise UsageError(
                "compaction is off for this loop (LoopConfig.compaction is None); pass "
                "LoopConfig(compaction=CompactionConfig()) to compact"
            )
        if self._driver.signal is not None:
            raise CompactionError(
                "manual compaction requires an idle agent: a turn is running; await it or "
                "cancel it first",
                code="busy",
            )
        start = open_turn_start(self.session.events)
        if start is not None:
            raise CompactionError(
                f"session {self.session.id} already has an open turn (turn/start at seq "
                f"{start}, e.g. paused on an approval); continue or cancel it, then compact",
                code="busy",
            )
        async with self._driver.maintenance() as signal:
            try:
                return await compactor.compact_now(
                    source_command_id=source_command_id, signal=signal
                )
            finally:
                self._durability.flush()
