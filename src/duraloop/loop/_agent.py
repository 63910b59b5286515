"""The AgentLoop driver: turns and steps over a durable session (loop-spec 2, 6, 7).

A turn opens with `turn/start`, runs steps until the model answers without tool calls,
and always closes with exactly one `turn/end`. A step always closes with `step/end`; when it
fails after the assistant message, the unanswered calls get recovery results first
(`StepRecovery`), and the ORIGINAL failure is recorded in `turn/end` and propagates.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio

from ..errors import LlmError, UsageError
from ..llm import Model, ToolSchema
from ..log import Message, PairingCheck, Session, user_message
from ..log._vocabulary import (
    REASON_ABORTED,
    REASON_BLOCKED,
    REASON_ERROR,
    REASON_MAX_TOKENS,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TURN_END,
    TURN_START,
)
from ..tools import CancelSignal, Tool, ToolHooks, ToolPipeline, ToolRegistry, TurnCancelled
from ._config import LoopConfig
from ._prompt import default_system_prompt
from ._recovery import StepRecovery
from ._step import RequestState, StepSettings, run_step

logger = logging.getLogger(__name__)


class Durability(Protocol):
    """What the loop needs from persistence (`duraloop.store.SessionWriter` satisfies it).

    `flush()` makes every committed event durable (one write + one fsync); the loop may
    call it from a worker thread (never two at once), so it must take one snapshot of the
    session's events. `close()` flushes and releases the session's writer lock. None (no
    store) means in-memory only.
    """

    def flush(self) -> None:
        """Write and fsync every buffered event."""

    def close(self) -> None:
        """Flush, then release the writer."""


@dataclass(frozen=True)
class TurnResult:
    """How a turn ended.

    Args:
        turn: the turn number.
        reason: the `turn/end` reason JSON, e.g. `{"kind": "completed"}`.
        text: the text of the turn's last assistant message ("" if none).
        steps: the number of steps the turn ran.
    """

    turn: int
    reason: dict[str, Any]
    text: str
    steps: int

    @property
    def kind(self) -> str:
        """The reason kind: completed, aborted, blocked, error or max-tokens."""
        return str(self.reason.get("kind"))


@dataclass
class _TurnState:
    turn: int
    steps: int = 0
    reason: dict[str, Any] | None = None
    text: str = ""
    entering: list[Message] = field(default_factory=list)


def _failure_of(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, LlmError):
        return exc.failure()
    chain = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    cause = exc.__cause__
    while cause is not None:
        chain += " <- " + "".join(traceback.format_exception_only(type(cause), cause)).strip()
        cause = cause.__cause__
    return {"message": chain, "code": "UNKNOWN"}


class AgentLoop:
    """Drive a model through turns and steps over a session, running the tools it calls.

    Args:
        session: the live session (fresh, resumed or forked).
        model: the model to request.
        tools: the tools the model may call (a registry, or tools to register).
        cwd: the workspace directory tools are confined to.
        config: loop options.
        durability: makes the log durable at each boundary (a store writer), or None.
        tool_hooks: pre- and post-execute hooks for every tool call.
        pipeline_factory: builds the tool pipeline; tests use it to inject faults.

    Raises:
        UsageError: if `cwd` is not an existing directory.
    """

    def __init__(
        self,
        session: Session,
        *,
        model: Model,
        tools: ToolRegistry | Sequence[Tool] = (),
        cwd: Path | str,
        config: LoopConfig | None = None,
        durability: Durability | None = None,
        tool_hooks: ToolHooks | None = None,
        pipeline_factory: Callable[..., ToolPipeline] = ToolPipeline,
    ) -> None:
        self.session = session
        self.model = model
        self.config = config or LoopConfig()
        self.cwd = Path(cwd).resolve()
        if not self.cwd.is_dir():
            raise UsageError(f"workspace {self.cwd} is not a directory; create it or pass another cwd")
        if isinstance(tools, ToolRegistry):
            self.registry = tools
        else:
            self.registry = ToolRegistry()
            for item in tools:
                self.registry.register(item)
        self.durability = durability
        self.pipeline = pipeline_factory(
            self.registry, hooks=tool_hooks, cwd=self.cwd, session_id=session.id
        )
        self._signal: CancelSignal | None = None
        self._durable_through = session.seq - 1
        self._flushing: anyio.Event | None = None
        self._closed = False
        self._last_turn, header, context = _scan_log(session)
        self._request_state = RequestState(header=header, context=context)
        self._pairing = PairingCheck()

    @property
    def last_turn(self) -> int:
        """The number of the last turn started in this session (0 if none)."""
        return self._last_turn

    def cancel(self, reason: dict[str, Any] | None = None) -> None:
        """Cancel the running turn: stop new tool starts, drain started ones, close the log.

        Unstarted calls get `ABORTED_BEFORE_DISPATCH` results and the turn ends `aborted`.
        Safe to call from a signal handler on the event loop; a no-op while idle.

        Args:
            reason: the cause recorded in `turn/end`, default `{"kind": "user"}`.
        """
        if self._signal is not None:
            self._signal.cancel(reason)

    def flush(self) -> None:
        """Make every committed event durable now (a no-op without a store).

        Raises:
            UsageError: if a background flush is still running (it never is between steps).
        """
        if self._flushing is not None:
            raise UsageError("a durable flush is already running on this AgentLoop")
        if self.durability is not None:
            self.durability.flush()
        self._durable_through = self.session.seq - 1

    def close(self) -> None:
        """Flush and release the session's writer; later `run_turn` calls are refused."""
        self._closed = True
        if self.durability is not None:
            self.durability.close()
            self.durability = None

    def __enter__(self) -> AgentLoop:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def _ensure_durable(self, seq: int) -> None:
        """Make the log durable through `seq` before a tool body runs (Law 5).

        Group commit: one flush at a time runs in a worker thread, so the event loop keeps
        committing and starting other calls meanwhile; a caller whose seq the running flush
        does not cover waits for it and then flushes everything appended since.
        """
        while seq > self._durable_through:
            if self._flushing is not None:
                await self._flushing.wait()
                continue
            durability = self.durability
            if durability is None:
                self._durable_through = self.session.seq - 1
                return
            target = self.session.seq - 1
            self._flushing = anyio.Event()
            try:
                await anyio.to_thread.run_sync(durability.flush)
                self._durable_through = target
            finally:
                self._flushing.set()
                self._flushing = None

    async def run_turn(self, prompt: str | Message) -> TurnResult:
        """Run one turn for `prompt` and close it durably, whatever happens.

        Args:
            prompt: the user's text, or a complete user message.

        Returns:
            The turn's end: completed, max-tokens, blocked (max_steps reached) or aborted
            (after `cancel()`).

        Raises:
            UsageError: if a turn is already running on this loop, or it is closed.
            Exception: the original failure of an `error` turn (e.g. `LlmError`), after
                recovery results, `step/end` and `turn/end {error}` are in the log.
        """
        if self._closed:
            raise UsageError(
                f"this AgentLoop for session {self.session.id} is closed (its writer is released, "
                "so nothing would be persisted); open the session again with resume_session()"
            )
        if self._signal is not None:
            raise UsageError("a turn is already running on this AgentLoop; await it or cancel it")
        message = user_message(prompt) if isinstance(prompt, str) else prompt
        signal = CancelSignal()
        self._signal = signal
        try:
            return await self._turn(message, signal)
        finally:
            self._signal = None

    async def _turn(self, message: Message, signal: CancelSignal) -> TurnResult:
        turn = self._last_turn + 1
        self.session.append(TURN_START, {"turn": turn})
        self._last_turn = turn
        state = _TurnState(turn=turn, entering=[message])
        error: BaseException | None = None
        try:
            await self._steps(state, signal)
        except TurnCancelled as exc:
            state.reason = {"kind": REASON_ABORTED, "reason": exc.reason}
        except BaseException as exc:  # noqa: BLE001 - recorded in turn/end, then re-raised
            error = exc
            if signal.aborted:
                state.reason = {"kind": REASON_ABORTED, "reason": signal.reason}
            elif not isinstance(exc, Exception):
                # The caller's own cancel scope (or KeyboardInterrupt) stopped the turn.
                state.reason = {"kind": REASON_ABORTED, "reason": {"kind": "parent"}}
            else:
                state.reason = {"kind": REASON_ERROR, "error": _failure_of(exc)}
        reason = state.reason or {"kind": REASON_ERROR, "error": {"message": "no reason", "code": "UNKNOWN"}}
        try:
            self.session.append(TURN_END, {"turn": turn, "reason": reason})
            self.flush()
        except Exception:
            if error is None:
                raise
            logger.exception("session %s: closing turn %d failed", self.session.id, turn)
        if error is not None and not signal.aborted:
            raise error
        if error is not None and not isinstance(error, Exception):
            raise error
        return TurnResult(turn=turn, reason=reason, text=state.text, steps=state.steps)

    async def _steps(self, state: _TurnState, signal: CancelSignal) -> None:
        settings = StepSettings(
            model=self.model,
            system=self.config.system_prompt
            if self.config.system_prompt is not None
            else default_system_prompt(self.cwd, [tool.name for tool in self.registry]),
            tools=[ToolSchema(**schema) for schema in self.registry.schemas()],
            max_tokens=self.config.max_tokens,
            max_parallel_tool_calls=self.config.max_parallel_tool_calls,
            flush=self.flush,
            ensure_durable=self._ensure_durable,
            retry=self.config.retry,
            stream_idle_timeout_seconds=self.config.stream_idle_timeout_seconds,
        )
        sticky_max_tokens = False
        while True:
            signal.throw_if_aborted()
            if state.steps >= self.config.max_steps:
                state.reason = {
                    "kind": REASON_BLOCKED,
                    "message": f"the turn reached max_steps={self.config.max_steps} before the "
                    "model finished; run another turn to continue, or raise max_steps",
                }
                return
            step = state.steps + 1
            step_end = await self._step(state, step, settings, signal)
            if step_end == REASON_MAX_TOKENS:
                sticky_max_tokens = True
            if step_end is not None:
                state.reason = {"kind": REASON_MAX_TOKENS if sticky_max_tokens else step_end}
                return

    async def _step(
        self, state: _TurnState, step: int, settings: StepSettings, signal: CancelSignal
    ) -> str | None:
        turn = state.turn
        with StepRecovery(self.session, turn=turn) as recovery:
            self.session.append(STEP_START, {"turn": turn, "step": step}, copy=False)
            state.steps = step
            entering, state.entering = state.entering, []
            try:
                result = await run_step(
                    self.session, turn=turn, step=step, entering=entering, settings=settings,
                    pipeline=self.pipeline, signal=signal, state=self._request_state,
                    pairing=self._pairing,
                )
            except BaseException:
                recovery.record_recovery_results()
                raise
            finally:
                self.session.append(STEP_END, {"turn": turn, "step": step}, copy=False)
            state.text = _last_assistant_text(self.session) or state.text
            return result


def _last_assistant_text(session: Session) -> str:
    messages = session.messages
    for message in reversed(messages[-8:]):
        if message.get("role") == "assistant":
            return "".join(
                block.get("text", "") for block in message["content"] if block.get("type") == "text"
            )
    return ""


def _scan_log(session: Session) -> tuple[int, dict[str, Any] | None, dict[str, Any] | None]:
    """Return the last `turn/start` number and the latest request header and context."""
    last_turn = 0
    header: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    for event in reversed(session.events):
        if event.type == TURN_START and last_turn == 0:
            last_turn = int(event.data.get("turn", 0))
        elif event.type == REQUEST_HEADER and header is None:
            header = event.data.get("header")
        elif event.type == REQUEST_CONTEXT and context is None:
            context = event.data
        if last_turn and header is not None and context is not None:
            break
    return last_turn, header, context
