"""Anthropic failures as `LlmError`s: the one boundary where the SDK's errors are mapped.

`map_anthropic_errors` wraps a request and its stream, as httpx maps transport errors:
the SDK's status, timeout and connection errors, a data line that is not JSON and the
transport's own errors leave it as `LlmError`s (docs/providers.md#errors, #error-codes,
#sdks-and-transport), raised `from` the original. An `event: error` frame after HTTP 200 is
classified by its error type (`stream_error_code`, `error_event`), whether the SDK raised it or the
translator met it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from ...errors import LlmError
from ...log.vocabulary import (
    AUTH,
    CONTEXT_WINDOW_EXCEEDED,
    INVALID_REQUEST,
    MALFORMED_RESPONSE,
    QUOTA,
    RATE_LIMIT,
    SERVER,
    TIMEOUT,
    TRANSPORT,
    UNKNOWN,
)
from .._errors import code_for_status, is_context_window_exceeded, parse_retry_after_ms

if TYPE_CHECKING:
    import anthropic

_ERROR_TYPE_CODES: Final[dict[str, str]] = {
    "overloaded_error": SERVER,
    "api_error": SERVER,
    "timeout_error": SERVER,
    "rate_limit_error": RATE_LIMIT,
    "invalid_request_error": INVALID_REQUEST,
    "request_too_large": INVALID_REQUEST,
    "authentication_error": AUTH,
    "permission_error": AUTH,
    "billing_error": QUOTA,
    "not_found_error": "HTTP_404",
}


def stream_error_code(error_type: str, message: str) -> str:
    """Classify an `event: error` frame (which arrives after HTTP 200) by its error type.

    Mapping (docs/providers.md#sdks-and-transport): `overloaded_error`, `api_error`, `timeout_error`
        -> `SERVER`;
    `rate_limit_error` -> `RATE_LIMIT`; `invalid_request_error` -> `INVALID_REQUEST` (or
    `CONTEXT_WINDOW_EXCEEDED` when the message says the prompt is too long);
    `request_too_large` -> `INVALID_REQUEST`; `authentication_error`, `permission_error` ->
    `AUTH`; `billing_error` -> `QUOTA`; `not_found_error` -> `HTTP_404`. An unknown type is
    taken as a server failure (`SERVER`): the response was accepted, then the server failed.

    Args:
        error_type: the frame's `error.type`.
        message: the frame's `error.message`.

    Returns:
        The stable error code.
    """
    code = _ERROR_TYPE_CODES.get(error_type, SERVER)
    if code == INVALID_REQUEST and is_context_window_exceeded(message):
        return CONTEXT_WINDOW_EXCEEDED
    return code


def error_event(event: Mapping[str, Any]) -> LlmError:
    """Build the `LlmError` for an `event: error` frame `{"type": "error", "error": {...}}`.

    Args:
        event: the frame's data (the SDK's `APIStatusError.body`).

    Returns:
        An `LlmError` coded by `stream_error_code`, with the envelope's `request_id`.
    """
    error = event.get("error")
    error = error if isinstance(error, Mapping) else {}
    error_type = str(error.get("type") or "unknown_error")
    message = str(error.get("message") or "")
    request_id = event.get("request_id")
    return LlmError(
        f"anthropic stream failed with {error_type}: {message or '(no message)'}",
        code=stream_error_code(error_type, message),
        request_id=request_id if isinstance(request_id, str) and request_id else None,
    )


@contextmanager
def map_anthropic_errors(provider: str, base_url: str) -> Iterator[None]:
    """Turn the SDK's and the transport's errors raised in the block into `LlmError`s.

    Use it around the request and the reading of its stream (inside an async generator
    too: it has no await of its own). Other exceptions, `LlmError`s and cancellation
    included, pass unchanged. Call it only once the SDK is imported (the adapter's
    constructor imports it).

    Args:
        provider: the route name (`anthropic`), for messages.
        base_url: the API root, for messages.

    Yields:
        Nothing; the block runs inside.

    Raises:
        LlmError: raised `from` the original: HTTP status codes by `code_for_status` (529
            overloaded is `SERVER`), with `status`, `request_id` and Retry-After in ms; an
            `event: error` frame by its error type; `TIMEOUT` and `TRANSPORT` for the SDK's
            and the transport's timeouts and connection failures; `MALFORMED_RESPONSE`
            for an SSE data line that is not JSON; `UNKNOWN` for any other SDK error.
    """
    import anthropic  # loaded by the adapter's __init__ already: a sys.modules lookup
    import httpx2

    try:
        yield
    except anthropic.AnthropicError as exc:
        raise _sdk_error(exc, provider, base_url) from exc
    except json.JSONDecodeError as exc:
        raise LlmError(
            f"{provider} sent an SSE data line that is not JSON: {exc}",
            code=MALFORMED_RESPONSE,
        ) from exc
    except httpx2.TimeoutException as exc:
        raise LlmError(f"{provider} stream from {base_url} timed out", code=TIMEOUT) from exc
    except httpx2.RequestError as exc:
        raise LlmError(
            f"{provider} stream from {base_url} failed: {exc!r}", code=TRANSPORT
        ) from exc


def _sdk_error(exc: anthropic.AnthropicError, provider: str, base_url: str) -> LlmError:
    import anthropic  # loaded by the adapter's __init__ already: a sys.modules lookup

    where = f"{provider} API request to {base_url}"
    if isinstance(exc, anthropic.APITimeoutError):
        return LlmError(f"{where} timed out", code=TIMEOUT)
    if isinstance(exc, anthropic.APIConnectionError):
        return LlmError(f"{where} failed: {exc}", code=TRANSPORT)
    if isinstance(exc, anthropic.APIStatusError):
        body = exc.body if isinstance(exc.body, Mapping) else {}
        if exc.status_code < 400:  # an `event: error` frame after HTTP 200
            if not body and isinstance(exc.body, str):  # its data was not JSON
                body = {"error": {"type": "unknown_error", "message": exc.body}}
            error = error_event(body)
            if error.request_id is None and exc.request_id:
                error.request_id = exc.request_id
            return error
        return _status_error(exc, body, provider)
    return LlmError(f"{where} failed: {exc}", code=UNKNOWN)


def _status_error(
    exc: anthropic.APIStatusError, body: Mapping[str, object], provider: str
) -> LlmError:
    error = body.get("error")
    error = error if isinstance(error, Mapping) else {}
    message = str(error.get("message") or "")
    detail = f"{error.get('type') or ''} {message}"
    # Anthropic's own wordings ("prompt is too long", "credit balance is too low") are
    # in the shared classifiers, so the status table maps them (docs/providers.md#errors).
    code = code_for_status(exc.status_code, detail)
    return LlmError(
        message or f"{provider} API error (HTTP {exc.status_code})",
        code=code,
        status=exc.status_code,
        provider_retry_after_ms=parse_retry_after_ms(exc.response.headers.get("retry-after")),
        request_id=exc.request_id or None,
    )
