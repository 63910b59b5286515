"""The failure record `LlmFailure`: every way to one.

See docs/log.md#messages-and-content-blocks, docs/providers.md#errors.

`LlmFailure` is the JSON object a failed model request leaves in the log: in a `finish`
chunk's `failure`, in `llm/retry.failure`, and in `turn/end.reason.error`. Its shape is
`{message, code, status?, providerRetryAfterMs?, requestId?}`, and `LlmError` (in
`duraloop.errors`, the bottom layer, so every package can raise it) holds it as fields:
`LlmError.failure()` is the one place that builds the record, `LlmError.from_failure()` the
one that reads it back, and `LlmError.RETRYABLE_CODES` the one spelling of the codes
retried by default.

This module turns whatever was raised into a record, always through `LlmError`, so the
record's keys are spelled once: an adapter attempt's failure (`failure_from_exception`,
where a `PairingError` is `PAIRING_VIOLATION`) and a turn's failure (`turn_failure`, which
keeps the exception chain). The provider SDKs' errors become `LlmError`s before they get
here, each at one boundary of its dialect (`map_openai_errors`, `map_anthropic_errors`).
"""

from __future__ import annotations

import traceback

from ..errors import LlmError, PairingError
from ..log import JsonObject
from ..log.vocabulary import PAIRING_VIOLATION, UNKNOWN


def unknown_failure(message: str) -> JsonObject:
    """Return the record of a failure nothing classified.

    Args:
        message: what failed.

    Returns:
        `{"message": message, "code": "UNKNOWN"}`.
    """
    return LlmError(message, code=UNKNOWN).failure()


def failure_from_exception(exc: BaseException) -> JsonObject:
    """Normalise a raised value into an `LlmFailure` JSON object (docs/providers.md#errors).

    Args:
        exc: the exception raised by an adapter.

    Returns:
        `exc.failure()` for an `LlmError`; `{"message", "code": "PAIRING_VIOLATION"}` for a
        `PairingError` (a `WirePairingError` raised by an adapter's pre-send check: nothing
        was sent, and since the same history gives the same payload, the code is outside
        the retryable set); otherwise `{"message", "code": "UNKNOWN"}` where the message is
        the exception text (or its type name when the text is empty). Third party codes are
        not trusted as taxonomy.
    """
    if isinstance(exc, LlmError):
        return exc.failure()
    if isinstance(exc, PairingError):
        return LlmError(str(exc), code=PAIRING_VIOLATION).failure()
    return unknown_failure(str(exc) or f"LLM adapter failed ({type(exc).__name__})")


def turn_failure(exc: BaseException) -> JsonObject:
    """Return the `LlmFailure` JSON for a turn's failure (docs/loop.md#vocabulary: errorChain).

    Args:
        exc: what failed the turn.

    Returns:
        An `LlmError`'s failure verbatim, else `{message: the exception chain, code: UNKNOWN}`
        (each link `Type: text`, joined by ` <- ` along `__cause__`).
    """
    if isinstance(exc, LlmError):
        return exc.failure()
    chain = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    cause = exc.__cause__
    while cause is not None:
        chain += " <- " + "".join(traceback.format_exception_only(type(cause), cause)).strip()
        cause = cause.__cause__
    return unknown_failure(chain)
