"""`instrument`: trace an AgentLoop's (or a Session's) turns with OpenTelemetry GenAI spans.

The OpenTelemetry API is imported here lazily, inside `instrument`, so `import duraloop` and
`import duraloop.telemetry` never load it (docs/telemetry.md#cost). Without the API installed
`instrument` does nothing; with it installed but no tracer provider configured, the API's
no-op tracer makes every span free.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final, Protocol

from ..errors import UsageError
from ..log import Session

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

logger = logging.getLogger(__name__)

CAPTURE_CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The standard GenAI switch: `true` turns content capture on when `capture_content` is None."""
TRACER_NAME: Final = "duraloop"


class LoopLike(Protocol):
    """What `instrument` reads of an `AgentLoop`: its session (and its `model`, if any)."""

    @property
    def session(self) -> Session:
        """The loop's session."""
        ...


def _detach_nothing() -> None:
    """The detach of an `instrument` that traced nothing."""


def capture_from_env(env: Mapping[str, str]) -> bool:
    """Whether `env` turns content capture on (`CAPTURE_CONTENT_ENV` is `true`, any case).

    Args:
        env: the environment (`os.environ`).
    """
    return env.get(CAPTURE_CONTENT_ENV, "").strip().lower() == "true"


def instrument(
    target: LoopLike | Session,
    *,
    tracer_provider: TracerProvider | None = None,
    capture_content: bool | None = None,
    agent_name: str | None = None,
) -> Callable[[], None]:
    """Trace a loop's turns as OpenTelemetry GenAI spans, built from its committed events.

    Each turn is an `invoke_agent` span (INTERNAL); under it, each step's model request
    is a `chat {model}` span (CLIENT) with its provider, model, token usage, finish reason
    and retries as span events, and each tool call an `execute_tool {name}` span (INTERNAL)
    with its call id, outcome, error code and whether it is a recovery result. The session id
    is `gen_ai.conversation.id` on every span. See docs/telemetry.md#spans.

    The spans are built by a session observer (`Session.observe`): nothing in the loop
    changes, and a tracing failure is logged, never raised into the loop. Spans of a turn
    still open when the process ends are not exported; `detach()` ends them (marked
    `duraloop.left_open`).

    Args:
        target: the loop (its session is traced; its model names the first requests) or a
            session.
        tracer_provider: the provider to trace with; None uses the global one (the API's
            no-op provider when the application configured none).
        capture_content: put message text, tool arguments and tool results in the spans
            (each attribute at most 16384 characters). Off by default, so no prompt, output
            or tool data leaves the process; None reads the standard environment variable
            `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` (`true` turns it on).
            See docs/telemetry.md#content-capture.
        agent_name: `gen_ai.agent.name` (and the `invoke_agent {name}` span name), or None.

    Returns:
        `detach()`: stops tracing and ends the spans still open. Without the OpenTelemetry
        API installed (`pip install 'duraloop[otel]'`) instrumenting is a no-op and `detach`
        does nothing.

    Raises:
        UsageError: if `target` is neither an AgentLoop nor a Session.
    """
    session = target if isinstance(target, Session) else getattr(target, "session", None)
    if not isinstance(session, Session):
        raise UsageError(
            f"instrument() traces an AgentLoop or a Session, not {type(target).__name__}; "
            "pass the loop (or loop.session)"
        )
    try:
        from opentelemetry import trace
    except ImportError:
        logger.debug("telemetry: opentelemetry-api is not installed; not tracing %s", session.id)
        return _detach_nothing
    from ._spans import SessionTracer

    model = None if isinstance(target, Session) else getattr(target, "model", None)
    capture = capture_from_env(os.environ) if capture_content is None else capture_content
    builder = SessionTracer(
        trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider),
        session_id=session.id,
        agent_name=agent_name,
        provider=getattr(model, "provider", None),
        model=getattr(model, "model", None),
        capture_content=capture,
    )
    remove = session.observe(builder.on_event)

    def detach() -> None:
        remove()
        builder.close()

    return detach
