"""The result of one tool call as the scheduler commits it (loop-spec 3.4).

A `ToolOutcome` is what becomes a `tool/result`: `content` is the model-visible blocks,
`error` is the `{name, code}` info persisted only when the failure has a code (loop-spec
10.21), `meta` is optional presentation JSON. The canonical tool value is never persisted.
`additional_contexts` and `concludes_turn` steer the loop and are never persisted in the
`tool/result` either: the contexts become `next-step` inbox splices right after the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from ..log._json import JsonValue
from ..log._messages import ContentBlock, Message
from ..log._vocabulary import (
    ABORTED_BEFORE_DISPATCH_ERROR,
    ABORTED_BEFORE_DISPATCH_TEXT,
    ABORTED_ERROR,
    ABORTED_TEXT,
    TOOL_TIMEOUT,
)

TOOL_TIMEOUT_ERROR: Final = {"name": "ToolTimeoutError", "code": TOOL_TIMEOUT}
"""Error info of a call whose declared `timeout_seconds` expired (loop-spec 3.5)."""

INVALID_TOOL_OUTPUT: Final = "INVALID_TOOL_OUTPUT"
INVALID_TOOL_OUTPUT_ERROR: Final = {"name": "ToolOutputError", "code": INVALID_TOOL_OUTPUT}
"""Error info of a result that is not lossless JSON content (loop-spec 3.5)."""

TOOL_ERROR_NAME: Final = "ToolError"
"""The error name recorded for a `duraloop.errors.ToolError` raised by a tool body."""


def text_block(text: str) -> ContentBlock:
    """Return a text content block.

    Args:
        text: the visible text.

    Returns:
        `{"type": "text", "text": text}`.
    """
    return {"type": "text", "text": text}


@dataclass(frozen=True)
class ToolOutcome:
    """The answer to one tool call: success or failure, as content blocks (loop-spec 3.4).

    Args:
        is_error: whether the call failed.
        content: the model-visible content blocks, usually one text block.
        error: `{"name": ..., "code": ...}` when the failure has a code; None for a success
            and for failures without a code (denials, hook failures, plain exceptions).
        meta: optional presentation JSON, never sent to the model.
        additional_contexts: user messages the scheduler hands to the loop right after
            committing this result (loop-spec 3.4, 4.2); the loop queues them in `next-step`,
            so they enter at the next step, after `step/start` (B11). Not persisted in the
            `tool/result`.
        concludes_turn: for a success, end the turn after this step without asking the
            model again, unless `next-step` holds messages then (B16-B18). Ignored on a
            failure. Not persisted in the `tool/result`.
    """

    is_error: bool
    content: list[ContentBlock]
    error: dict[str, str] | None = None
    meta: JsonValue | None = field(default=None)
    additional_contexts: tuple[Message, ...] = ()
    concludes_turn: bool = False

    @classmethod
    def ok(cls, content: str | list[ContentBlock], *, meta: JsonValue | None = None) -> ToolOutcome:
        """Build a success.

        Args:
            content: plain text (becomes one text block) or a list of content blocks.
            meta: optional presentation JSON.

        Returns:
            A success outcome with a copy of the blocks.
        """
        blocks = [text_block(content)] if isinstance(content, str) else list(content)
        return cls(is_error=False, content=blocks, meta=meta)

    @classmethod
    def failure(
        cls,
        message: str,
        *,
        error: dict[str, str] | None = None,
        meta: JsonValue | None = None,
    ) -> ToolOutcome:
        """Build a failure whose content is `Error: <message>`.

        Args:
            message: what went wrong, without the `Error: ` prefix.
            error: the `{name, code}` info, or None for a failure without a code.
            meta: optional presentation JSON.

        Returns:
            A failure outcome with one text block.
        """
        info = None if error is None else dict(error)
        return cls(is_error=True, content=[text_block(f"Error: {message}")], error=info, meta=meta)

    @classmethod
    def cancelled(cls, *, body_invoked: bool) -> ToolOutcome:
        """Build the failure that replaces a success won by cancellation (loop-spec 3.5).

        Args:
            body_invoked: True gives `ABORTED` ("tool call aborted"); False gives
                `ABORTED_BEFORE_DISPATCH` ("tool call aborted before dispatch").

        Returns:
            A failure outcome with the canonical text and error info.
        """
        if body_invoked:
            return cls(is_error=True, content=[text_block(ABORTED_TEXT)], error=dict(ABORTED_ERROR))
        return cls(
            is_error=True,
            content=[text_block(ABORTED_BEFORE_DISPATCH_TEXT)],
            error=dict(ABORTED_BEFORE_DISPATCH_ERROR),
        )

    @property
    def text(self) -> str:
        """The concatenated text of the text blocks (other block types are skipped)."""
        return "".join(
            block["text"]
            for block in self.content
            if block.get("type") == "text" and isinstance(block.get("text"), str)
        )
