"""What a step logs and checks before a model request (docs/loop.md#steps, B38).

`RequestState` is what this loop instance has logged about its requests; `log_request_header`
appends `request/header` (initial, resume or change) and `request/context` only when they
differ from what the log already says; `check_route` refuses a model that names no provider
or model before anything is requested.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..llm import Model, ToolSchema
from ..log import Session
from ..log.vocabulary import REQUEST_CONTEXT, REQUEST_HEADER


@dataclass
class RequestState:
    """What this loop instance has logged about its requests (docs/loop.md#steps)."""

    header: dict[str, Any] | None
    context: dict[str, Any] | None
    logged_header: bool = False


def log_request_header(
    session: Session,
    state: RequestState,
    *,
    model: Model,
    system: str,
    tools: Sequence[ToolSchema],
    max_tokens: int | None,
) -> None:
    """Append `request/header` and `request/context` where they changed, and note them in `state`.

    Args:
        session: the live session.
        state: this loop instance's request bookkeeping (updated).
        model: the model about to be requested.
        system: the system prompt ("" for none).
        tools: the tool schemas sent.
        max_tokens: the output token cap actually sent.
    """
    config: dict[str, Any] = {"provider": model.provider, "model": model.model}
    if max_tokens is not None:
        config["maxTokens"] = max_tokens
    header: dict[str, Any] = {"config": config}
    if system:
        header["system"] = system
    if tools:
        header["tools"] = [tool.to_json() for tool in tools]
    if not state.logged_header:
        reason = "initial" if state.header is None else "resume"
    elif header != state.header:
        reason = "change"
    else:
        reason = ""
    if reason:
        session.append(REQUEST_HEADER, {"header": header, "reason": reason})
        state.header = header
        state.logged_header = True
    context = {"provider": config["provider"], "model": config["model"]}
    if context != state.context:
        session.append(REQUEST_CONTEXT, context)
        state.context = context


def check_route(model: Model) -> None:
    """Refuse a model without a provider or model name before anything is requested (B38).

    Raises:
        UsageError: naming the empty field and the model object.
    """
    for field_name in ("provider", "model"):
        value = getattr(model, field_name, None)
        if not isinstance(value, str) or not value:
            raise UsageError(
                f"the model {type(model).__name__} has no {field_name}: provider="
                f"{getattr(model, 'provider', None)!r}, model={getattr(model, 'model', None)!r}; "
                f"set `{field_name}` to a non-empty string"
            )
