"""Long sessions through the real adapters and the wire servers: compaction keeps them going.

See docs/compaction.md#when, #failures; Law 4 of docs/architecture.md#laws. Each server
counts every request's tokens itself and refuses one over its 32k window with the
provider's own 400, validates pairing (and DeepSeek's reasoning echo) on every request, and
answers from a scripted long session: one `fetch` call of 10 KB per step, then a final text.
Without compaction the session fails within a dozen steps; with it, it runs to the end and
the server accepts every request, the summary requests included (they go through the same
adapter; DeepSeek's carry `x-deepseek-harness-compact: 1`). When duraloop's idea of the
window is wrong (larger than the server's), the server's `CONTEXT_WINDOW_EXCEEDED` is
answered by compacting and retrying the request in the same step.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from duraloop.errors import LlmError
from duraloop.llm import Model
from duraloop.llm._anthropic import AnthropicMessagesModel
from duraloop.llm._chat_completions import DeepSeekChatModel, OpenAIChatModel
from duraloop.llm._chat_completions._deepseek import COMPACT_HEADER
from duraloop.log import Session
from duraloop.log.vocabulary import (
    COMPACTION_START,
    COMPACTION_SUMMARY,
    CONTEXT_WINDOW_EXCEEDED,
    STEP_START,
)
from duraloop.loop import AgentLoop, CompactionConfig, LoopConfig
from duraloop.testing import assert_log_valid

from ._wire_anthropic import AnthropicWireServer
from ._wire_chat import Dialect, WireChatServer
from ._wire_long import anthropic_responder, chat_responder, fetch_tool
from ._wire_window import LongSession

pytestmark = pytest.mark.anyio

WINDOW = 32_768
OUTPUT = 10_000
PROVIDERS = ("openai", "deepseek", "anthropic")


@contextmanager
def wire(provider: str, script: LongSession, *, window: int, told: int) -> Iterator[Any]:
    """A server refusing requests over `window`, and the adapter told the window is `told`."""
    server: WireChatServer | AnthropicWireServer
    model: Model
    if provider == "anthropic":
        server = AnthropicWireServer(context_window=window, responder=anthropic_responder(script))
        model = AnthropicMessagesModel(
            "claude-test", api_key="sk-ant-test", base_url=server.base_url, context_window=told
        )
    else:
        dialect: Dialect = "deepseek" if provider == "deepseek" else "openai"
        server = WireChatServer(
            dialect, context_window=window, responder=chat_responder(script, dialect)
        )
        kind = DeepSeekChatModel if provider == "deepseek" else OpenAIChatModel
        model = kind("m-test", api_key="sk-test", base_url=server.base_url, context_window=told)
    server.start()
    try:
        yield server, model
    finally:
        server.stop()
    assert not server.violations


def _loop(tmp_path: Path, model: Model, steps: int, **compaction: Any) -> AgentLoop:
    config = LoopConfig(
        max_steps=steps + 5,
        system_prompt="You read documents.",
        compaction=CompactionConfig(**compaction) if compaction.pop("on", True) else None,
    )
    return AgentLoop(
        Session("long"), model=model, tools=[fetch_tool(OUTPUT)], cwd=tmp_path, config=config
    )


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_long_session_compacts_and_every_request_is_accepted(
    tmp_path: Path, provider: str
) -> None:
    script = LongSession(steps=60)
    with wire(provider, script, window=WINDOW, told=WINDOW) as (server, model):
        loop = _loop(tmp_path, model, 60)
        result = await loop.run_turn("read every page")
        await model.aclose()
    assert (result.kind, result.text) == ("completed", "read every page")
    assert server.overflows == 0
    assert max(script.tokens) <= WINDOW
    events = loop.session.events
    summaries = [e for e in events if e.type == COMPACTION_SUMMARY]
    assert len(summaries) >= 3
    assert script.summaries == len(summaries)
    assert len([e for e in events if e.type == STEP_START]) == 61
    assert_log_valid(loop.session)
    if provider == "deepseek":
        marked = [r.headers.get(COMPACT_HEADER) == "1" for r in server.requests]
        assert marked.count(True) == script.summaries


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_without_compaction_the_same_session_overflows(tmp_path: Path, provider: str) -> None:
    script = LongSession(steps=60)
    with wire(provider, script, window=WINDOW, told=WINDOW) as (server, model):
        loop = _loop(tmp_path, model, 60, on=False)
        with pytest.raises(LlmError) as failed:
            await loop.run_turn("read every page")
        await model.aclose()
    assert failed.value.code == CONTEXT_WINDOW_EXCEEDED
    assert server.overflows == 1
    assert script.made < 15


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_window_larger_than_the_servers_is_recovered_by_overflow_compaction(
    tmp_path: Path, provider: str
) -> None:
    script = LongSession(steps=30)
    with wire(provider, script, window=WINDOW, told=2 * WINDOW) as (server, model):
        loop = _loop(tmp_path, model, 30)
        result = await loop.run_turn("read every page")
        await model.aclose()
    assert (result.kind, result.text) == ("completed", "read every page")
    assert server.overflows >= 1
    events = loop.session.events
    assert len([e for e in events if e.type == STEP_START]) == 31
    assert len([e for e in events if e.type == COMPACTION_START]) >= server.overflows
    assert_log_valid(loop.session)
