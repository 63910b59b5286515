"""ReplayModel: each request is answered with the next recorded assistant message (issue 5).

A replay must reproduce the recorded answers exactly (text, reasoning, tool calls with their
recorded ids and raw arguments, the recorded finish and usage) while obeying the
docs/providers.md#stream-contract chunk contract, skip interrupted prefixes, and fail with a typed,
non-retryable error when the recording runs out. The technique: stream through `stream_chunks` (the
consumer's view) and re-assemble with the real `BlockAssembler`, so what the loop would commit is
compared.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from duraloop.errors import ConfigError, LlmError
from duraloop.llm import BlockAssembler, ModelRequest, StreamChunk, stream_chunks
from duraloop.llm._replay import (
    RecordedResponse,
    ReplayModel,
    recorded_responses,
)
from duraloop.log import Event, Session, assistant_message, tool_result_message, user_message
from duraloop.log.vocabulary import ASSISTANT_MESSAGE, REPLAY_EXHAUSTED
from duraloop.store import read_log_file

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "dsh-sessions"
needs_fixtures = pytest.mark.skipif(not FIXTURES.is_dir(), reason="../shared fixtures absent")

REQUEST = ModelRequest(messages=[user_message("go")])

CALLING = assistant_message(
    [
        {"type": "reasoning", "text": "I should write two files."},
        {"type": "text", "text": "Writing them now."},
        {
            "type": "tool-call",
            "id": "call_00_AbC",
            "name": "write_file",
            "arguments": '{"path": "a"}',
        },
        {"type": "tool-call", "id": "toolu_01XyZ", "name": "bash", "arguments": "{not json"},
    ],
    provider="deepseek",
    model="deepseek-chat",
)
ANSWERING = assistant_message([{"type": "text", "text": "Done."}], provider="deepseek", model="m")


async def _collect(model: ReplayModel, request: ModelRequest = REQUEST) -> list[StreamChunk]:
    return [chunk async for chunk in stream_chunks(model, request)]


def _assemble(chunks: list[StreamChunk]) -> BlockAssembler:
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.push(chunk)
    return assembler


def _check_contract(chunks: list[StreamChunk]) -> None:
    """docs/providers.md#stream-contract: first-seen indices, deltas inside open blocks, usage
    before one final finish."""
    opened: list[int] = []
    closed: set[int] = set()
    for position, typed in enumerate(chunks):
        chunk: dict[str, Any] = dict(typed)
        kind = chunk["type"]
        if kind == "block-start":
            assert chunk["index"] == len(opened)
            opened.append(chunk["index"])
        elif kind in ("text-delta", "reasoning-delta", "tool-call-delta", "block-end"):
            assert chunk["index"] in opened and chunk["index"] not in closed
            if kind == "block-end":
                closed.add(chunk["index"])
        elif kind == "usage":
            assert chunks[position + 1]["type"] == "finish"
        else:
            assert kind == "finish" and position == len(chunks) - 1
    assert closed == set(opened)


@pytest.mark.anyio
async def test_replay_streams_recorded_blocks_verbatim_and_finishes_tool_calls() -> None:
    model = ReplayModel([CALLING, ANSWERING], path="rec.jsonl")
    chunks = await _collect(model)
    _check_contract(chunks)
    assembled = _assemble(chunks)
    assert assembled.blocks() == CALLING["content"]
    assert assembled.finish == {"kind": "tool-calls"}
    assert assembled.usage is None
    deltas = [c for c in chunks if c["type"] == "tool-call-delta"]
    assert [(d["id"], d.get("name"), d["argumentsDelta"]) for d in deltas] == [
        ("call_00_AbC", "write_file", '{"path": "a"}'),
        ("toolu_01XyZ", "bash", "{not json"),
    ]
    second = _assemble(await _collect(model))
    assert second.blocks() == ANSWERING["content"]
    assert second.finish == {"kind": "stop"}
    assert model.remaining_count == 0
    assert (model.provider, model.model) == ("replay", "replay")


@pytest.mark.anyio
async def test_replay_sends_recorded_finish_and_usage() -> None:
    usage: Any = {"inputTokens": 12, "outputTokens": 3, "cacheReadTokens": 7}
    model = ReplayModel([RecordedResponse(ANSWERING, finish="max-tokens", usage=usage)])
    chunks = await _collect(model)
    _check_contract(chunks)
    assembled = _assemble(chunks)
    assert assembled.finish == {"kind": "max-tokens"}
    assert assembled.usage == usage
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "max-tokens"}}


@pytest.mark.anyio
async def test_replay_past_the_recording_raises_replay_exhausted_not_retryable() -> None:
    model = ReplayModel([ANSWERING], path="/logs/session.jsonl")
    await _collect(model)
    with pytest.raises(LlmError) as caught:
        async for _ in model.stream(REQUEST):
            pass
    error = caught.value
    assert error.code == REPLAY_EXHAUSTED
    assert error.retryable is False
    assert "request 2" in error.message
    assert "all 1 recorded in /logs/session.jsonl were replayed" in error.message
    # Through the consumer seam the raise becomes a terminal error finish.
    chunks = await _collect(model)
    assert chunks == [
        {
            "type": "finish",
            "reason": {
                "kind": "error",
                "failure": {
                    "message": error.message.replace("request 2", "request 3"),
                    "code": REPLAY_EXHAUSTED,
                },
            },
        }
    ]
    assert len(model.requests) == 3


def test_replay_refuses_a_non_assistant_message_naming_it() -> None:
    with pytest.raises(
        ConfigError, match=r"rec: answer 2 is not an assistant message \(role 'user'\)"
    ):
        ReplayModel([ANSWERING, user_message("hi")], path="rec")


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        (
            {"type": "tool-result", "toolCallId": "x", "content": []},
            "type 'tool-result' cannot be replayed",
        ),
        ({"type": "text", "text": 3}, "block 1 (text): text must be strings"),
        (
            {"type": "tool-call", "id": "", "name": "n", "arguments": "{}"},
            "id and name must be non-empty",
        ),
    ],
)
def test_replay_refuses_a_block_it_cannot_stream(block: dict[str, Any], expected: str) -> None:
    message = assistant_message([block], provider="p", model="m")
    with pytest.raises(ConfigError) as caught:
        ReplayModel([message])
    assert expected in str(caught.value)


def _session_events() -> list[Event]:
    """A closed two-step turn, then a turn cancelled mid-stream (an interrupted prefix)."""
    session = Session("s")
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user_message("go"), surface_op="append")
    session.append("step/start", {"turn": 1, "step": 1})
    finish = session.append(
        "assistant/chunk",
        {"turn": 1, "step": 1, "chunk": {"type": "finish", "reason": {"kind": "tool-calls"}}},
    )
    session.append(
        ASSISTANT_MESSAGE,
        {"turn": 1, "step": 1, "message": CALLING, "usage": {"inputTokens": 5, "outputTokens": 2}},
        surface_op="append",
        source_event_seqs=[finish.seq],
    )
    for block in CALLING["content"][2:]:
        session.append(
            "tool/call",
            {
                "turn": 1,
                "step": 1,
                "callId": block["id"],
                "name": block["name"],
                "arguments": block["arguments"],
            },
        )
        session.append(
            "tool/result",
            {
                "turn": 1,
                "step": 1,
                "message": tool_result_message(
                    block["id"], [{"type": "text", "text": "ok"}], is_error=False
                ),
            },
            surface_op="append",
            source_event_seqs=[session.seq - 1],
        )
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("step/start", {"turn": 1, "step": 2})
    session.append(
        ASSISTANT_MESSAGE, {"turn": 1, "step": 2, "message": ANSWERING}, surface_op="append"
    )
    session.append("step/end", {"turn": 1, "step": 2})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    session.append("turn/start", {"turn": 2})
    session.append("user/message", user_message("again"), surface_op="append")
    session.append("step/start", {"turn": 2, "step": 1})
    partial = assistant_message([{"type": "text", "text": "partial"}], provider="p", model="m")
    session.append(
        ASSISTANT_MESSAGE,
        {"turn": 2, "step": 1, "message": partial, "interrupted": True},
        surface_op="append",
    )
    session.append("step/end", {"turn": 2, "step": 1})
    session.append(
        "turn/end", {"turn": 2, "reason": {"kind": "aborted", "reason": {"kind": "user"}}}
    )
    return list(session.events)


def test_recorded_responses_skip_interrupted_and_read_finish_and_usage() -> None:
    responses = recorded_responses(_session_events())
    assert [r.message["id"] for r in responses] == [CALLING["id"], ANSWERING["id"]]
    assert [r.finish for r in responses] == ["tool-calls", None]
    assert [r.usage for r in responses] == [{"inputTokens": 5, "outputTokens": 2}, None]


def test_from_events_without_an_answer_says_so() -> None:
    events = _session_events()
    only_partial = [
        e for e in events if not (e.type == ASSISTANT_MESSAGE and "interrupted" not in e.data)
    ]
    with pytest.raises(ConfigError, match="x.jsonl records no assistant message to replay"):
        ReplayModel.from_events(only_partial, path="x.jsonl")


@needs_fixtures
@pytest.mark.anyio
async def test_replay_of_dsh_max_tokens_fixture_keeps_the_recorded_max_tokens_finish() -> None:
    _, events = read_log_file(FIXTURES / "max-tokens-continue" / "session.jsonl")
    model = ReplayModel.from_events(events, path="max-tokens-continue")
    assert model.recorded_count == 2
    first = _assemble(await _collect(model))
    recorded = [e.data for e in events if e.type == ASSISTANT_MESSAGE]
    assert first.finish == {"kind": "max-tokens"}
    assert first.blocks() == recorded[0]["message"]["content"]
    assert first.usage == recorded[0]["usage"]
    assert first.replay_state is None  # the pi-ai replay state is not this route's to send
    second = _assemble(await _collect(model))
    assert second.finish == {"kind": "stop"}
    assert second.blocks() == recorded[1]["message"]["content"]


@needs_fixtures
def test_recorded_responses_of_dsh_cancel_fixture_skip_the_interrupted_prefix() -> None:
    _, events = read_log_file(FIXTURES / "cancel" / "session.jsonl")
    assert any(e.type == ASSISTANT_MESSAGE and e.data.get("interrupted") for e in events)
    assert recorded_responses(events) == []
