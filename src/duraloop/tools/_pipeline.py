"""The staged tool pipeline the scheduler drives: prepare, dispatch, finalize.

See docs/scheduler.md#pipeline-stages.

Simplified from dsh: no guards, no code mode; an approval is asked before the call's
`tool/call` (docs/approvals.md), not after it. Expected
failures (unknown tool, invalid arguments, a raising body, a raising hook, a timeout) are
contained as error results; only genuine internal faults raise, which the scheduler treats
as a scheduler failure (docs/scheduler.md#scheduler-failure). Cancellation replaces only successes
(docs/scheduler.md#tool-error-codes), with `ABORTED`; a success the body returned is kept in that
result's content, after a text saying the body ran to completion. A body that cannot be interrupted
gets a grace period after cancellation, then its call is answered without it (`_blocking.py`); this
bounds what dsh leaves unbounded (docs/recovery.md#limits-of-live-recovery), so a cancelled turn
always closes. Every result is capped at the tool's or the loop's `max_output_bytes` before it is
committed.

Each stage is a plain async method, so a test can subclass `ToolPipeline` and override one
to inject a fault.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final, Literal

import anyio
from pydantic import ValidationError

from ..errors import ToolError
from ..log import idempotency_key
from ..log.vocabulary import (
    INVALID_ARGS_ERROR,
    TOOL_ERROR_NAME,
    TOOL_TIMEOUT_ERROR,
    UNKNOWN_TOOL_ERROR,
)
from ._blocking import DEFAULT_CANCEL_GRACE_SECONDS, BodyNotInterruptedError
from ._bodies import RunningBodies
from ._context import ToolContext
from ._definition import Tool
from ._hooks import AskApproval, Deny, ToolHooks, tool_asks
from ._outcome import (
    DEFAULT_MAX_OUTPUT_BYTES,
    ToolOutcome,
    capped,
    checked_outcome,
    outcome_of_value,
)
from ._registry import ToolRegistry, unknown_tool_text
from ._request import ToolCallRequest, describe_malformed_arguments
from ._signal import CancelSignal

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Prepared:
    """What `ToolPipeline.prepare` decided for one call.

    Args:
        kind: `"dispatch"` (run the body next), `"post-result"` (use `outcome`, then run
            `finalize`), `"final-result"` (use `outcome` as it is, skipping finalize), or
            `"ask"` (a person must approve the call first, docs/approvals.md).
        outcome: the outcome for the two result kinds; None for `"dispatch"` and `"ask"`.
        reason: for `"ask"`, why approval is needed.
    """

    kind: Literal["dispatch", "post-result", "final-result", "ask"]
    outcome: ToolOutcome | None = None
    reason: str = ""


_DISPATCH: Final = Prepared("dispatch")
"""`prepare`'s answer for a call whose body may run (immutable, so one for all calls)."""


class ToolPipeline:
    """Run one tool call through its stages; the scheduler decides order and overlap.

    For each call the scheduler awaits `prepare`, then (for `"dispatch"`) `dispatch`,
    then (unless the result was final) `finalize`. Only `dispatch` may overlap with other
    calls. The registry is read at each stage, so registry changes are seen by every call
    that has not reached that stage yet.

    Args:
        registry: the tools calls resolve against.
        hooks: pre- and post-execute hooks; none when None.
        cwd: the session workspace handed to bodies (resolved to an absolute path here).
        session_id: the session the calls belong to.
        max_output_bytes: the cap on a result's content in bytes, for tools that set none
            (`LoopConfig.max_tool_output_bytes`).
        cancel_grace_seconds: how long a body that cannot be interrupted gets after
            cancellation, in seconds (`LoopConfig.tool_cancel_grace_seconds`).
    """

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        hooks: ToolHooks | None = None,
        cwd: Path,
        session_id: str,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        cancel_grace_seconds: float = DEFAULT_CANCEL_GRACE_SECONDS,
    ) -> None:
        self.registry = registry
        self.hooks = hooks if hooks is not None else ToolHooks()
        self.cwd = Path(cwd).resolve()
        self.session_id = session_id
        self.max_output_bytes = max_output_bytes
        self.cancel_grace_seconds = cancel_grace_seconds
        self._invoked: set[str] = set()
        self._bodies = RunningBodies()

    def is_parallel(self, call: ToolCallRequest) -> bool:
        """Classify `call` now: True for parallel-safe, False for exclusive; never raises.

        Args:
            call: the planned call.

        Returns:
            The tool's classification (see `Tool.is_parallel`); False for an unknown tool.
        """
        found = self.registry.get(call.name)
        return found is not None and found.is_parallel(call.arguments)

    async def prepare(self, call: ToolCallRequest, signal: CancelSignal) -> Prepared:
        """Decide whether `call` may be dispatched; pre-execute hooks run here, in order.

        The scheduler calls this before the call's `tool/call` is appended.

        Args:
            call: the planned call.
            signal: the turn's cancellation signal.

        Returns:
            `final-result ABORTED_BEFORE_DISPATCH` if already cancelled; `post-result`
            `Error: <reason>` (no code) for a `Deny`; `ask` for an `AskApproval` or a tool
            whose `requires_approval` asks; `final-result Error: <message>` if a hook
            raises; `post-result ABORTED_BEFORE_DISPATCH` if cancelled during the hooks;
            otherwise `dispatch`.
        """
        if signal.aborted:
            return Prepared("final-result", ToolOutcome.cancelled(body_invoked=False))
        for hook in self.hooks.pre_execute:
            try:
                decision = hook(call)
                if inspect.isawaitable(decision):
                    decision = await decision
            # a hook failure is an error result (docs/scheduler.md#pipeline-stages)
            except Exception as exc:  # noqa: BLE001
                logger.debug(
                    "pre-execute hook raised %s for call %s", type(exc).__name__, call.call_id
                )
                failed = ToolOutcome.failure(_message_of(exc))
                return Prepared("final-result", self._capped(call, failed))
            if isinstance(decision, Deny):
                return Prepared("post-result", ToolOutcome.failure(decision.reason))
            if isinstance(decision, AskApproval):
                return Prepared("ask", reason=decision.reason)
            if decision is not None:
                message = (
                    f"pre-execute hook {_name_of(hook)} returned {type(decision).__name__}; "
                    "expected None, Deny or AskApproval"
                )
                return Prepared("final-result", ToolOutcome.failure(message))
        if signal.aborted:
            return Prepared("post-result", ToolOutcome.cancelled(body_invoked=False))
        reason = tool_asks(self.registry.get(call.name), call.arguments)
        if reason is not None:
            return Prepared("ask", reason=reason)
        return _DISPATCH

    async def dispatch(self, call: ToolCallRequest, signal: CancelSignal) -> ToolOutcome:
        """Validate the arguments and run the body; contain every expected failure.

        The body's return value becomes content: a `ToolOutcome` is used as it is; a `str`
        is one text block; None is the text `"ok"`; a pydantic model is dumped to JSON;
        any other lossless JSON value becomes its compact JSON text.

        Args:
            call: the call; `prepare` must have returned `dispatch` for it.
            signal: the turn's cancellation signal, handed to the body as `ctx.signal`.

        Returns:
            `ABORTED_BEFORE_DISPATCH` if cancelled; `UNKNOWN_TOOL` if no tool has the name
            (the body is not invoked); `INVALID_ARGS` if validation fails; `TOOL_TIMEOUT`
            if `timeout_seconds` expired; `{name: "ToolError", code}` for a `ToolError`;
            `Error: <ExcType>: <message>` (no code) for any other exception; `ABORTED`
            for a body cancelled at an await, and for a success if the signal was cancelled
            by completion (then with the success's content, after a text saying the body
            ran to completion); `TOOL_OUTCOME_UNKNOWN` for a body still running
            `cancel_grace_seconds` after the cancellation; else the success.
        """
        if signal.aborted:
            return ToolOutcome.cancelled(body_invoked=False)
        found = self.registry.get(call.name)
        if found is None:
            return ToolOutcome.failure(unknown_tool_text(call.name), error=UNKNOWN_TOOL_ERROR)
        self._invoked.add(call.call_id)
        try:
            args = found.validator(call.arguments)
        except ValueError as exc:
            malformed = (
                describe_malformed_arguments(call.raw_arguments)
                # raw text passed through (docs/scheduler.md#arguments)
                if isinstance(call.arguments, str)
                else None
            )
            return ToolOutcome.failure(
                _invalid_args_message(found.name, malformed or exc), error=INVALID_ARGS_ERROR
            )
        except Exception as exc:  # noqa: BLE001 - a validator bug is an error result
            return ToolOutcome.failure(f"{type(exc).__name__}: {exc}")
        ctx = ToolContext(
            cwd=self.cwd,
            signal=signal,
            call_id=call.call_id,
            tool_name=found.name,
            session_id=self.session_id,
            cancel_grace_seconds=self.cancel_grace_seconds,
            idempotency_key=idempotency_key(
                call.origin_session_id or self.session_id, call.call_id
            ),
        )
        outcome = _with_effects(await self._run_body(found, args, ctx), ctx)
        if signal.aborted and not outcome.is_error:
            return ToolOutcome.aborted_after_completion(outcome)
        return outcome

    async def finalize(
        self, call: ToolCallRequest, outcome: ToolOutcome, signal: CancelSignal
    ) -> ToolOutcome:
        """Run post-execute hooks, re-check cancellation and check the result is JSON.

        Args:
            call: the call.
            outcome: the outcome from `dispatch` or a `post-result` from `prepare`.
            signal: the turn's cancellation signal.

        Returns:
            The last hook replacement (or `outcome`); `Error: <message>` if a hook raised;
            `ABORTED` (keeping the content: the body ran to completion) or
            `ABORTED_BEFORE_DISPATCH` in place of a success if cancelled;
            `INVALID_TOOL_OUTPUT` if the content or meta is not lossless JSON. The content
            is capped at the tool's `max_output_bytes` (else the pipeline's).
        """
        invoked = call.call_id in self._invoked
        self._invoked.discard(call.call_id)
        for hook in self.hooks.post_execute:
            try:
                replacement = hook(call, outcome)
                if inspect.isawaitable(replacement):
                    replacement = await replacement
            # a hook failure is an error result (docs/scheduler.md#pipeline-stages)
            except Exception as exc:  # noqa: BLE001
                logger.debug(
                    "post-execute hook raised %s for call %s", type(exc).__name__, call.call_id
                )
                outcome = ToolOutcome.failure(_message_of(exc))
                break
            if isinstance(replacement, ToolOutcome):
                outcome = _merged(outcome, replacement)
            elif replacement is not None:
                outcome = ToolOutcome.failure(
                    f"post-execute hook {_name_of(hook)} returned {type(replacement).__name__}; "
                    "expected None or ToolOutcome"
                )
                break
        if signal.aborted and not outcome.is_error:
            outcome = (
                ToolOutcome.aborted_after_completion(outcome)
                if invoked
                else _cancelled_keeping_contexts(outcome, body_invoked=False)
            )
        return self._capped(call, checked_outcome(outcome))

    def _capped(self, call: ToolCallRequest, outcome: ToolOutcome) -> ToolOutcome:
        found = self.registry.get(call.name)
        own = None if found is None else found.max_output_bytes
        return capped(outcome, self.max_output_bytes if own is None else own)

    async def _run_body(self, found: Tool, args: object, ctx: ToolContext) -> ToolOutcome:
        # Cancellation settles the body through `RunningBodies` (docs/scheduler.md#cancellation);
        # a sync body's thread wait is shielded, and bounded by the grace period, in
        # `run_blocking`.
        outcome: ToolOutcome | None = None
        with anyio.CancelScope() as cancel_scope:
            self._bodies.add(
                cancel_scope,
                ctx.signal,
                watches=found.watches_signal,
                grace_seconds=self.cancel_grace_seconds,
            )
            try:
                outcome = await self._run_timed(found, args, ctx)
            finally:
                self._bodies.discard(cancel_scope)
        # A body that returned is reported even if the scope's cancel also landed.
        return outcome if outcome is not None else ToolOutcome.cancelled(body_invoked=True)

    async def _run_timed(self, found: Tool, args: object, ctx: ToolContext) -> ToolOutcome:
        if found.timeout_seconds is None:
            return await self._invoke(found, args, ctx)
        with anyio.move_on_after(found.timeout_seconds) as scope:
            outcome = await self._invoke(found, args, ctx)
        if scope.cancel_called:
            milliseconds = round(found.timeout_seconds * 1000)
            return ToolOutcome.failure(
                f"tool call timed out after {milliseconds}ms", error=TOOL_TIMEOUT_ERROR
            )
        return outcome

    async def _invoke(self, found: Tool, args: object, ctx: ToolContext) -> ToolOutcome:
        try:
            value = await found.body(args, ctx)
        except BodyNotInterruptedError as exc:
            logger.warning(
                "tool %s (call %s) was still running %gs after cancellation; answered "
                "TOOL_OUTCOME_UNKNOWN without it",
                found.name,
                ctx.call_id,
                exc.grace_seconds,
            )
            return ToolOutcome.not_interrupted(grace_seconds=exc.grace_seconds)
        except ToolError as exc:
            return ToolOutcome.failure(
                exc.message, error={"name": TOOL_ERROR_NAME, "code": exc.code}
            )
        except Exception as exc:  # a tool failure is an error result, never a crash
            logger.debug("tool %s raised %s", found.name, type(exc).__name__, exc_info=True)
            return ToolOutcome.failure(f"{type(exc).__name__}: {exc}")
        return outcome_of_value(value)


def _with_effects(outcome: ToolOutcome, ctx: ToolContext) -> ToolOutcome:
    """Put the body's deferred contexts in front of the outcome's own; apply concludeTurn."""
    effects = ctx.effects
    if not effects.contexts and not effects.concludes_turn:
        return outcome
    return replace(
        outcome,
        additional_contexts=(*effects.contexts, *outcome.additional_contexts),
        concludes_turn=outcome.concludes_turn or effects.concludes_turn,
    )


def _merged(previous: ToolOutcome, replacement: ToolOutcome) -> ToolOutcome:
    """Apply a post-execute replacement (docs/scheduler.md#pipeline-stages).

    A success replacement accepts: the earlier contexts (the tool's) precede the hook's,
    and an earlier `concludes_turn` stands. A hook that returns its input changed with
    `dataclasses.replace` already carries the earlier contexts as a prefix; they are not
    repeated. A failure replacement blocks: only its own contexts are kept.
    """
    if replacement.is_error:
        return replacement
    earlier = previous.additional_contexts
    contexts = replacement.additional_contexts
    if contexts[: len(earlier)] != earlier:
        contexts = (*earlier, *contexts)
    return replace(
        replacement,
        additional_contexts=contexts,
        concludes_turn=replacement.concludes_turn or previous.concludes_turn,
    )


def _cancelled_keeping_contexts(outcome: ToolOutcome, *, body_invoked: bool) -> ToolOutcome:
    """The cancellation failure replacing a success; its contexts are kept.

    See docs/scheduler.md#cancellation.
    """
    cancelled = ToolOutcome.cancelled(body_invoked=body_invoked)
    return replace(cancelled, additional_contexts=outcome.additional_contexts)


def _invalid_args_message(tool_name: str, exc: ValueError | str) -> str:
    if isinstance(exc, ValidationError):
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '(arguments)'}: {error['msg']}"
            for error in exc.errors(include_url=False)
        )
    else:
        problems = str(exc)
    return f'invalid arguments for tool "{tool_name}": {problems}'


def _message_of(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


def _name_of(hook: object) -> str:
    return getattr(hook, "__qualname__", type(hook).__name__)
