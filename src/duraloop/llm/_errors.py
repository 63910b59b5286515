"""Provider failure classification: status codes, detail text, failures.

See docs/providers.md#errors, #error-codes.

`LlmError` itself lives in `duraloop.errors`; this module holds the shared classifiers every
adapter uses so a status or wording maps to the same stable code everywhere. The codes
themselves are wire names, defined in `duraloop.log.vocabulary`.
"""

from __future__ import annotations

import email.utils
import re
import time
from typing import Final

from ..log.vocabulary import (
    ABORTED,
    AUTH,
    CONTENT_FILTER,
    CONTEXT_WINDOW_EXCEEDED,
    EMPTY_RESPONSE,
    INSUFFICIENT_SYSTEM_RESOURCE,
    INVALID_REQUEST,
    MALFORMED_RESPONSE,
    PAIRING_VIOLATION,
    QUOTA,
    RATE_LIMIT,
    REFUSAL,
    REPLAY_EXHAUSTED,
    SCRIPT_EXHAUSTED,
    SERVER,
    STREAM_CLOSED,
    TIMEOUT,
    TRANSPORT,
    UNKNOWN,
    UNSUPPORTED_CONTENT,
    UNSUPPORTED_OPTION,
)

LLM_ERROR_CODES: Final = {
    RATE_LIMIT: "HTTP 429 not about quota; retried by default",
    SERVER: "HTTP 5xx; retried by default",
    TIMEOUT: "the stream went idle past its timeout; retried by default",
    TRANSPORT: "the connection failed or broke mid-stream; retried by default",
    EMPTY_RESPONSE: "a finished response with no content; retried by default",
    AUTH: "HTTP 401/403: the key is missing, wrong or not allowed",
    QUOTA: "the quota, balance or credits ran out",
    INVALID_REQUEST: "HTTP 400 (not about context) or 413",
    CONTEXT_WINDOW_EXCEEDED: "the request is longer than the model's context window",
    STREAM_CLOSED: "the stream ended without its end marker",
    MALFORMED_RESPONSE: "the provider sent something that is not its protocol",
    ABORTED: "the request was cancelled",
    REFUSAL: "the model refused to answer",
    CONTENT_FILTER: "the provider's content filter stopped the answer",
    INSUFFICIENT_SYSTEM_RESOURCE: "the provider stopped for lack of resources",
    UNSUPPORTED_CONTENT: "the history holds content the provider cannot take",
    UNSUPPORTED_OPTION: "a request option the provider does not support",
    PAIRING_VIOLATION: "the request would break a provider's tool-call pairing rule",
    SCRIPT_EXHAUSTED: "the scripted model has no response left",
    REPLAY_EXHAUSTED: "the replay model has no recorded answer left",
    UNKNOWN: "any other failure",
}
"""Every `LlmError` code duraloop raises, with what it means (docs/providers.md#error-codes);
besides these, `HTTP_<status>` for any other HTTP error status (`HTTP_404`)."""

_HTTP_CODE: Final = re.compile(r"HTTP_[1-5][0-9][0-9]")


def is_llm_error_code(code: str) -> bool:
    """Return whether `code` is one of the `LlmError` codes (`LLM_ERROR_CODES` or `HTTP_<status>`).

    Args:
        code: the code to check.

    Returns:
        True for a code duraloop's adapters can raise, so the retry policy treats it as they do.
    """
    return code in LLM_ERROR_CODES or _HTTP_CODE.fullmatch(code) is not None


_CONTEXT_PATTERNS: Final = re.compile(
    "|".join(
        (
            r"context[_ ]length[_ ]exceeded",
            r"context[_ ]window[_ ]exceeded",
            r"context[_ ]length[_ ]overflow",
            r"maximum (?:allowed |supported )?context (?:length|window)",
            r"(?:request|prompt|input|messages?) (?:is )?too (?:large|long) for (?:this|the) "
            r"(?:model'?s? )?context(?: window)?",
            r"(?:input|prompt|request) (?:is )?too long for the model",
            r"input length and `?max_tokens`? exceed context limit",  # Anthropic 400
            r"prompt is too long",  # Anthropic 400: "prompt is too long: N tokens > M maximum"
            r"(?:input|prompt|request).{0,80}(?:exceeds|overflows|is larger than).{0,40}"
            r"(?:the )?model'?s? context(?: length| window)?",
        )
    ),
    re.IGNORECASE,
)

_QUOTA_PATTERNS: Final = re.compile(
    "|".join(
        (
            r"insufficient (?:quota|balance|credits?)",
            r"(?:quota|usage limit) (?:exceeded|exhausted|reached)",
            r"exceed(?:ed)? (?:your |the )?(?:current )?quota",
            r"(?:balance|credits?) (?:exhausted|depleted)",
            r"out of (?:credits?|budget)",
            r"credit balance is too low",  # Anthropic 400
        )
    ),
    re.IGNORECASE,
)


def is_context_window_exceeded(detail: str) -> bool:
    """Return whether provider error text says the request overflowed the context window.

    Args:
        detail: the provider's code, type and message joined with spaces.

    Returns:
        True when the wording matches the dsh context classifier (docs/providers.md#errors).
    """
    return _CONTEXT_PATTERNS.search(detail) is not None


def is_quota_exceeded(detail: str) -> bool:
    """Return whether provider error text says the quota, balance or credits ran out.

    Args:
        detail: the provider's code, type and message joined with spaces.

    Returns:
        True when the wording matches the dsh quota classifier (docs/providers.md#errors).
    """
    return _QUOTA_PATTERNS.search(detail) is not None


def code_for_status(status: int, detail: str = "") -> str:
    """Map an HTTP error status and its detail text to a stable error code.

    Order (docs/providers.md#chat-completions-wire): 401/403 `AUTH`; 413 `INVALID_REQUEST`; quota
        wording `QUOTA` (any
    status); 429 `RATE_LIMIT`; 400 with context wording `CONTEXT_WINDOW_EXCEEDED`; 400
    `INVALID_REQUEST`; >= 500 `SERVER`; anything else `HTTP_<status>`.

    Args:
        status: the HTTP status code.
        detail: the provider's error code, type and message joined, for the classifiers.

    Returns:
        The code, e.g. `RATE_LIMIT` or `HTTP_404`.
    """
    if status in (401, 403):
        return AUTH
    if status == 413:
        return INVALID_REQUEST
    if detail and is_quota_exceeded(detail):
        return QUOTA
    if status == 429:
        return RATE_LIMIT
    if status == 400:
        return CONTEXT_WINDOW_EXCEEDED if is_context_window_exceeded(detail) else INVALID_REQUEST
    if status >= 500:
        return SERVER
    return f"HTTP_{status}"


def parse_retry_after_ms(value: str | None, *, now_seconds: float | None = None) -> int | None:
    """Parse a `Retry-After` header into a positive delay.

    Args:
        value: the header value: integer seconds or an HTTP date; None when absent.
        now_seconds: the current epoch time in seconds, for HTTP dates; defaults to now.

    Returns:
        The delay in milliseconds, or None when absent, invalid, zero or in the past.
    """
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():  # str.isdigit alone accepts '²', which int() refuses
        delay_ms = int(text) * 1000
        return delay_ms if delay_ms > 0 else None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None  # an unparseable hint is no hint (docs/providers.md#retry-policy)
    now = time.time() if now_seconds is None else now_seconds
    delay_ms = int((when.timestamp() - now) * 1000)
    return delay_ms if delay_ms > 0 else None
