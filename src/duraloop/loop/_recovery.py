"""Live step recovery: answer unanswered calls before a failed step closes.

See docs/loop.md#unanswered-tool-results.

A step-local observer feeds the shared `PendingToolCalls` tracker (the same one crash repair
uses) from committed events, so recovery never rescans the log. On failure the driver takes
a snapshot of the pending calls, then appends one recovery result per call, in call order,
with the shared `unanswered_tool_result` constructor.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Callable, Sequence

from ..log import Event, PendingToolCalls, Session, unanswered_tool_result
from ..log.vocabulary import SURFACE_APPEND, TOOL_RESULT

logger = logging.getLogger(__name__)


class StepRecovery:
    """Track one step's unanswered tool calls and answer them if the step fails.

    Use as a context manager around the step, entered before `step/start` is appended and
    exited after `step/end`.

    A recorded `tool/call` that never became durable proves its body never ran (Law 5: a
    body runs only once its `tool/call` is durable), so when the loop writes a store and a
    flush failed, such a call is answered `TOOL_NOT_STARTED`, not `TOOL_OUTCOME_UNKNOWN`
    (D14: a `tool/call` whose durable append failed was shown as "outcome unknown").

    Args:
        session: the live session.
        turn: the open turn.
        durable_through: returns the last seq known durable, or None when nothing is
            persisted (then every recorded `tool/call` counts as recorded).
        replay: events of the step already in the log (a paused step continued in a later
            loop, docs/approvals.md#pausing), fed to the tracker first.
    """

    def __init__(
        self,
        session: Session,
        *,
        turn: int,
        durable_through: Callable[[], int] | None = None,
        replay: Sequence[Event] = (),
    ) -> None:
        self._session = session
        self._turn = turn
        self._durable_through = durable_through
        self._tracker = PendingToolCalls()
        for event in replay:
            self._tracker.observe(event)
        self._unsubscribe: Callable[[], None] | None = None
        self.failure: Exception | None = None

    def __enter__(self) -> StepRecovery:
        self._unsubscribe = self._session.observe(self._tracker.observe)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def record_recovery_results(self) -> int:
        """Append a recovery `tool/result` for each unanswered call, in call order.

        Stops at the first append that fails (later appends would break ordering), keeps
        that failure in `failure` and logs it; it never raises, so the step's original
        failure is what propagates (docs/recovery.md#limits-of-live-recovery).

        Returns:
            The number of recovery results appended.
        """
        pending = self._tracker.pending()  # snapshot first: each append feeds the tracker
        durable = self._durable_through() if self._durable_through is not None else None
        written: Counter[str] = Counter()
        for call in pending:
            if durable is not None and call.call_seq is not None and call.call_seq > durable:
                call = dataclasses.replace(call, call_seq=None)  # never durable: never ran
            result = unanswered_tool_result(call, turn=self._turn, seq=self._session.seq)
            try:
                self._session.append(
                    TOOL_RESULT,
                    result.data,
                    surface_op=SURFACE_APPEND,
                    source_event_seqs=result.source_event_seqs,
                    copy=False,
                )
            except Exception as exc:  # noqa: BLE001 - kept; the step's original failure propagates
                self.failure = exc
                logger.warning(
                    "session %s: recovery result for call %s could not be appended (%s); "
                    "%d call(s) stay unanswered",
                    self._session.id,
                    call.call_id,
                    exc,
                    len(pending) - sum(written.values()),
                )
                break
            written[result.data["error"]["code"]] += 1
        if written:
            logger.warning(
                "session %s turn %d: step failed with unanswered tool calls; recorded %s",
                self._session.id,
                self._turn,
                ", ".join(f"{count} {code}" for code, count in sorted(written.items())),
            )
        return sum(written.values())
