"""One summary compaction: compaction-spec 7's transaction (docs/compaction.md#the-transaction).

`compaction/start` (the durable lock, flushed before anything is asked of a model), the
summary request, then `compaction/summary`, the checkpoint `user/message` replacing the span,
and `compaction/end`. Any failure before the replacement (the summarizer's, a summary that is
not smaller, a surface that changed meanwhile, a cancel) closes the bracket with
`compaction/end {error}` and leaves the surface unchanged; the failure propagates.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from ..errors import CompactionError
from ..llm import ToolSchema
from ..log import (
    CompactionFold,
    Message,
    Session,
    checkpoint_message,
    compaction_lifecycle,
    estimate_message,
    new_message_id,
    project,
)
from ..log.vocabulary import (
    COMPACTION_END,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    SURFACE_REPLACE,
    TRIGGER_MANUAL,
    USER_MESSAGE,
)
from ..tools import CancelSignal, TurnCancelled
from ._summarizer import Summarizer, SummaryRequest

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompactionResult:
    """What one compaction did.

    Args:
        trigger: `"pressure"`, `"context-overflow"` or `"manual"`.
        compaction_id: the summary transaction's id, or None when only the pruner ran.
        shadowed: how many surface nodes the checkpoint replaced (0: pruned only).
        shadowed_tokens: their estimated tokens.
        pruned: how many tool results the pruner shortened.
        tokens_before: the estimated request tokens before.
        tokens_after: the estimated request tokens after.
    """

    trigger: str
    compaction_id: str | None
    shadowed: int
    shadowed_tokens: int
    pruned: int
    tokens_before: int
    tokens_after: int


def check_lock(fold: CompactionFold) -> None:
    """Refuse to start a compaction while another holds the lock (compaction-spec 3.1).

    Raises:
        CompactionError: code `busy`, naming the open `compaction/start`.
    """
    bracket = fold.bracket
    if bracket is not None:
        raise CompactionError(
            "compaction already in progress; the session compaction lock is already "
            f"active (compaction {bracket.compaction_id} at seq {bracket.start_seq})",
            code="busy",
        )


class Transaction:
    """Runs summary compactions of one session.

    Args:
        session: the live session.
        fold: returns the session's compaction fold, fed to the last event.
        flush: makes the log durable.
        summarizer: writes the summaries.
        max_tokens: the summary request's output cap.
    """

    def __init__(
        self,
        session: Session,
        fold: Callable[[], CompactionFold],
        flush: Callable[[], None],
        summarizer: Summarizer,
        max_tokens: int,
    ) -> None:
        self.session = session
        self._fold = fold
        self._flush = flush
        self._summarizer = summarizer
        self._max_tokens = max_tokens

    async def run(
        self,
        count: int,
        trigger: str,
        *,
        turn: int | None,
        source_command_id: str | None,
        signal: CancelSignal,
        before: int,
    ) -> CompactionResult:
        """Summarize `fold.nodes[:count]` and replace them by a checkpoint (compaction-spec 7).

        Raises:
            TurnCancelled: at once, before anything is written, if `signal` is already
                cancelled (C42); else as the transaction fails.
        """
        signal.throw_if_aborted()
        session, fold = self.session, self._fold()
        check_lock(fold)
        nodes, prices = list(fold.nodes[:count]), list(fold.prices[:count])
        surface = (list(fold.nodes), list(fold.prices))
        shadowed_tokens = sum(prices)
        compaction_id = new_message_id()
        lifecycle = compaction_lifecycle(compaction_id, turn, source_command_id)
        start = session.append(COMPACTION_START, lifecycle)
        try:
            self._flush()
            summary = await self._summarize(nodes, signal)
            checkpoint = checkpoint_message(
                summary.summary, compaction_id=compaction_id, source_command_id=source_command_id
            )
            framed = estimate_message(checkpoint)
            if framed >= shadowed_tokens:
                raise CompactionError(
                    f"summary is not smaller than the shadowed content ({framed} estimated "
                    f"framed tokens >= {shadowed_tokens})",
                    code="summary",
                )
            self._check_stable(trigger, surface, nodes, prices)
            data = _summary_data(lifecycle, summary, nodes, shadowed_tokens)
            recorded = session.append(COMPACTION_SUMMARY, data)
            session.append(
                USER_MESSAGE,
                checkpoint,
                surface_op={"op": SURFACE_REPLACE, "start": nodes[0], "end": nodes[-1]},
                source_event_seqs=[start.seq, recorded.seq, *nodes],
            )
        except BaseException as exc:
            self._close_failed(lifecycle, exc)
            raise
        session.append(COMPACTION_END, lifecycle)
        return CompactionResult(
            trigger, compaction_id, len(nodes), shadowed_tokens, 0, before, self._fold().tokens()
        )

    async def _summarize(self, nodes: Sequence[int], signal: CancelSignal) -> Any:
        events = self.session.events
        messages: list[Message] = []
        for seq in nodes:
            message = project(events[seq])
            if message is not None:
                messages.append(message)
        header = self._fold().header or {}
        system = header.get("system")
        tools = [ToolSchema(**tool) for tool in header.get("tools") or ()]
        request = SummaryRequest(
            messages=messages,
            system=system if isinstance(system, str) and system else None,
            tools=tools,
            max_tokens=self._max_tokens,
            session_id=self.session.id,
        )
        with anyio.CancelScope() as scope:
            remove = signal.add_listener(lambda _reason: scope.cancel())
            try:
                summary = await self._summarizer(request)
            finally:
                remove()
        signal.throw_if_aborted()
        if scope.cancelled_caught:  # pragma: no cover - only the signal cancels this scope
            raise CompactionError("manual compaction was cancelled", code="cancelled")
        return summary

    def _check_stable(
        self,
        trigger: str,
        surface: tuple[list[int], list[int]],
        nodes: list[int],
        prices: list[int],
    ) -> None:
        fold = self._fold()
        if trigger == TRIGGER_MANUAL:
            if fold.nodes[: len(nodes)] != nodes or fold.prices[: len(prices)] != prices:
                raise CompactionError(
                    "compaction: the selected span changed during summarization", code="changed"
                )
        elif (fold.nodes, fold.prices) != surface:
            raise CompactionError(
                "compaction: session surface changed during summarization", code="changed"
            )

    def _close_failed(self, lifecycle: dict[str, Any], exc: BaseException) -> None:
        """Append `compaction/end {error}` once; a failing append leaves the orphan start."""
        error = "cancelled" if not isinstance(exc, Exception) else _error_chain(exc)
        if isinstance(exc, TurnCancelled):
            error = "cancelled"
        try:
            self.session.append(COMPACTION_END, {**lifecycle, "error": error})
        except Exception:
            logger.exception("session %s: closing a failed compaction failed", self.session.id)


def _summary_data(
    lifecycle: dict[str, Any], summary: Any, nodes: list[int], shadowed_tokens: int
) -> dict[str, Any]:
    """`compaction/summary`'s data, in dsh's key order (compaction-spec 2.2)."""
    data: dict[str, Any] = {"compactionId": lifecycle["compactionId"]}
    if "sourceCommandId" in lifecycle:
        data["sourceCommandId"] = lifecycle["sourceCommandId"]
    data["summary"] = summary.summary
    if summary.raw_output is not None:
        data["rawOutput"] = summary.raw_output
    if summary.llm_stream_call:
        data["llmStreamCall"] = True
    data["shadowedRange"] = {"start": nodes[0], "end": nodes[-1]}
    data["shadowedSeqs"] = nodes
    data["shadowedTokenCount"] = shadowed_tokens
    data["provider"] = summary.provider
    data["model"] = summary.model
    if summary.max_tokens is not None:
        data["maxTokens"] = summary.max_tokens
    if summary.usage is not None:
        data["usage"] = summary.usage
    return data


def _error_chain(exc: BaseException) -> str:
    """Return dsh's `errorChain` text: the message (or type name), then each differing cause."""
    parts: list[str] = []
    seen: BaseException | None = exc
    while seen is not None and len(parts) < 8:
        text = str(seen) or type(seen).__name__
        if not parts or text != parts[-1]:
            parts.append(text)
        seen = seen.__cause__
    return ": ".join(parts)
