"""The span builder: a session observer that turns committed events into GenAI spans.

One `SessionTracer` per session. It runs inside `Session.append` (synchronously, after the
commit), so each handler only reads the event and starts, annotates or ends a span; it never
blocks and never raises into the append (a failure is logged). Spans start and end when their
events are observed (the SDK's clock, nanoseconds), not at the events' millisecond `time`.
The span tree is docs/telemetry.md#spans; this module imports the OpenTelemetry API, so only
`instrument` imports it, lazily.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Tracer

from ..log import Event
from ..log.vocabulary import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    BLOCK_TOOL_CALL,
    BLOCK_TOOL_RESULT,
    FINISH,
    FINISH_ABORTED,
    FINISH_ERROR,
    LLM_RETRY,
    LLM_RETRY_STARTED,
    REASON_ABORTED,
    REASON_ERROR,
    REASON_INTERRUPTED,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from . import _attributes as a

logger = logging.getLogger(__name__)

_FAILED_TURNS = frozenset({REASON_ERROR, REASON_ABORTED, REASON_INTERRUPTED})
"""Turn-end reasons whose `invoke_agent` span ends with status ERROR (docs/telemetry.md#status)."""
_FAILED_FINISHES = frozenset({FINISH_ERROR, FINISH_ABORTED})


@dataclass
class _Turn:
    """The spans of the open turn."""

    number: int
    span: Span
    context: Context
    step: int = 0
    chat: Span | None = None
    finish: str | None = None
    failure_code: str | None = None
    tools: dict[str, Span] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    inputs: list[Mapping[str, Any]] = field(default_factory=list)


class SessionTracer:
    """Build `invoke_agent`, `chat` and `execute_tool` spans from one session's events.

    Args:
        tracer: the OpenTelemetry tracer to start spans with.
        session_id: the session id (`gen_ai.conversation.id`).
        agent_name: `gen_ai.agent.name`, or None.
        provider: the model's provider, if known before the first request.
        model: the model id, if known before the first request.
        capture_content: put message, argument and result content in the spans (bounded).
    """

    def __init__(
        self,
        tracer: Tracer,
        *,
        session_id: str,
        agent_name: str | None,
        provider: str | None,
        model: str | None,
        capture_content: bool,
    ) -> None:
        self._tracer = tracer
        self._common: dict[str, str] = {a.CONVERSATION: a.bounded(session_id)}
        if agent_name:
            self._common[a.AGENT_NAME] = a.bounded(agent_name)
        self._agent_name = agent_name
        self._provider = a.bounded(provider) if provider else None
        self._model = a.bounded(model) if model else None
        self._capture = capture_content
        self._turn: _Turn | None = None
        self._handlers: dict[str, Callable[[Event], None]] = {
            TURN_START: self._turn_start,
            STEP_START: self._step_start,
            USER_MESSAGE: self._user_message,
            REQUEST_HEADER: self._request_header,
            REQUEST_CONTEXT: self._request_context,
            ASSISTANT_CHUNK: self._chunk,
            LLM_RETRY: self._retry,
            LLM_RETRY_STARTED: self._retry_started,
            ASSISTANT_MESSAGE: self._assistant_message,
            TOOL_CALL: self._tool_call,
            TOOL_RESULT: self._tool_result,
            STEP_END: self._step_end,
            TURN_END: self._turn_end,
        }

    def on_event(self, event: Event) -> None:
        """The session observer: update the spans for one committed event; never raises."""
        handler = self._handlers.get(event.type)
        if handler is None:
            return
        try:
            handler(event)
        except Exception:  # an observer must not break the append; the failure is logged
            logger.exception("telemetry: could not trace %s at seq %d", event.type, event.seq)

    def close(self) -> None:
        """End every open span, marked `duraloop.left_open` (a paused turn, a detach)."""
        turn, self._turn = self._turn, None
        if turn is None:
            return
        for span in [*turn.tools.values(), *([turn.chat] if turn.chat else []), turn.span]:
            span.set_attribute(a.LEFT_OPEN, True)
            span.end()

    # -- turns ---------------------------------------------------------------------------

    def _open_turn(self, number: int, *, continued: bool) -> _Turn:
        self.close()
        name = f"{a.OP_INVOKE_AGENT} {self._agent_name}" if self._agent_name else a.OP_INVOKE_AGENT
        attributes: dict[str, Any] = {a.OPERATION: a.OP_INVOKE_AGENT, a.TURN: number}
        attributes.update(self._common)
        if self._provider:
            attributes[a.PROVIDER] = self._provider
        if self._model:
            attributes[a.REQUEST_MODEL] = self._model
        if continued:
            attributes[a.TURN_CONTINUED] = True
        span = self._tracer.start_span(name, kind=SpanKind.INTERNAL, attributes=attributes)
        self._turn = _Turn(number, span, trace.set_span_in_context(span))
        return self._turn

    def _turn_of(self, event: Event) -> _Turn | None:
        """The open turn of `event`, opened (continued) if its `turn/start` was not seen."""
        number = event.data.get("turn")
        if not isinstance(number, int) or isinstance(number, bool):
            return None
        turn = self._turn
        if turn is not None and turn.number == number:
            return turn
        turn = self._open_turn(number, continued=True)
        step = event.data.get("step")
        turn.step = step if isinstance(step, int) and not isinstance(step, bool) else 0
        return turn

    def _turn_start(self, event: Event) -> None:
        number = event.data.get("turn")
        if isinstance(number, int) and not isinstance(number, bool):
            self._open_turn(number, continued=False)

    def _turn_end(self, event: Event) -> None:
        turn = self._turn
        if turn is None or event.data.get("turn") != turn.number:
            return  # a closer of a turn this tracer never saw open
        self._end_step(turn)
        reason = event.data.get("reason")
        reason = reason if isinstance(reason, dict) else {}
        kind = a.bounded(reason.get("kind", ""))
        turn.span.set_attribute(a.TURN_REASON, kind)
        if kind == REASON_ABORTED:
            inner = reason.get("reason")
            if isinstance(inner, dict) and isinstance(inner.get("kind"), str):
                turn.span.set_attribute(a.ABORT_REASON, a.bounded(inner["kind"]))
        if kind in _FAILED_TURNS:
            code = a.failure_code(reason.get("error")) if kind == REASON_ERROR else None
            a.failed(turn.span, code or kind)
        turn.span.end()
        self._turn = None

    # -- steps and model requests ----------------------------------------------------------

    def _step_start(self, event: Event) -> None:
        turn = self._turn_of(event)
        if turn is None:
            return
        self._end_step(turn)
        step = event.data.get("step")
        turn.step = step if isinstance(step, int) else turn.step + 1
        attributes: dict[str, Any] = {a.OPERATION: a.OP_CHAT, a.TURN: turn.number}
        attributes[a.STEP] = turn.step
        attributes.update(self._common)
        if self._provider:
            attributes[a.PROVIDER] = self._provider
        if self._model:
            attributes[a.REQUEST_MODEL] = self._model
        turn.chat = self._tracer.start_span(
            self._chat_name(), context=turn.context, kind=SpanKind.CLIENT, attributes=attributes
        )
        turn.finish = turn.failure_code = None

    def _chat_name(self) -> str:
        return f"{a.OP_CHAT} {self._model}" if self._model else a.OP_CHAT

    def _route(self, config: object) -> None:
        """Take the provider and model of a `request/header` config or `request/context`."""
        if not isinstance(config, dict):
            return
        provider, model = config.get("provider"), config.get("model")
        if isinstance(provider, str) and provider:
            self._provider = a.bounded(provider)
        if isinstance(model, str) and model:
            self._model = a.bounded(model)
        turn = self._turn
        if turn is not None and turn.chat is not None:
            turn.chat.update_name(self._chat_name())
            if self._provider:
                turn.chat.set_attribute(a.PROVIDER, self._provider)
            if self._model:
                turn.chat.set_attribute(a.REQUEST_MODEL, self._model)

    def _request_header(self, event: Event) -> None:
        header = event.data.get("header")
        self._route(header.get("config") if isinstance(header, dict) else None)

    def _request_context(self, event: Event) -> None:
        self._route(event.data)

    def _user_message(self, event: Event) -> None:
        if self._capture and self._turn is not None:
            self._turn.inputs.append(event.data)

    def _chunk(self, event: Event) -> None:
        chunk = event.data.get("chunk")
        if not isinstance(chunk, dict) or chunk.get("type") != FINISH:
            return
        turn = self._turn
        reason = chunk.get("reason")
        if turn is not None and isinstance(reason, dict):
            kind = reason.get("kind")
            turn.finish = kind if isinstance(kind, str) else None
            turn.failure_code = a.failure_code(reason.get("failure"))

    def _retry(self, event: Event) -> None:
        turn = self._turn
        if turn is None or turn.chat is None:
            return
        attributes = a.retry_attributes(event.data)
        turn.chat.add_event(a.RETRY_EVENT, attributes)

    def _retry_started(self, event: Event) -> None:
        turn = self._turn
        if turn is None or turn.chat is None:
            return
        attempt = event.data.get("retry")
        attributes = {a.RETRY_ATTEMPT: attempt} if isinstance(attempt, int) else {}
        turn.chat.add_event(a.RETRY_STARTED_EVENT, attributes)
        turn.finish = turn.failure_code = None

    def _assistant_message(self, event: Event) -> None:
        turn = self._turn
        if turn is None:
            return
        message = event.data.get("message")
        message = message if isinstance(message, dict) else {}
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == BLOCK_TOOL_CALL:
                turn.names[a.bounded(block.get("id", ""))] = a.bounded(block.get("name", ""))
        span = turn.chat
        if span is None:
            return
        source = message.get("source")
        if isinstance(source, dict):
            if isinstance(source.get("provider"), str):
                span.set_attribute(a.PROVIDER, a.bounded(source["provider"]))
            if isinstance(source.get("model"), str):
                span.set_attribute(a.RESPONSE_MODEL, a.bounded(source["model"]))
        usage = event.data.get("usage")
        if isinstance(usage, dict):
            span.set_attributes(a.usage_attributes(usage))
        if event.data.get("interrupted") is True:
            span.set_attribute(a.INTERRUPTED, True)
        if self._capture:
            span.set_attribute(a.INPUT_MESSAGES, a.messages_json(turn.inputs))
            span.set_attribute(a.OUTPUT_MESSAGES, a.messages_json([message]))
            turn.inputs = []
        self._end_chat(turn)

    def _end_chat(self, turn: _Turn) -> None:
        span, turn.chat = turn.chat, None
        if span is None:
            return
        if turn.finish is not None:
            span.set_attribute(a.FINISH_REASONS, [a.finish_reason(turn.finish)])
            if turn.finish in _FAILED_FINISHES:
                a.failed(span, turn.failure_code or a.finish_reason(turn.finish))
        span.end()

    def _end_step(self, turn: _Turn) -> None:
        self._end_chat(turn)
        for span in turn.tools.values():
            span.set_attribute(a.LEFT_OPEN, True)
            span.end()
        turn.tools.clear()

    def _step_end(self, event: Event) -> None:
        turn = self._turn
        if turn is not None and event.data.get("turn") == turn.number:
            self._end_step(turn)

    # -- tool calls ----------------------------------------------------------------------

    def _tool_span(self, turn: _Turn, call_id: str, name: str) -> Span:
        attributes: dict[str, Any] = {
            a.OPERATION: a.OP_EXECUTE_TOOL,
            a.TOOL_NAME: name,
            a.TOOL_CALL_ID: call_id,
            a.TOOL_TYPE: a.TOOL_TYPE_FUNCTION,
            a.TURN: turn.number,
            a.STEP: turn.step,
        }
        attributes.update(self._common)
        return self._tracer.start_span(
            f"{a.OP_EXECUTE_TOOL} {name}",
            context=turn.context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )

    def _tool_call(self, event: Event) -> None:
        turn = self._turn_of(event)
        if turn is None:
            return
        self._end_chat(turn)  # an approval continuation's calls come without a message
        call_id = a.bounded(event.data.get("callId", ""))
        name = a.bounded(event.data.get("name", ""))
        span = self._tool_span(turn, call_id, name)
        if self._capture and isinstance(event.data.get("arguments"), str):
            span.set_attribute(
                a.TOOL_ARGUMENTS, a.bounded(event.data["arguments"], a.MAX_CONTENT_CHARS)
            )
        previous = turn.tools.pop(call_id, None)
        if previous is not None:
            previous.end()
        turn.tools[call_id] = span

    def _tool_result(self, event: Event) -> None:
        turn = self._turn_of(event)
        if turn is None:
            return
        message = event.data.get("message")
        message = message if isinstance(message, dict) else {}
        if self._capture:
            turn.inputs.append(message)
        content = message.get("content")
        block = content[0] if isinstance(content, list) and content else {}
        if not isinstance(block, dict) or block.get("type") != BLOCK_TOOL_RESULT:
            return
        call_id = a.bounded(block.get("toolCallId", ""))
        span = turn.tools.pop(call_id, None)
        if span is None:  # no `tool/call` was recorded: the body never started
            span = self._tool_span(turn, call_id, turn.names.get(call_id, ""))
        is_error = block.get("isError") is True
        code = a.failure_code(event.data.get("error"))
        outcome = a.tool_outcome(code, is_error=is_error)
        span.set_attribute(a.TOOL_OUTCOME, outcome)
        span.set_attribute(a.RECOVERY, code in a.RECOVERY_CODES)
        if code:
            span.set_attribute(a.TOOL_ERROR_CODE, code)
        if is_error:
            a.failed(span, code or a.OUTCOME_ERROR)
        if self._capture:
            span.set_attribute(a.TOOL_RESULT, a.messages_json([message]))
        span.end()
