"""stream_chunks (docs/providers.md#stream-contract): consumers only ever see the terminal-finish
form.

Hand-written adapters exercise each failure path: raise before any chunk, raise mid-stream,
keep yielding after finish, and end without a finish.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from duraloop.errors import LlmError
from duraloop.llm import (
    ModelRequest,
    StreamChunk,
    ToolSchema,
    finish_chunk,
    stream_chunks,
    text_delta,
)

REQUEST = ModelRequest(messages=[])


class _Adapter:
    provider = "test"
    model = "t"

    def __init__(self, chunks: list[StreamChunk], error: BaseException | None = None) -> None:
        self.chunks = chunks
        self.error = error
        self.closed = False

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        try:
            for chunk in self.chunks:
                yield chunk
            if self.error is not None:
                raise self.error
        finally:
            self.closed = True


async def _collect(adapter: _Adapter) -> list[StreamChunk]:
    return [chunk async for chunk in stream_chunks(adapter, REQUEST)]


@pytest.mark.anyio
async def test_stream_chunks_converts_unknown_exception_to_error_finish() -> None:
    chunks = await _collect(_Adapter([text_delta(0, "a")], RuntimeError("socket gone")))
    assert chunks == [
        text_delta(0, "a"),
        finish_chunk("error", failure={"message": "socket gone", "code": "UNKNOWN"}),
    ]


@pytest.mark.anyio
async def test_stream_chunks_maps_aborted_code_to_aborted_finish() -> None:
    chunks = await _collect(_Adapter([], LlmError("stopped", code="ABORTED")))
    assert chunks == [finish_chunk("aborted", failure={"message": "stopped", "code": "ABORTED"})]


@pytest.mark.anyio
async def test_stream_chunks_keeps_llm_error_facts_in_failure() -> None:
    error = LlmError("busy", code="RATE_LIMIT", status=429, provider_retry_after_ms=2000)
    chunks = await _collect(_Adapter([], error))
    assert chunks[-1] == finish_chunk(
        "error",
        failure={
            "message": "busy",
            "code": "RATE_LIMIT",
            "status": 429,
            "providerRetryAfterMs": 2000,
        },
    )


@pytest.mark.anyio
async def test_stream_chunks_stops_after_finish_and_closes_adapter() -> None:
    adapter = _Adapter([finish_chunk("stop"), text_delta(0, "late")])
    chunks = await _collect(adapter)
    assert chunks == [finish_chunk("stop")]
    assert adapter.closed


@pytest.mark.anyio
async def test_stream_chunks_does_not_invent_a_finish() -> None:
    chunks = await _collect(_Adapter([text_delta(0, "a")]))
    assert chunks == [text_delta(0, "a")]


def test_tool_schema_to_json_has_name_description_parameters() -> None:
    schema = ToolSchema("read_file", "Read a file.", {"type": "object", "properties": {}})
    assert schema.to_json() == {
        "name": "read_file",
        "description": "Read a file.",
        "parameters": {"type": "object", "properties": {}},
    }


@pytest.mark.anyio
async def test_stream_chunks_replaces_lone_surrogates_and_keeps_pairs() -> None:
    # JSON `"ok \ud83d"` from a model decodes to a lone surrogate no log can store.
    chunks = await _collect(_Adapter([text_delta(0, "ok \ud83d"), text_delta(0, "\ud83d\ude00")]))
    assert chunks[:2] == [text_delta(0, "ok \ufffd"), text_delta(0, "😀")]
