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
import time
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Tracer

from ..log import Event
from ..log.vocabulary import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    BLOCK_TOOL_CALL,
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
    RETRY_OF,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from . import _attributes as a
from ._tool_spans import (
    TurnSpans,
    end_with_rerun_result,
    end_with_result,
    result_block,
    start_tool_span,
)

logger = logging.getLogger(__name__)

_FAILED_TURNS = frozenset({REASON_ERROR, REASON_ABORTED, REASON_INTERRUPTED})
"""Turn-end reasons whose `invoke_agent` span ends with status ERROR (docs/telemetry.md#status)."""
_FAILED_FINISHES = frozenset({FINISH_ERROR, FINISH_ABORTED})


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
        self._turn: TurnSpans | None = None
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

    def _open_turn(self, number: int, *, continued: bool) -> TurnSpans:
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
        self._turn = TurnSpans(number, span, trace.set_span_in_context(span))
        return self._turn

    def _turn_of(self, event: Event) -> TurnSpans | None:
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
        turn.step_ns = time.time_ns()  # the `chat` span starts here, at the first request event
        turn.finish = turn.failure_code = None

    def _requested(self) -> Span | None:
        """The open step's `chat` span, started (at the step's start) by a request's event.

        A step that sends no model request (a re-run step) never gets one.
        """
        turn = self._turn
        if turn is None:
            return None
        if turn.chat is None and turn.step_ns is not None:
            attributes: dict[str, Any] = {a.OPERATION: a.OP_CHAT, a.TURN: turn.number}
            attributes[a.STEP] = turn.step
            attributes.update(self._common)
            if self._provider:
                attributes[a.PROVIDER] = self._provider
            if self._model:
                attributes[a.REQUEST_MODEL] = self._model
            turn.chat = self._tracer.start_span(
                self._chat_name(),
                context=turn.context,
                kind=SpanKind.CLIENT,
                attributes=attributes,
                start_time=turn.step_ns,
            )
            turn.step_ns = None
        return turn.chat

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
        span = self._requested()
        if span is not None:
            span.update_name(self._chat_name())
            if self._provider:
                span.set_attribute(a.PROVIDER, self._provider)
            if self._model:
                span.set_attribute(a.REQUEST_MODEL, self._model)

    def _request_header(self, event: Event) -> None:
        header = event.data.get("header")
        self._route(header.get("config") if isinstance(header, dict) else None)

    def _request_context(self, event: Event) -> None:
        self._route(event.data)

    def _user_message(self, event: Event) -> None:
        if self._capture and self._turn is not None:
            self._turn.inputs.append(event.data)

    def _chunk(self, event: Event) -> None:
        self._requested()
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
        span = self._requested()
        if span is not None:
            span.add_event(a.RETRY_EVENT, a.retry_attributes(event.data))

    def _retry_started(self, event: Event) -> None:
        turn, span = self._turn, self._requested()
        if turn is None or span is None:
            return
        attempt = event.data.get("retry")
        attributes = {a.RETRY_ATTEMPT: attempt} if isinstance(attempt, int) else {}
        span.add_event(a.RETRY_STARTED_EVENT, attributes)
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
        span = self._requested()
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

    def _end_chat(self, turn: TurnSpans) -> None:
        span, turn.chat = turn.chat, None
        if span is None:
            return
        if turn.finish is not None:
            span.set_attribute(a.FINISH_REASONS, [a.finish_reason(turn.finish)])
            if turn.finish in _FAILED_FINISHES:
                a.failed(span, turn.failure_code or a.finish_reason(turn.finish))
        span.end()

    def _end_step(self, turn: TurnSpans) -> None:
        self._end_chat(turn)
        turn.step_ns = None
        for span in turn.tools.values():
            span.set_attribute(a.LEFT_OPEN, True)
            span.end()
        turn.tools.clear()
        turn.reruns.clear()

    def _step_end(self, event: Event) -> None:
        turn = self._turn
        if turn is not None and event.data.get("turn") == turn.number:
            self._end_step(turn)

    # -- tool calls ----------------------------------------------------------------------

    def _tool_call(self, event: Event) -> None:
        turn = self._turn_of(event)
        if turn is None:
            return
        self._end_chat(turn)  # an approval continuation's calls come without a message
        call_id = a.bounded(event.data.get("callId", ""))
        name = a.bounded(event.data.get("name", ""))
        span = start_tool_span(self._tracer, turn, call_id, name, self._common)
        if RETRY_OF in event.data:  # a re-run: its replacement of the unknown result ends it
            span.set_attributes({a.RERUN: True, a.RERUN_OF: a.rerun_of(call_id)})
            turn.reruns[event.seq] = call_id
        if self._capture and isinstance(event.data.get("arguments"), str):
            span.set_attribute(
                a.TOOL_ARGUMENTS, a.bounded(event.data["arguments"], a.MAX_CONTENT_CHARS)
            )
        previous = turn.tools.pop(call_id, None)
        if previous is not None:
            previous.end()
        turn.tools[call_id] = span

    def _tool_result(self, event: Event) -> None:
        if isinstance(event.surface_op, dict):  # a replacement is never a new call's result
            self._replacement(event)
            return
        turn = self._turn_of(event)
        if turn is None:
            return
        message, block = result_block(event)
        if self._capture:
            turn.inputs.append(message)
        if block is None:
            return
        call_id = a.bounded(block.get("toolCallId", ""))
        span = turn.tools.pop(call_id, None)
        if span is None:  # no `tool/call` was recorded: the body never started
            span = start_tool_span(
                self._tracer, turn, call_id, turn.names.get(call_id, ""), self._common
            )
        end_with_result(span, event, message, block, capture=self._capture)

    def _replacement(self, event: Event) -> None:
        """A content-only `tool/result` replace: ends the re-run it cites, else nothing.

        A replacement keeps the replaced result's turn and step, so it never opens a turn:
        a re-run's cites the re-run's `tool/call` in `sourceEventSeqs`; a compaction prune's
        cites only the pruned result and makes no span (docs/telemetry.md#re-runs).
        """
        turn = self._turn
        sources = event.source_event_seqs or ()
        call_seq = next((s for s in sources if turn is not None and s in turn.reruns), None)
        if turn is None or call_seq is None:
            return
        span = turn.tools.pop(turn.reruns.pop(call_seq), None)
        message, block = result_block(event)
        if self._capture:
            turn.inputs.append(message)  # the next request carries the re-run's output
        if span is not None and block is not None:
            end_with_rerun_result(span, event, message, block, capture=self._capture)
