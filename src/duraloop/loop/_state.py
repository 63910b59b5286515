"""What a turn works with: the loop's mutable state and the frozen things it depends on.

`AgentLoop` owns both and hands them to each `Turn`, which hands them to each `Step`, so
neither reads the loop itself: `LoopState` is what turns carry from one to the next (the
last turn number, the request bookkeeping, the incremental pairing check), `TurnDeps` the
collaborators a turn uses and never replaces, `StepSettings` what its steps share.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..llm import Model, ToolSchema
from ..log import Event, PairingCheck, Session, last_turn_and_latest, policy_of
from ..log.vocabulary import (
    APPROVAL_POLICY,
    POLICY_ASK,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    TURN_START,
)
from ..tools import Approver, CancelSignal, ToolPipeline, ToolRegistry, ToolWorkers
from ._budget import SessionUsage
from ._compaction import Compactor
from ._config import LoopConfig
from ._durability import LogDurability
from ._hooks import LoopHooks, Steering
from ._inbox import Inbox
from ._request import RequestState
from ._snapshot import LoopFold, restored_fold

_REQUEST_KINDS = (REQUEST_HEADER, REQUEST_CONTEXT, APPROVAL_POLICY)


@dataclass
class LoopState:
    """The mutable state a loop's turns share, replayed from the log when the loop is built.

    Args:
        last_turn: the number of the last turn started in the session (0 if none).
        request: what this loop instance has logged about its requests.
        pairing: the incremental provider pairing check run on each request's messages.
        approval_policy: the session's effective approval policy (the last
            `approval/policy` event's, else `"ask"`; docs/approvals.md#policy).
    """

    last_turn: int
    request: RequestState
    pairing: PairingCheck = field(default_factory=PairingCheck)
    approval_policy: str = POLICY_ASK

    def fold(
        self,
        inbox: Inbox,
        usage: dict[str, Any] | None,
        compaction: dict[str, Any] | None = None,
    ) -> LoopFold:
        """Return the loop's fold for a snapshot: this state, the inbox, usage, compaction."""
        return LoopFold(
            last_turn=self.last_turn,
            request_header=self.request.header,
            request_context=self.request.context,
            next_turn=list(inbox.next_turn),  # type: ignore[arg-type]
            next_step=list(inbox.next_step),  # type: ignore[arg-type]
            usage=usage,
            approval_policy=self.approval_policy,
            compaction=compaction,
        )

    def record_policy(self, session: Session, policy: str | None) -> None:
        """Append `approval/policy` when `policy` differs from the session's.

        dsh writes a knob event only when the effective value changes
        (docs/approvals.md#policy).

        Args:
            session: the live session.
            policy: the configured policy, or None to keep the session's.
        """
        if policy is not None and policy != self.approval_policy:
            session.append(APPROVAL_POLICY, {"policy": policy})
            self.approval_policy = policy

    @classmethod
    def of_log(cls, session: Session) -> LoopState:
        """Return the state a loop over `session` starts with (its log read backwards once).

        A session restored from a snapshot reads only the events after it, then the
        snapshot's fold (docs/store.md#snapshots).
        """
        restored = restored_fold(session)
        if restored is None:
            last_turn, latest = _last_turn_and_latest(session)
            header = _header(latest)
            context = _context(latest)
            state = cls(
                last_turn=last_turn,
                request=RequestState(header=header, context=context),
                approval_policy=_policy(latest, POLICY_ASK),
            )
            if session.paired_messages is not None:  # the load's judge paired them all
                state.pairing = PairingCheck.resumed(*session.paired_messages)
            return state
        checkpoint, fold = restored
        last_turn, latest = last_turn_and_latest(session.events[checkpoint.count :], _REQUEST_KINDS)
        header = _header(latest) if REQUEST_HEADER in latest else fold.request_header
        context = _context(latest) if REQUEST_CONTEXT in latest else fold.request_context
        return cls(
            last_turn=last_turn or fold.last_turn,
            request=RequestState(header=header, context=context),
            pairing=PairingCheck.resumed(checkpoint.message_count, checkpoint.replace_generation),
            approval_policy=_policy(latest, fold.approval_policy or POLICY_ASK),
        )


@dataclass(frozen=True)
class TurnDeps:
    """The things a turn and its steps depend on; the loop builds them when a turn opens.

    Args:
        session: the live session.
        model: the model to request.
        registry: the tools the model may call.
        pipeline: prepares, dispatches and finalizes each tool call.
        config: the loop's options.
        hooks: the loop-level hooks.
        inbox: the pending user messages.
        workspace: the directory tools are confined to (in the default system prompt).
        durability: makes the log durable at the step's boundaries.
        steering: what hooks may do to the loop (`StepContext.loop`).
        session_usage: the session's usage, for its budget (docs/loop.md#budgets).
        approver: answers approval asks in this process; None pauses the turn on each
            (docs/approvals.md).
        compaction: compacts the session before steps and after a context overflow
            (docs/compaction.md); None: never.
    """

    session: Session
    model: Model
    registry: ToolRegistry
    pipeline: ToolPipeline
    config: LoopConfig
    hooks: LoopHooks
    inbox: Inbox
    workspace: Path
    durability: LogDurability
    steering: Steering
    session_usage: SessionUsage
    approver: Approver | None = None
    compaction: Compactor | None = None


@dataclass(frozen=True)
class StepSettings:
    """Inputs of a step that stay fixed for the turn.

    Args:
        turn: the open turn.
        signal: the turn's cancellation signal.
        system: the system prompt ("" for none).
        tools: the tool schemas sent with each request.
        jitter: the uniform `[0, 1)` source of the retry backoff's jitter.
        workers: the turn's tool workers (docs/scheduler.md#running-a-group); None lets each
            step's scheduler open its own.
    """

    turn: int
    signal: CancelSignal
    system: str
    tools: Sequence[ToolSchema]
    jitter: Callable[[], float] = random.random
    workers: ToolWorkers | None = None


def _last_turn_and_latest(session: Session) -> tuple[int, dict[str, Event]]:
    """`last_turn_and_latest` of the whole log, from the session's index of latest seqs.

    A session not restored from a snapshot indexed every event it validated
    (`Session.latest_seq`); a last `turn/start` without a positive number sends the answer
    to the backward walk, which skips it as it always did.
    """
    events = session.events
    if session.restored_from is not None:  # pragma: no cover - the caller restores those
        return last_turn_and_latest(events, _REQUEST_KINDS)
    latest = {
        kind: events[seq]
        for kind in _REQUEST_KINDS
        if (seq := session.latest_seq(kind)) is not None
    }
    start = session.latest_seq(TURN_START)
    if start is None:
        return 0, latest
    turn = events[start].data.get("turn")
    if type(turn) is not int or turn < 1:
        return last_turn_and_latest(events, _REQUEST_KINDS)
    return turn, latest


def _header(latest: dict[str, Event]) -> dict[str, Any] | None:
    event = latest.get(REQUEST_HEADER)
    return None if event is None else event.data.get("header")


def _context(latest: dict[str, Event]) -> dict[str, Any] | None:
    event = latest.get(REQUEST_CONTEXT)
    return None if event is None else event.data


def _policy(latest: dict[str, Event], default: str) -> str:
    return policy_of(latest.get(APPROVAL_POLICY), default)
