"""The summary request of a compaction: compaction-spec 12 cases C17, C23-C25 and C27.

See docs/compaction.md#the-summary and #failures. Each case compacts a real session through
`AgentLoop.compact` (the same transaction the pressure and overflow paths run): what the
summarizer is given (the latest request's system prompt and tools, the shadowed messages),
a custom summarizer, and the default `ModelSummarizer` over a `ScriptedModel` (or a
`ReplayModel` for the answers a script cannot give), whose bad finishes fail the compaction
with a `CompactionError` and a `compaction/end {error}`, leaving the history unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from duraloop.errors import CompactionError
from duraloop.llm import (
    COMPACTION_PURPOSE,
    ModelRequest,
    ReplayModel,
    ScriptedModel,
    StreamChunk,
    ToolSchema,
)
from duraloop.log import Message, Session, is_checkpoint, project, user_message
from duraloop.log.vocabulary import (
    ABORTED,
    BLOCK_IMAGE,
    BLOCK_REASONING,
    BLOCK_TEXT,
    BLOCK_TOOL_CALL,
    COMPACTION_END,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    FINISH_MAX_TOKENS,
    REQUEST_HEADER,
    SERVER,
    SOURCE_PLUGIN,
    SUMMARIZER_PLUGIN,
    UNKNOWN,
    UNSUPPORTED_CONTENT,
)
from duraloop.loop import AgentLoop, CompactionConfig, LoopConfig, Summary, SummaryRequest
from duraloop.loop._summarizer import INSTRUCTION
from duraloop.testing import assert_log_valid

from ._compaction_support import TestSummarizer, big_tool, of_type

pytestmark = pytest.mark.anyio

BRACKET = (COMPACTION_START, COMPACTION_SUMMARY, COMPACTION_END)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _loop(
    cwd: Path,
    session: Session,
    answers: list[dict[str, Any]],
    *,
    system: str = "You are a test agent.",
    **compaction: Any,
) -> tuple[AgentLoop, ScriptedModel]:
    """A loop over scripted `answers` with the `big` tool and `compaction` options."""
    model = ScriptedModel(answers)
    config = LoopConfig(system_prompt=system, compaction=CompactionConfig(**compaction))
    return AgentLoop(session, model=model, tools=[big_tool(40)], cwd=cwd, config=config), model


async def _two_turns(loop: AgentLoop, first: str | Message = "first " * 300) -> None:
    await loop.run_turn(first)
    await loop.run_turn("second " * 300)


def _shadowed_messages(session: Session) -> list[Message]:
    (summary,) = of_type(session.events, COMPACTION_SUMMARY)
    messages = [project(session.events[seq]) for seq in summary.data["shadowedSeqs"]]
    return [message for message in messages if message is not None]


# --- C17: what the summarizer is given ---------------------------------------------------


async def test_c17_the_summarizer_gets_the_latest_system_tools_and_the_shadowed_messages(
    tmp_path: Path,
) -> None:
    session = Session("s17")
    old, _ = _loop(tmp_path, session, [{"text": "a " * 300}], system="old system")
    await old.run_turn("first " * 300)
    old.close()
    summarizer = TestSummarizer()
    loop, _ = _loop(
        tmp_path, session, [{"text": "b " * 300}], system="new system", summarizer=summarizer
    )
    await loop.run_turn("second " * 300)
    header = of_type(session.events, REQUEST_HEADER)[-1].data["header"]
    assert header["system"] == "new system"
    result = await loop.compact()
    assert result is not None and result.shadowed == 3
    (request,) = summarizer.requests
    assert request.system == "new system"
    assert list(request.tools) == [ToolSchema(**tool) for tool in header["tools"]]
    assert [tool.name for tool in request.tools] == ["big"]
    assert list(request.messages) == _shadowed_messages(session)
    assert request.max_tokens == 8192 and request.session_id == "s17"


# --- C23: a custom summarizer --------------------------------------------------------------


async def test_c23_a_custom_summarizer_compacts_without_asking_any_model(tmp_path: Path) -> None:
    asked: list[SummaryRequest] = []

    async def summarize(request: SummaryRequest) -> Summary:
        asked.append(request)
        return Summary(summary=[{"type": BLOCK_TEXT, "text": "custom"}], provider="", model="")

    session = Session("s23")
    loop, model = _loop(tmp_path, session, [{"text": "a " * 300}] * 2, summarizer=summarize)
    await _two_turns(loop)
    requests = loop.usage.requests
    assert await loop.compact() is not None
    assert len(asked) == 1 and len(model.requests) == 2  # the loop's model was not asked
    assert loop.usage.requests == requests
    (summary,) = of_type(session.events, COMPACTION_SUMMARY)
    assert summary.data["summary"] == [{"type": BLOCK_TEXT, "text": "custom"}]
    assert (summary.data["provider"], summary.data["model"]) == ("", "")
    assert "llmStreamCall" not in summary.data and "maxTokens" not in summary.data
    assert is_checkpoint(session.derive_messages()[0])
    assert_log_valid(session)


# --- C24, C25: the default summarizer ------------------------------------------------------


async def test_c24_the_model_summarizer_records_its_request_and_answer(tmp_path: Path) -> None:
    answer = {
        "reasoning": "private thoughts",
        "text": "public summary",
        "tool_calls": [{"id": "x1", "name": "big", "arguments": {}}],
    }
    summaries = ScriptedModel([answer], name="MODEL")
    session = Session("s24")
    loop, _ = _loop(
        tmp_path, session, [{"text": "a " * 300}] * 2, summarizer_model=summaries, max_tokens=321
    )
    await _two_turns(loop)
    assert await loop.compact() is not None
    (summary,) = of_type(session.events, COMPACTION_SUMMARY)
    data = summary.data
    assert data["summary"] == [{"type": BLOCK_TEXT, "text": "public summary"}]
    assert [block["type"] for block in data["rawOutput"]] == [
        BLOCK_REASONING,
        BLOCK_TEXT,
        BLOCK_TOOL_CALL,
    ]
    assert data["llmStreamCall"] is True and data["maxTokens"] == 321
    assert (data["provider"], data["model"]) == ("scripted", "MODEL")
    assert data["usage"]["outputTokens"] > 0
    (request,) = summaries.requests
    assert request.max_tokens == 321 and request.purpose == COMPACTION_PURPOSE
    last = request.messages[-1]
    assert last["role"] == "user"
    assert last["source"] == {"kind": SOURCE_PLUGIN, "plugin": SUMMARIZER_PLUGIN}
    assert last["content"] == [{"type": BLOCK_TEXT, "text": INSTRUCTION}]
    assert "## Primary Request and Intent" in INSTRUCTION
    assert_log_valid(session)


async def test_c25_the_summary_request_replays_the_prefix_then_the_instruction(
    tmp_path: Path,
) -> None:
    image = {"type": BLOCK_IMAGE, "attachment": {"mimeType": "image/png", "path": "a.png"}}
    prompt = user_message([{"type": BLOCK_TEXT, "text": "look " * 300}, image])
    summaries = ScriptedModel([{"text": "the summary"}])
    session = Session("s25")
    loop, _ = _loop(
        tmp_path, session, [{"text": "a " * 300}] * 2, system="sys", summarizer_model=summaries
    )
    await _two_turns(loop, prompt)
    assert await loop.compact() is not None
    (request,) = summaries.requests
    shadowed = _shadowed_messages(session)
    assert list(request.messages[:-1]) == shadowed  # the replayed prefix, in order
    assert shadowed[0]["content"][1] == image  # the image is kept
    assert request.messages[-1]["content"][0]["text"] == INSTRUCTION
    assert request.system == "sys"
    assert [tool.name for tool in request.tools] == ["big"]


# --- C27: the summary model's bad finishes -------------------------------------------------


class _Raising:
    """A model whose stream raises a plain exception (no `LlmError` code)."""

    provider = "broken"
    model = "raises"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        raise RuntimeError("socket exploded")
        yield  # pragma: no cover - makes this an async generator


def _replaying(*blocks: dict[str, Any]) -> ReplayModel:
    source = {"kind": "model", "provider": "replay", "model": "replay"}
    answer: Message = {"id": "r", "role": "assistant", "content": list(blocks), "source": source}
    return ReplayModel([answer])


_IMAGE = {"type": BLOCK_IMAGE, "attachment": {"mimeType": "image/png", "path": "s.png"}}


@pytest.mark.parametrize(
    ("summaries", "error"),
    [
        (ScriptedModel([{"error": {"code": SERVER, "message": "bad gateway"}}]), f"[{SERVER}]"),
        (_Raising(), f"socket exploded [{UNKNOWN}]"),
        (ScriptedModel([{"error": {"code": ABORTED, "message": "cancelled"}}]), f"[{ABORTED}]"),
        (ScriptedModel([{"text": "partial", "finish": FINISH_MAX_TOKENS}]), "token cap"),
        (ScriptedModel([{"reasoning": "only thinking"}]), "no text summary content"),
        (ScriptedModel([{"text": "   "}]), "no text summary content"),
        (_replaying({"type": BLOCK_TEXT, "text": "see"}, _IMAGE), UNSUPPORTED_CONTENT),
        (
            _replaying({"type": BLOCK_TEXT, "text": "see", "parts": [_IMAGE]}),
            UNSUPPORTED_CONTENT,
        ),
    ],
    ids=[
        "provider",
        "unknown",
        "aborted",
        "max-tokens",
        "reasoning-only",
        "blank",
        "image",
        "nested",
    ],
)
async def test_c27_a_bad_summary_answer_fails_the_compaction(
    tmp_path: Path, summaries: Any, error: str
) -> None:
    session = Session("s27")
    loop, _ = _loop(tmp_path, session, [{"text": "a " * 300}] * 2, summarizer_model=summaries)
    await _two_turns(loop)
    messages = session.derive_messages()
    with pytest.raises(CompactionError) as raised:
        await loop.compact()
    assert raised.value.code == "summary" and error in str(raised.value)
    if error == "token cap":
        assert "MAX_TOKENS" in str(raised.value)
    start, end = of_type(session.events, *BRACKET)
    assert (start.type, end.type) == (COMPACTION_START, COMPACTION_END)
    assert error in end.data["error"]
    assert session.derive_messages() == messages
    assert_log_valid(session)
