"""The wire servers' context window, and scripted long sessions that outgrow it.

See docs/compaction.md#when and docs/providers.md#offline-testing.

A provider counts a request's tokens itself and refuses one longer than the model's window
with a 400 that duraloop reads as `CONTEXT_WINDOW_EXCEEDED`. The wire servers do the same
when given a `context_window`: `request_tokens` is their own count, independent of
duraloop's estimator (one token per 4 characters of the request's `messages`, `system` and
`tools` as JSON, rounded up: coarser than a tokenizer, and larger than dsh's estimate for
the same text, so a request duraloop sent under its threshold can still be refused, as with
a real provider), and the overflow bodies are the providers' own wording.

`LongSession` is a responder for a session of `steps` tool steps: each agent request is
answered by one call of the `fetch` tool (ids `call_<n>`), then by a final text; a summary
request (the one carrying the summarizer's instruction) is answered by a checkpoint text. The
usage it reports is the server's own count, so duraloop's estimate is calibrated by it as by a
real provider's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from duraloop.loop._summarizer import INSTRUCTION

OPENAI_OVERFLOW = (
    "This model's maximum context length is {window} tokens. However, your messages resulted "
    "in {tokens} tokens. Please reduce the length of the messages."
)
"""OpenAI's 400 `context_length_exceeded` message (DeepSeek's has the same opening)."""
ANTHROPIC_OVERFLOW = "prompt is too long: {tokens} tokens > {window} maximum"
"""Anthropic's 400 `invalid_request_error` message."""
SUMMARY_MARK = INSTRUCTION.splitlines()[0][:60]
"""The opening of the summarizer's instruction: marks a summary request."""
CHECKPOINT = "## Current Work\n- reading the pages in order\n## Next Step\n- the next page"


def request_tokens(body: Mapping[str, Any]) -> int:
    """Return the server's token count of a request: JSON characters of its input / 4, up.

    Args:
        body: a Chat Completions or Messages request body.

    Returns:
        ceil(len(json of `messages`, `system`, `tools`) / 4), in tokens.
    """
    parts = [body.get(key) for key in ("messages", "system", "tools")]
    return math.ceil(len(json.dumps(parts, ensure_ascii=False)) / 4)


def chat_overflow_error(tokens: int, window: int) -> dict[str, Any]:
    """The Chat Completions error body for a request of `tokens` over `window`."""
    message = OPENAI_OVERFLOW.format(window=window, tokens=tokens)
    error = {
        "message": message,
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    return {"error": error}


def anthropic_overflow_error(tokens: int, window: int) -> dict[str, Any]:
    """Anthropic's error envelope for a request of `tokens` over `window`."""
    message = ANTHROPIC_OVERFLOW.format(tokens=tokens, window=window)
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def is_summary_request(body: Mapping[str, Any]) -> bool:
    """Whether the last message of `body` carries the summarizer's instruction."""
    messages = body.get("messages") or []
    return bool(messages) and SUMMARY_MARK in json.dumps(messages[-1], ensure_ascii=False)


@dataclass
class LongSession:
    """What the server answers in a long session: `steps` tool steps, then a final text.

    The reply kinds are the caller's (each server builds its own frames): `("call", n)` for
    the n-th call of `fetch` (`{"page": n}`), `("summary", CHECKPOINT)`, `("final", text)`.
    """

    steps: int
    final: str = "read every page"
    made: int = 0
    summaries: int = 0
    tokens: list[int] = field(default_factory=list)
    """The server's count of every request answered, in order (summary requests included)."""

    def next(self, body: Mapping[str, Any]) -> tuple[str, int | str]:
        """Return the reply kind for `body` and count it."""
        self.tokens.append(request_tokens(body))
        if is_summary_request(body):
            self.summaries += 1
            return ("summary", CHECKPOINT)
        if self.made < self.steps:
            self.made += 1
            return ("call", self.made - 1)
        return ("final", self.final)
