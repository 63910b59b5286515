"""Compaction of one session: the transaction, and when it runs (docs/compaction.md).

`Compactor` is the loop's: it keeps the session's `CompactionFold` (the priced surface, the
request estimate, the lock) up to date and runs compactions:

- **pressure**, before a step, when the estimated request reaches the threshold share of
  the model's context window: prune old large tool results, then summarize the oldest span
  until the estimate is below it (compaction-spec 4.2);
- **overflow**, after a request failed with `CONTEXT_WINDOW_EXCEEDED`: the same with nothing
  but the newest indivisible unit (and the open step) kept; the step then retries once
  (compaction-spec 4.3);
- **manual**, between turns (`AgentLoop.compact`, `/compact`, `duraloop compact`).

A summary compaction is one transaction: `compaction/start` (the durable lock, flushed), the
summary request, then `compaction/summary`, the checkpoint `user/message` that replaces the
span, and `compaction/end`. Whatever fails before the replacement closes it with
`compaction/end {error}` and leaves the surface unchanged (compaction-spec 7).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import CompactionError, ConfigError
from ..llm import Model, context_window_of
from ..log import (
    CompactionFold,
    Session,
    balanced_cuts,
    check_region,
    estimate_message,
    is_checkpoint,
    protected_from,
    prune_session,
    select_range,
)
from ..log.vocabulary import TRIGGER_MANUAL, TRIGGER_OVERFLOW, TRIGGER_PRESSURE, USER_MESSAGE
from ..tools import CancelSignal, TurnCancelled
from ._compaction_config import CompactionConfig
from ._compaction_run import CompactionResult, Transaction, check_lock
from ._snapshot import compaction_fold_of
from ._summarizer import ModelSummarizer, Summarizer

logger = logging.getLogger(__name__)

_OFFLINE_ROUTES = frozenset({"scripted", "replay"})
"""Models that have no context window to know (scripted and replayed): no warning for them."""


class Compactor:
    """Runs the compactions of one loop's session.

    Args:
        session: the live session.
        model: the loop's model (whose context window the threshold is a share of).
        config: the compaction options.
        flush: makes the log durable (the lock is flushed before the summary request).
        summarizer: writes summaries; None uses `ModelSummarizer` over
            `config.summarizer_model` or `model`.
        fold: the fold a snapshot restored, or None to fold the log when first needed.
    """

    def __init__(
        self,
        session: Session,
        model: Model,
        config: CompactionConfig,
        *,
        flush: Callable[[], None],
        summarizer: Summarizer | None = None,
        fold: CompactionFold | None = None,
    ) -> None:
        self.session = session
        self.model = model
        self.config = config
        self.summarizer = summarizer or ModelSummarizer(config.summarizer_model or model)
        self._fold = fold
        self._warned: set[str] = set()
        self._transaction = Transaction(
            session, lambda: self.fold, flush, self.summarizer, config.max_tokens
        )

    @classmethod
    def of_loop(
        cls, session: Session, model: Model, config: Any, flush: Callable[[], None]
    ) -> Compactor | None:
        """Return the compactor of a loop with `config` (a `LoopConfig`), or None when off."""
        compaction = config.compaction
        if compaction is None:
            return None
        return cls(session, model, compaction, flush=flush, summarizer=compaction.summarizer)

    def fold_json(self) -> dict[str, Any] | None:
        """Return the fold for a snapshot (fed to the last event), or None if never folded."""
        return None if self._fold is None else self.fold.to_json()

    @property
    def fold(self) -> CompactionFold:
        """The session's compaction fold, fed up to the last committed event."""
        if self._fold is None:
            self._fold = compaction_fold_of(self.session)
        self._fold.feed(self.session.events)
        return self._fold

    def estimate(self) -> int:
        """Return the estimated tokens of the next request (docs/compaction.md#the-estimate)."""
        return self.fold.tokens()

    def window(self) -> int | None:
        """Return the model's context window in tokens, or None when none is known."""
        return context_window_of(self.model, self.config.context_windows)

    async def before_step(self, *, turn: int, signal: CancelSignal) -> CompactionResult | None:
        """Compact under pressure before a step (compaction-spec 4.2); never fails the step.

        Returns None below the threshold, without a known window (warned once per model),
        or before the first request of the session. A failed compaction is logged as a
        warning and the step goes on (an overflow is recovered from after the request).

        Raises:
            TurnCancelled: if the turn is cancelled meanwhile.
        """
        if not self.config.auto or signal.aborted:
            return None
        window = self.window()
        key = f"{self.model.provider}:{self.model.model}"
        if window is not None and self.fold.header is None:
            return None  # before the session's first request (C4)
        if window is None:
            self._warn_once(
                key,
                f"compaction: no context window known for {key}; automatic compaction before "
                "steps is off for it (set CompactionConfig.context_windows or "
                "[context_windows] in config.toml)",
            )
            return None
        try:
            threshold = self.config.threshold_tokens(window)
            retain = self.config.retain_tokens_for(window)
        except ConfigError as exc:
            self._warn_once(key, f"compaction: {exc}")
            return None
        try:
            return await self._relieve(
                TRIGGER_PRESSURE, turn=turn, threshold=threshold, retain=retain, signal=signal
            )
        except TurnCancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - dsh's rule: the step enters anyway, warned
            signal.throw_if_aborted()
            logger.warning("step compaction failed: %s; continuing the turn", exc)
            return None

    async def after_overflow(self, *, turn: int, step_start: int, signal: CancelSignal) -> bool:
        """Compact after `CONTEXT_WINDOW_EXCEEDED`; return whether the step should retry.

        Keeps the open step's messages and the newest indivisible unit; retries only when
        the surface changed (compaction-spec 4.3, C30-C33).

        Raises:
            TurnCancelled: if the turn is cancelled meanwhile.
        """
        if self.config.max_overflow_retries < 1 or signal.aborted:
            return False
        generation = self.session.surface.replace_generation
        try:
            await self._relieve(
                TRIGGER_OVERFLOW,
                turn=turn,
                threshold=0,
                retain=0,
                signal=signal,
                open_step_start=step_start,
            )
        except TurnCancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - the original request error is kept
            signal.throw_if_aborted()
            if self.session.surface.replace_generation > generation:
                return True  # a prune landed: the retry may fit
            logger.warning(
                "context overflow recovery failed: %s; preserving the original request error",
                exc,
            )
            return False
        signal.throw_if_aborted()
        return self.session.surface.replace_generation > generation

    async def compact_now(
        self, *, source_command_id: str | None = None, signal: CancelSignal | None = None
    ) -> CompactionResult | None:
        """Compact everything but the newest indivisible unit, between turns (manual).

        Returns:
            The result, or None when there is nothing to compact (nothing is written): no
            balanced cut leaves anything before the newest unit, or the only node it would
            compact is the previous checkpoint.

        Raises:
            CompactionError: `busy` when a turn is open or another compaction holds the
                lock; `summary`/`changed` when the transaction failed (closed with its error).
        """
        signal = signal or CancelSignal()
        return await self._relieve(
            TRIGGER_MANUAL,
            turn=None,
            threshold=0,
            retain=0,
            signal=signal,
            source_command_id=source_command_id,
            prune=False,
        )

    async def compact_region(
        self, start: int, end: int, *, turn: int | None, signal: CancelSignal | None = None
    ) -> CompactionResult:
        """Compact the explicit span of surface nodes `start..end` (their seqs).

        Raises:
            CompactionError: `range` if the span is not at the surface head or splits a
                call from its result; otherwise as `compact_now`.
        """
        fold = self.fold
        first, last = check_region(fold.nodes, self.session.events, start, end)
        if first != 0:
            raise CompactionError(
                f"compaction: start seq {start} is not the surface head ({fold.nodes[0]}); "
                "a checkpoint always replaces the oldest span",
                code="range",
            )
        before = fold.tokens()
        return await self._transaction.run(
            last + 1,
            TRIGGER_MANUAL if turn is None else TRIGGER_PRESSURE,
            turn=turn,
            source_command_id=None,
            signal=signal or CancelSignal(),
            before=before,
        )

    async def _relieve(
        self,
        trigger: str,
        *,
        turn: int | None,
        threshold: int,
        retain: int,
        signal: CancelSignal,
        open_step_start: int | None = None,
        source_command_id: str | None = None,
        prune: bool = True,
    ) -> CompactionResult | None:
        fold = self.fold
        before = fold.tokens()
        if trigger == TRIGGER_PRESSURE and before < threshold:
            return None
        check_lock(fold)
        keep_from = protected_from(
            fold.nodes,
            self.session.events,
            keep_turns=self.config.keep_turns,
            open_step_start=open_step_start,
        )
        pruned = 0
        pruner = self.config.pruner
        if prune and pruner is not None:
            protect = len(fold.nodes) - min(keep_from, _tail_start(fold.prices, retain))
            pruned = prune_session(self.session, pruner, protect=protect, estimate=estimate_message)
            if pruned and self.fold.tokens() < threshold:  # fed: the prunes count
                return self._result(trigger, None, 0, 0, pruned, before)
        result: CompactionResult | None = None
        attempts = self.config.compaction_retries + 1 if trigger == TRIGGER_PRESSURE else 1
        for _ in range(attempts):
            fold = self.fold  # fed with the prunes and the previous attempt's checkpoint
            keep_from = protected_from(
                fold.nodes,
                self.session.events,
                keep_turns=self.config.keep_turns,
                open_step_start=open_step_start,
            )
            count = select_range(
                fold.prices,
                balanced_cuts(fold.nodes, self.session.events),
                retain_tokens=retain,
                keep_from=keep_from,
            )
            if count is None or self._recompacts(count):
                break
            done = await self._transaction.run(
                count,
                trigger,
                turn=turn,
                source_command_id=source_command_id,
                signal=signal,
                before=before,
            )
            result = CompactionResult(
                trigger,
                done.compaction_id,
                done.shadowed,
                done.shadowed_tokens,
                pruned,
                before,
                done.tokens_after,
            )
            if trigger != TRIGGER_PRESSURE or self.fold.tokens() < threshold:
                return result
        if result is not None and trigger == TRIGGER_PRESSURE:
            raise CompactionError(
                f"compaction still above threshold after {attempts} compaction attempts "
                f"({self.fold.tokens()} estimated tokens >= threshold {threshold})",
                code="pressure",
            )
        return result or (self._result(trigger, None, 0, 0, pruned, before) if pruned else None)

    def _recompacts(self, count: int) -> bool:
        """Whether compacting `count` head nodes would only summarize the last checkpoint."""
        head = self.session.events[self.fold.nodes[0]]
        return count == 1 and head.type == USER_MESSAGE and is_checkpoint(head.data)

    def _result(
        self, trigger: str, cid: str | None, shadowed: int, tokens: int, pruned: int, before: int
    ) -> CompactionResult:
        return CompactionResult(trigger, cid, shadowed, tokens, pruned, before, self.fold.tokens())

    def _warn_once(self, key: str, message: str) -> None:
        """Log `message` once per model: a warning, or info for an offline test double."""
        if key not in self._warned:
            self._warned.add(key)
            offline = self.model.provider in _OFFLINE_ROUTES
            logger.log(logging.INFO if offline else logging.WARNING, "%s", message)


def _tail_start(prices: Sequence[int], retain: int) -> int:
    """The index of the first node of the tail worth `retain` tokens (at least the last one)."""
    kept = 0
    for index in range(len(prices) - 1, -1, -1):
        kept += prices[index]
        if kept >= retain:
            return index
    return 0
