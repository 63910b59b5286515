"""Long scripted sessions through the wire servers: responders and the tool they call.

See docs/compaction.md#when. `chat_responder` and `anthropic_responder` turn a `LongSession`'s
reply kinds into each API's stream: one `fetch` call per step (DeepSeek's with streamed
reasoning, which the server checks is passed back), a checkpoint text for a summary request,
a final text; every reply reports the server's own token count of the request as its usage.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from duraloop.tools import Tool, ToolContext

from ._wire_anthropic import Event, message_end, message_start, text_block, tool_block
from ._wire_chat import Dialect, Frame, chunk_event, tool_delta, usage_event
from ._wire_window import LongSession, request_tokens

OUTPUT_TOKENS = 20


def chat_responder(script: LongSession, dialect: Dialect) -> Callable[[Any], Sequence[Frame]]:
    """Answer Chat Completions requests from `script` (reasoning streamed for `deepseek`)."""

    def respond(body: Any) -> Sequence[Frame]:
        kind, value = script.next(body)
        usage = usage_event(request_tokens(body), OUTPUT_TOKENS)
        if kind != "call":
            return [chunk_event(content=str(value)), chunk_event(finish_reason="stop"), usage]
        call = tool_delta(
            0, call_id=f"call_{value}", name="fetch", arguments=json.dumps({"page": value})
        )
        frames: list[Frame] = []
        if dialect == "deepseek":
            frames.append(chunk_event(reasoning=f"Page {value} is next."))
        frames += [chunk_event(tool_calls=[call]), chunk_event(finish_reason="tool_calls"), usage]
        return frames

    return respond


def anthropic_responder(script: LongSession) -> Callable[[dict[str, Any]], list[Event]]:
    """Answer Messages requests from `script`."""

    def respond(body: dict[str, Any]) -> list[Event]:
        kind, value = script.next(body)
        start = message_start(input_tokens=request_tokens(body))
        if kind != "call":
            return [start, *text_block(0, str(value)), *message_end("end_turn")]
        arguments = json.dumps({"page": value})
        block = tool_block(0, f"call_{value}", "fetch", "", arguments)
        return [start, *block, *message_end("tool_use")]

    return respond


def fetch_tool(size: int) -> Tool:
    """A tool `fetch(page)` whose every result is `size` characters of text."""

    async def body(args: Any, ctx: ToolContext) -> str:
        head = f"page {args['page']}: "
        return (head + "lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]

    return Tool(
        name="fetch",
        description="Return one page of a large document.",
        parameters={
            "type": "object",
            "properties": {"page": {"type": "integer"}},
            "required": ["page"],
        },
        validator=lambda arguments: arguments,
        body=body,
        parallel=True,
    )
