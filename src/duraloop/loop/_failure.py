"""The loop's two conversions of a failure: an exception to `LlmFailure` JSON, and back.

`failure_of` records what failed a turn in `turn/end` (loop-spec 1: errorChain);
`_llm_error` rebuilds the `LlmError` a failed model attempt's finish carried, so a step
raises what the model reported.
"""

from __future__ import annotations

import traceback
from typing import Any

from ..errors import LlmError
from ..llm._errors import UNKNOWN


def failure_of(exc: BaseException) -> dict[str, Any]:
    """Return the `LlmFailure` JSON for a turn's failure (loop-spec 1: errorChain).

    Args:
        exc: what failed the turn.

    Returns:
        An `LlmError`'s failure verbatim, else `{message: the exception chain, code: UNKNOWN}`.
    """
    if isinstance(exc, LlmError):
        return exc.failure()
    chain = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    cause = exc.__cause__
    while cause is not None:
        chain += " <- " + "".join(traceback.format_exception_only(type(cause), cause)).strip()
        cause = cause.__cause__
    return {"message": chain, "code": "UNKNOWN"}


def _llm_error(failure: dict[str, Any]) -> LlmError:
    """Rebuild the `LlmError` carrying a failed attempt's `LlmFailure` verbatim."""
    return LlmError(
        str(failure.get("message", "model request failed")),
        code=str(failure.get("code", UNKNOWN)),
        status=failure.get("status"),
        provider_retry_after_ms=failure.get("providerRetryAfterMs"),
        request_id=failure.get("requestId"),
    )
