"""The context a tool body receives: workspace, cancellation signal and call identity."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..log import Message, idempotency_key, user_message
from ._blocking import DEFAULT_CANCEL_GRACE_SECONDS
from ._signal import CancelSignal


@dataclass
class ToolEffects:
    """What a body asked of the loop through its `ToolContext`.

    See docs/scheduler.md#pipeline-stages.
    """

    contexts: list[Message] = field(default_factory=list)
    concludes_turn: bool = False


@dataclass(frozen=True)
class ToolContext:
    """What one tool call knows about where and why it runs.

    A tool function receives it by declaring a parameter annotated `ToolContext`; that
    parameter is injected by the pipeline and never appears in the model-facing schema.

    Args:
        cwd: the session workspace, absolute and resolved; file tools are confined to it.
        signal: the turn's cancellation signal; long-running bodies watch it and settle
            themselves (cancellation is cooperative, docs/loop.md#vocabulary).
        call_id: the id of the tool-call block being answered.
        tool_name: the name the model called.
        session_id: the session the call belongs to.
        cancel_grace_seconds: how long, in seconds, a body that cannot be interrupted (a
            synchronous function in its thread, or a body that watches the signal) gets to
            settle after the signal fires before its call is answered without it
            (`LoopConfig.tool_cancel_grace_seconds`).
        idempotency_key: a stable key for this call, for APIs that accept idempotency keys
            (payments, cloud APIs): the same across retries of the step, a crash and resume,
            an explicit `--retry-unknown` re-run and in every process; a fork's own calls
            get keys of their own (docs/recovery.md#idempotency-keys). The pipeline fills
            it; left empty, it is derived from `session_id` and `call_id`.
    """

    cwd: Path
    signal: CancelSignal
    call_id: str
    tool_name: str
    session_id: str
    cancel_grace_seconds: float = DEFAULT_CANCEL_GRACE_SECONDS
    idempotency_key: str = ""
    effects: ToolEffects = field(default_factory=ToolEffects, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Derive the key when none was given (docs/recovery.md#idempotency-keys)."""
        if not self.idempotency_key:
            key = idempotency_key(self.session_id, self.call_id)
            object.__setattr__(self, "idempotency_key", key)

    def conclude_turn(self) -> None:
        """End the turn after this step, without another model request.

        See docs/scheduler.md#pipeline-stages, B16.

        Applies only if the call succeeds; the turn still continues when the `next-step`
        inbox holds steering or context once the step's results are committed (B17, B18).
        """
        self.effects.concludes_turn = True

    def defer_context(self, message: str | Message) -> Message:
        """Attach context to this call's result; it enters at the next step.

        See docs/scheduler.md#pipeline-stages.

        Deferred contexts precede those a post-execute hook adds; a hook that blocks the
        result (returns a failure) discards them. They are queued in `next-step` right
        after the call's `tool/result` (B11).

        Args:
            message: the text (becomes a user message) or a complete user message.

        Returns:
            The message that will be queued.
        """
        stored = user_message(message) if isinstance(message, str) else message
        self.effects.contexts.append(stored)
        return stored
