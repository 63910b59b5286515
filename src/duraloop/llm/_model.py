"""The model seam: tool schemas, the request, the `Model` protocol and the safe stream.

An adapter implements `Model.stream` as an async generator of stream chunks and may fail
either way docs/providers.md#stream-contract allows: raise, or end with an error finish. Consumers
call `stream_chunks`, which turns every raise into a terminal `finish {kind: error|aborted}`, so
they only ever see the terminal-finish form.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from ..log import JsonObject, Message, well_formed_json
from ..log.vocabulary import ABORTED, FINISH, FINISH_ABORTED, FINISH_ERROR
from ._chunks import FinishKind, StreamChunk, finish_chunk
from ._failure import failure_from_exception

logger = logging.getLogger(__name__)

COMPACTION_PURPOSE: Final = "compaction"
"""`ModelRequest.purpose` of a summary request (dsh's `purpose`, compaction-spec 8)."""


@dataclass(frozen=True)
class ToolSchema:
    """A tool as the model sees it: `{name, description, parameters}`.

    See docs/providers.md#the-request.

    Args:
        name: the tool name the model calls.
        description: what the tool does, for the model.
        parameters: the JSON Schema object of the tool's arguments.
    """

    name: str
    description: str
    parameters: JsonObject

    def to_json(self) -> JsonObject:
        """Return the provider-neutral JSON form.

        Returns:
            `{"name", "description", "parameters"}`.
        """
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(frozen=True)
class ModelRequest:
    """One model request: the derived messages plus the call options.

    See docs/providers.md#the-request.

    Args:
        messages: the ordered history after the system slot.
        system: the system prompt text, or None.
        tools: the tools the model may call, in order.
        max_tokens: the output token cap, or None for the provider default.
        temperature: the sampling temperature, or None for the provider default.
        purpose: what the request is for, when it is not a step: `COMPACTION_PURPOSE`
            (`"compaction"`) for a summary request (compaction-spec 8); None for a step.
            An adapter may change its transport for it (the DeepSeek adapter sends
            `x-deepseek-harness-compact: 1`); the others ignore it.
    """

    messages: Sequence[Message]
    system: str | None = None
    tools: Sequence[ToolSchema] = ()
    max_tokens: int | None = None
    temperature: float | None = None
    purpose: str | None = None


class Model(Protocol):
    """A language model behind one provider route.

    Attributes:
        provider: the route, e.g. `scripted`, `openai`, `deepseek`.
        model: the provider's model id.
    """

    provider: str
    model: str

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """Make one provider attempt and stream its chunks (an async generator).

        Args:
            request: the messages and options to send.

        Returns:
            An async iterator of chunks following the docs/providers.md#stream-contract.
        """
        ...


async def stream_chunks(model: Model, request: ModelRequest) -> AsyncGenerator[StreamChunk, None]:
    r"""Stream one model attempt, turning any raise into a terminal error finish.

    Chunks pass through unchanged, except that a lone UTF-16 surrogate in any of their
    strings (which a JSON `\ud83d` escape decodes to, and which no log can store) becomes
    U+FFFD; valid pairs are kept. If the adapter raises (an `LlmError` or anything else),
    a `finish {kind: "error", failure}` chunk ends the stream instead (`aborted` when the
    code is `ABORTED`). After the adapter's own `finish` nothing more is read and the
    adapter is closed. A stream that ends without a finish is left as is: the assembler's
    default (`stop`) applies; no chunk is invented. Cancellation propagates.

    Args:
        model: the adapter to call.
        request: the request to send.

    Yields:
        The adapter's chunks, ending with at most one `finish`.
    """
    iterator: AsyncIterator[StreamChunk] | None = None
    try:
        iterator = model.stream(request)
        async for chunk in iterator:
            chunk = well_formed_json(chunk)
            yield chunk
            if chunk["type"] == FINISH:
                return
    # docs/providers.md#stream-contract: every adapter raise becomes a finish
    except Exception as exc:  # noqa: BLE001
        failure = failure_from_exception(exc)
        logger.debug(
            "model %s:%s failed: %s [%s]",
            model.provider,
            model.model,
            type(exc).__name__,
            failure["code"],
        )
        kind: FinishKind = FINISH_ABORTED if failure["code"] == ABORTED else FINISH_ERROR
        yield well_formed_json(finish_chunk(kind, failure=failure))
    finally:
        if isinstance(iterator, AsyncGenerator):
            await iterator.aclose()
