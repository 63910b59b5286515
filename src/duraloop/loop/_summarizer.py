"""The summarizer: the model request that condenses a compacted span.

See docs/compaction.md#the-summary.

`ModelSummarizer` replays the span's messages (after the latest request's system prompt and
tools, so a provider's prefix cache is reused) and asks for a checkpoint in fixed Markdown
sections (compaction-spec 8). One attempt, through the same adapter as the loop's steps; what
it sent and got is recorded in `compaction/summary` (provider, model, usage, raw output).
A custom summarizer is any `Summarizer`.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import CompactionError
from ..llm import (
    COMPACTION_PURPOSE,
    BlockAssembler,
    Model,
    ModelRequest,
    ToolSchema,
    stream_chunks,
)
from ..log import ContentBlock, Message, new_message_id
from ..log.vocabulary import (
    BLOCK_IMAGE,
    BLOCK_TEXT,
    FINISH_ABORTED,
    FINISH_ERROR,
    FINISH_MAX_TOKENS,
    SOURCE_PLUGIN,
    SUMMARIZER_PLUGIN,
    UNKNOWN,
    UNSUPPORTED_CONTENT,
)

INSTRUCTION = """\
You are now the compaction engine of this agent session. Do not continue the conversation \
and do not call any tool. Write a checkpoint of the conversation above that lets the agent \
continue the work without it. Output exactly these Markdown sections, in this order, as terse \
bullets ("(none)" when a section is empty):

## Primary Request and Intent
## Key Technical Concepts
## Files and Code
## Errors and Fixes
## Pending Jobs
## Current Work
## Next Step
## Critical Context

Rules: concise English; keep exact identifiers, file paths, commands, error messages and \
numbers; keep every correction or preference the user stated; do not mention that this is a \
summary; if the conversation begins with an earlier <compacted-summary> block, merge its \
content into these sections instead of summarizing it again."""
"""The instruction ending a summary request (our words for dsh's sections, compaction-spec 8)."""


@dataclass(frozen=True)
class SummaryRequest:
    """What a summarizer condenses.

    Args:
        messages: the compacted span's derived messages, oldest first.
        system: the latest request's system prompt, or None.
        tools: the latest request's tools (the model must not call them).
        max_tokens: the summary's output cap.
        session_id: the session's id.
    """

    messages: Sequence[Message]
    system: str | None
    tools: Sequence[ToolSchema]
    max_tokens: int
    session_id: str


@dataclass(frozen=True)
class Summary:
    """A summarizer's answer, as `compaction/summary` records it.

    Args:
        summary: the checkpoint's text blocks.
        provider: the route the summary request went to.
        model: the model that answered.
        raw_output: every block the model returned (reasoning included), or None.
        usage: the provider's `TokenUsage` for the request, or None.
        max_tokens: the output cap sent, or None.
        llm_stream_call: whether it cost exactly one model request of this session (the
            default summarizer's; it is then counted in usage and budgets).
    """

    summary: list[ContentBlock]
    provider: str
    model: str
    raw_output: list[ContentBlock] | None = None
    usage: dict[str, Any] | None = None
    max_tokens: int | None = None
    llm_stream_call: bool = False


class Summarizer(Protocol):
    """Condenses a span of the conversation into a checkpoint's text."""

    async def __call__(self, request: SummaryRequest) -> Summary:
        """Return the summary of `request.messages`.

        Raises:
            Exception: anything; the compaction then closes with the error recorded and
                the surface unchanged.
        """
        ...


class ModelSummarizer:
    """The default summarizer: one request to `model` through its adapter.

    Args:
        model: the model that writes the summary (the loop's, unless configured).
    """

    def __init__(self, model: Model) -> None:
        self.model = model

    async def __call__(self, request: SummaryRequest) -> Summary:
        """Request the summary and check it (compaction-spec 8, C24-C27).

        Raises:
            CompactionError: code `summary`, when the request fails (its failure code in
                the message), is cut at the token cap, returns an image, or no text.
        """
        instruction: Message = {
            "id": new_message_id(),
            "role": "user",
            "content": [{"type": BLOCK_TEXT, "text": INSTRUCTION}],
            "source": {"kind": SOURCE_PLUGIN, "plugin": SUMMARIZER_PLUGIN},
        }
        model_request = ModelRequest(
            messages=[*request.messages, instruction],
            system=request.system,
            tools=request.tools,
            max_tokens=request.max_tokens,
            purpose=COMPACTION_PURPOSE,
        )
        assembler = BlockAssembler()
        async with aclosing(stream_chunks(self.model, model_request)) as stream:
            async for chunk in stream:
                assembler.push(chunk)
        finish = assembler.finish
        if finish["kind"] in (FINISH_ERROR, FINISH_ABORTED):
            failure = finish.get("failure") or {}
            raise CompactionError(
                f"the summary request failed: {failure.get('message', 'unknown failure')} "
                f"[{failure.get('code', UNKNOWN)}]",
                code="summary",
            )
        if finish["kind"] == FINISH_MAX_TOKENS:
            raise CompactionError(
                "summarization truncated at the token cap (incomplete checkpoint) [MAX_TOKENS]; "
                "raise CompactionConfig.max_tokens",
                code="summary",
            )
        blocks = assembler.blocks()
        if _has_image(blocks):
            raise CompactionError(
                f"the summary contains an image [{UNSUPPORTED_CONTENT}]", code="summary"
            )
        text = [
            block
            for block in blocks
            if block.get("type") == BLOCK_TEXT and str(block.get("text", "")).strip()
        ]
        if not text:
            raise CompactionError("summarization produced no text summary content", code="summary")
        usage = assembler.usage
        return Summary(
            summary=[{"type": BLOCK_TEXT, "text": block["text"]} for block in text],
            provider=self.model.provider,
            model=self.model.model,
            raw_output=blocks,
            usage=dict(usage) if usage is not None else None,
            max_tokens=request.max_tokens,
            llm_stream_call=True,
        )


def _has_image(value: object) -> bool:
    if isinstance(value, dict):
        return value.get("type") == BLOCK_IMAGE or any(_has_image(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_image(item) for item in value)
    return False
