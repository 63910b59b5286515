"""The result of one tool call as the scheduler commits it (docs/scheduler.md#results).

A `ToolOutcome` is what becomes a `tool/result`: `content` is the model-visible blocks,
`error` is the `{name, code}` info persisted only when the failure has a code
(docs/scheduler.md#results), `meta` is optional presentation JSON. The canonical tool value is never
persisted. `additional_contexts` and `concludes_turn` steer the loop and are never persisted in the
`tool/result` either: the contexts become `next-step` inbox splices right after the result.

Every outcome is capped before it is committed (`capped`): one cap for every tool, built-in or
not, so a tool returning 10 MB neither bloats the log nor rides along in every later request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Final

from pydantic import BaseModel

from ..errors import EventRejectedError
from ..log import ContentBlock, JsonValue, Message, lossless_copy, well_formed_json
from ..log.vocabulary import (
    ABORTED_AFTER_COMPLETION_TEXT,
    ABORTED_BEFORE_DISPATCH_ERROR,
    ABORTED_BEFORE_DISPATCH_TEXT,
    ABORTED_ERROR,
    ABORTED_TEXT,
    BLOCK_TEXT,
    INVALID_TOOL_OUTPUT_ERROR,
    NOT_INTERRUPTED_TEXT,
    OUTCOME_UNKNOWN_ERROR,
)

DEFAULT_MAX_OUTPUT_BYTES: Final = 256 * 1024
"""The default cap on one tool result's content, in bytes (`LoopConfig.max_tool_output_bytes`)."""

OUTPUT_NOTE_ROOM_BYTES: Final = 1024
"""How far past the cap a result may run for its notes, in bytes: a built-in that cuts its own
output at the cap keeps its notes (`[exit code: n]`, where to read on) uncut."""

MIN_MAX_OUTPUT_BYTES: Final = 256
"""The smallest output cap accepted, in bytes: room for the truncation note and some output."""


def text_block(text: str) -> ContentBlock:
    """Return a text content block.

    Args:
        text: the visible text.

    Returns:
        `{"type": "text", "text": text}`.
    """
    return {"type": BLOCK_TEXT, "text": text}


@dataclass(frozen=True)
class ToolOutcome:
    """The answer to one tool call: success or failure, as content blocks.

    See docs/scheduler.md#results.

    Args:
        is_error: whether the call failed.
        content: the model-visible content blocks, usually one text block.
        error: `{"name": ..., "code": ...}` when the failure has a code; None for a success
            and for failures without a code (denials, hook failures, plain exceptions).
        meta: optional presentation JSON, never sent to the model.
        additional_contexts: user messages the scheduler hands to the loop right after
            committing this result (docs/scheduler.md#results, #running-a-group); the loop queues
            them in `next-step`, so they enter at the next step, after `step/start` (B11). Not
            persisted in the `tool/result`.
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
        """Build the failure that replaces a success won by cancellation.

        See docs/scheduler.md#tool-error-codes.

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

    @classmethod
    def aborted_after_completion(cls, completed: ToolOutcome) -> ToolOutcome:
        """Build the `ABORTED` failure replacing a success the body returned despite a cancel.

        The code stays `ABORTED` (docs/scheduler.md#tool-error-codes), but the text says the body
        ran to completion and the tool's own content follows it, so the model knows the effect
        happened.

        Args:
            completed: the success the body returned.

        Returns:
            A failure with `ABORTED_AFTER_COMPLETION_TEXT` then the success's content blocks;
            its meta and additional contexts are kept.
        """
        content = list(completed.content)
        if (
            content
            and content[0].get("type") == BLOCK_TEXT
            and isinstance(content[0].get(BLOCK_TEXT), str)
        ):
            first = text_block(f"{ABORTED_AFTER_COMPLETION_TEXT}\n{content[0]['text']}")
            content = [first, *content[1:]]
        else:
            content = [text_block(ABORTED_AFTER_COMPLETION_TEXT), *content]
        return cls(
            is_error=True,
            content=content,
            error=dict(ABORTED_ERROR),
            meta=completed.meta,
            additional_contexts=completed.additional_contexts,
        )

    @classmethod
    def not_interrupted(cls, *, grace_seconds: float) -> ToolOutcome:
        """Build the answer for a body still running `grace_seconds` after cancellation.

        The body was invoked and has not settled, so its outcome is unknown (Law 5):
        `TOOL_OUTCOME_UNKNOWN`, with a text saying the body could not be interrupted.

        Args:
            grace_seconds: how long the loop waited after the cancellation, in seconds.

        Returns:
            A failure with `NOT_INTERRUPTED_TEXT` and the `TOOL_OUTCOME_UNKNOWN` error info.
        """
        text = NOT_INTERRUPTED_TEXT.format(grace_seconds=grace_seconds)
        return cls(is_error=True, content=[text_block(text)], error=dict(OUTCOME_UNKNOWN_ERROR))

    @property
    def text(self) -> str:
        """The concatenated text of the text blocks (other block types are skipped)."""
        return "".join(
            block["text"]
            for block in self.content
            if block.get("type") == BLOCK_TEXT and isinstance(block.get(BLOCK_TEXT), str)
        )


NONE_RESULT_TEXT: Final = "ok"
"""The text a body returning None produces: the call succeeded with nothing to show."""


def outcome_of_value(value: object) -> ToolOutcome:
    """Turn a body's return value into an outcome (see `ToolPipeline.dispatch`).

    Args:
        value: a `ToolOutcome`, a `str`, None, a pydantic model or a lossless JSON value.

    Returns:
        The outcome; `INVALID_TOOL_OUTPUT` if the value is not lossless JSON.
    """
    if isinstance(value, ToolOutcome):
        return value
    if isinstance(value, str):
        return ToolOutcome.ok(value)
    if value is None:
        return ToolOutcome.ok(NONE_RESULT_TEXT)
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    try:
        data = lossless_copy(well_formed_json(value), what="tool return value")
    except EventRejectedError as exc:
        return ToolOutcome.failure(str(exc), error=INVALID_TOOL_OUTPUT_ERROR)
    return ToolOutcome.ok(json.dumps(data, ensure_ascii=False, separators=(",", ":")))


def checked_outcome(outcome: ToolOutcome) -> ToolOutcome:
    r"""Return `outcome` if its content and meta are lossless JSON, else INVALID_TOOL_OUTPUT.

    A lone UTF-16 surrogate in any string of the outcome (text a tool decoded from JSON with
    a `\ud83d` escape, say) becomes U+FFFD first, so the result can always be stored.
    """
    if outcome.meta is None and outcome.error is None:
        plain = _plain_text_content(outcome.content)
        if plain is not None:
            return ToolOutcome(
                is_error=outcome.is_error,
                content=plain,
                additional_contexts=tuple(outcome.additional_contexts),
                concludes_turn=outcome.concludes_turn and not outcome.is_error,
            )
    try:
        content = lossless_copy(well_formed_json(outcome.content), what="tool result content")
        meta = lossless_copy(well_formed_json(outcome.meta), what="tool result meta")
    except EventRejectedError as exc:
        return ToolOutcome.failure(str(exc), error=INVALID_TOOL_OUTPUT_ERROR)
    if not isinstance(content, list) or not all(
        isinstance(block, dict) and isinstance(block.get("type"), str) for block in content
    ):
        return ToolOutcome.failure(
            'tool result content must be a list of blocks with a string "type"',
            error=INVALID_TOOL_OUTPUT_ERROR,
        )
    error = None if outcome.error is None else dict(well_formed_json(outcome.error))
    return ToolOutcome(
        is_error=outcome.is_error,
        content=content,
        error=error,
        meta=meta,
        additional_contexts=tuple(outcome.additional_contexts),
        concludes_turn=outcome.concludes_turn and not outcome.is_error,
    )


def _plain_text_content(content: object) -> list[ContentBlock] | None:
    """Copy content that is text blocks only, each `{type: "text", text: str}`; else None.

    The common result (a body's string, "ok") checked without the general walk: the texts are
    made well formed like `well_formed_json` does, and the blocks are copied like
    `lossless_copy` does, so what is checked is exactly what is stored.
    """
    if type(content) is not list:
        return None
    blocks: list[ContentBlock] = []
    for block in content:
        if type(block) is not dict or len(block) != 2 or block.get("type") != BLOCK_TEXT:
            return None
        text = block.get(BLOCK_TEXT)
        if type(text) is not str:
            return None
        blocks.append(text_block(well_formed_json(text)))
    return blocks


def truncation_note(dropped_bytes: int) -> str:
    """Return the note that ends a capped tool output (the same for every tool).

    Args:
        dropped_bytes: how many bytes of output were dropped.

    Returns:
        `[truncated: <n> more bytes of output]`.
    """
    return f"[truncated: {dropped_bytes} more bytes of output]"


def capped(outcome: ToolOutcome, max_bytes: int) -> ToolOutcome:
    """Cut an outcome's content after `max_bytes` bytes and end it with `truncation_note`.

    Text blocks count their UTF-8 bytes, other blocks their compact JSON. Content within
    `max_bytes + OUTPUT_NOTE_ROOM_BYTES` is left alone (the room is for the notes a tool that
    caps itself writes after its output). Longer content keeps text, in block order, up to
    `max_bytes` (never splitting a character), drops the non-text blocks that no longer fit,
    and ends with a note saying how many bytes were dropped.

    Args:
        outcome: a checked outcome (lossless JSON content).
        max_bytes: the cap, in bytes; at least `MIN_MAX_OUTPUT_BYTES`.

    Returns:
        `outcome` itself when it fits, else a copy with the cut content.
    """
    sizes = [_block_bytes(block) for block in outcome.content]
    total = sum(sizes)
    if total <= max_bytes + OUTPUT_NOTE_ROOM_BYTES:
        return outcome
    kept: list[ContentBlock] = []
    kept_bytes = 0
    for block, size in zip(outcome.content, sizes, strict=True):
        room = max_bytes - kept_bytes
        text = block.get(BLOCK_TEXT) if block.get("type") == BLOCK_TEXT else None
        if isinstance(text, str):
            cut = _cut_utf8(text, room)
            if cut:
                kept.append({**block, "text": cut})
                kept_bytes += len(cut.encode("utf-8"))
        elif size <= room:
            kept.append(block)
            kept_bytes += size
    note = truncation_note(total - kept_bytes)
    if kept and kept[-1].get("type") == BLOCK_TEXT:
        kept[-1] = {**kept[-1], "text": f"{kept[-1]['text']}\n{note}"}
    else:
        kept.append(text_block(note))
    return replace(outcome, content=kept)


def _block_bytes(block: ContentBlock) -> int:
    text = block.get(BLOCK_TEXT) if block.get("type") == BLOCK_TEXT else None
    if isinstance(text, str):
        return len(text.encode("utf-8"))
    return len(json.dumps(block, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def _cut_utf8(text: str, max_bytes: int) -> str:
    if max_bytes <= 0:
        return ""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    # "ignore" only drops the one character the byte cut may have split in half.
    return encoded[:max_bytes].decode("utf-8", errors="ignore")
