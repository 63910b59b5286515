"""Chat Completions failures as `LlmError`s: the one boundary for the `openai` SDK's errors.

`map_openai_errors` wraps the POST, as httpx maps transport errors: the SDK's typed status
errors (the error body parsed, `APIStatusError` per status), its timeout and connection
errors and any other `OpenAIError` leave it as `LlmError`s, raised `from` the original
(docs/providers.md#errors, #error-codes, #chat-completions-wire). `map_read_errors` wraps the
reading of the streamed body, whose failures are `httpx2`'s own (`TIMEOUT` for its read timeout,
else `TRANSPORT`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

from ...errors import LlmError
from ...log.vocabulary import TIMEOUT, TRANSPORT, UNKNOWN
from .._errors import code_for_status, parse_retry_after_ms

if TYPE_CHECKING:
    import openai

_REQUEST_ID_HEADERS: Final = ("x-request-id", "x-deepseek-request-id")


@contextmanager
def map_openai_errors(label: str, base_url: str) -> Iterator[None]:
    """Turn the `openai` SDK's errors raised in the block (the POST) into `LlmError`s.

    Other exceptions pass unchanged. Call it only once the SDK is imported (the adapter's
    constructor imports it).

    Args:
        label: the provider's display name (`OpenAI`, `DeepSeek`), for messages.
        base_url: the API root, for messages.

    Yields:
        Nothing; the block runs inside.

    Raises:
        LlmError: raised `from` the SDK error: an HTTP error status by `code_for_status`
            with `status`, Retry-After in ms and the request id header; `TIMEOUT`,
            `TRANSPORT` (its causes described) or `UNKNOWN` for any other SDK error.
    """
    import openai  # loaded by the adapter's __init__ already: a sys.modules lookup

    where = f"{label} API request to {base_url}"
    try:
        yield
    except openai.APIStatusError as exc:
        raise _status_error(exc, label) from exc
    except openai.APITimeoutError as exc:
        raise LlmError(f"{where} timed out", code=TIMEOUT) from exc
    except openai.APIConnectionError as exc:
        raise LlmError(f"{where} failed: {describe(exc)}", code=TRANSPORT) from exc
    except openai.OpenAIError as exc:
        raise LlmError(f"{where} failed: {describe(exc)}", code=UNKNOWN) from exc


@contextmanager
def map_read_errors(label: str, base_url: str, request_id: str | None) -> Iterator[None]:
    """Turn `httpx2` errors raised while reading a streamed body into `LlmError`s.

    Args:
        label: the provider's display name, for messages.
        base_url: the API root, for messages.
        request_id: the response's request id, kept on the error.

    Yields:
        Nothing; the block runs inside (inside an async generator too: no await of its own).

    Raises:
        LlmError: `TIMEOUT` for the read timeout (no data for `timeout_seconds`),
            `TRANSPORT` for any other `httpx2.HTTPError`, raised `from` it.
    """
    import httpx2  # loaded by the adapter's __init__ already: a sys.modules lookup

    try:
        yield
    except httpx2.TimeoutException as exc:
        raise LlmError(
            f"{label} API stream from {base_url} timed out: no data for the "
            "configured timeout_seconds",
            code=TIMEOUT,
            request_id=request_id,
        ) from exc
    except httpx2.HTTPError as exc:
        raise LlmError(
            f"{label} API stream from {base_url} failed: {describe(exc)}",
            code=TRANSPORT,
            request_id=request_id,
        ) from exc


def _status_error(exc: openai.APIStatusError, label: str) -> LlmError:
    body = exc.body if isinstance(exc.body, dict) else {}
    detail = " ".join(str(body.get(key) or "") for key in ("code", "type", "message"))
    if not body and isinstance(exc.body, str):
        detail = exc.body
    message = body.get("message")
    prefix = f"{label} API error (HTTP {exc.status_code})"
    return LlmError(
        f"{prefix}: {message}" if isinstance(message, str) and message else prefix,
        code=code_for_status(exc.status_code, detail),
        status=exc.status_code,
        provider_retry_after_ms=parse_retry_after_ms(exc.response.headers.get("retry-after")),
        request_id=request_id_of(exc.response.headers),
    )


def request_id_of(headers: Mapping[str, str]) -> str | None:
    """Return the request id header: `x-request-id`, else `x-deepseek-request-id` (2.1).

    Args:
        headers: the response headers.

    Returns:
        The first non-empty one, or None.
    """
    for name in _REQUEST_ID_HEADERS:
        value = headers.get(name)
        if value:
            return value
    return None


def describe(exc: BaseException) -> str:
    """Render an exception and its causes: `APIConnectionError <- ReadError <- OSError: ...`.

    Args:
        exc: the exception.

    Returns:
        Up to four links of its `__cause__`/`__context__` chain, `Type: text` each.
    """
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(parts) < 4:
        seen.add(id(current))
        text = str(current)
        parts.append(f"{type(current).__name__}: {text}" if text else type(current).__name__)
        current = current.__cause__ or current.__context__
    return " <- ".join(parts)
