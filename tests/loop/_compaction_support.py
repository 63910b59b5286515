"""Builders for the compaction tests: a test summarizer, loops that compact, pairing checks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from duraloop.llm import (
    ModelRequest,
    ScriptedModel,
    ToolSchema,
    check_anthropic_messages,
    check_chat_completions_messages,
)
from duraloop.llm._anthropic import AnthropicMessagesModel
from duraloop.llm._chat_completions import OpenAIChatModel
from duraloop.log import Event, Message, Session
from duraloop.loop import AgentLoop, CompactionConfig, LoopConfig, Summary, SummaryRequest
from duraloop.tools import Tool, ToolContext

CLOSED_PORT = "http://127.0.0.1:9"  # never contacted: payloads are only built
TOOLS = (ToolSchema("bash", "Run a shell command.", {"type": "object", "properties": {}}),)


class TestSummarizer:
    """dsh's test summarizer (compaction-spec 12): `[text 'small checkpoint']`, recorded."""

    __test__ = False

    def __init__(self, text: str = "small checkpoint", *, fail: BaseException | None = None):
        self.text = text
        self.fail = fail
        self.requests: list[SummaryRequest] = []

    async def __call__(self, request: SummaryRequest) -> Summary:
        self.requests.append(request)
        if self.fail is not None:
            raise self.fail
        return Summary(
            summary=[{"type": "text", "text": self.text}],
            provider="summary-provider",
            model="summary-model",
            max_tokens=123,
        )


def big_tool(size: int = 10_000) -> Tool:
    """A tool `big` whose every result is `size` characters."""

    async def body(args: Any, ctx: ToolContext) -> str:
        return (f"{ctx.call_id}:" + "x" * size)[:size]

    return Tool(
        name="big",
        description="Return a large output.",
        parameters={"type": "object", "properties": {}},
        validator=lambda arguments: arguments,
        body=body,
        parallel=True,
    )


def tool_script(steps: int, *, calls: int = 1, final: str = "done") -> list[dict[str, Any]]:
    """`steps` responses calling `big` `calls` times each, then a text answer."""
    script: list[dict[str, Any]] = [
        {
            "text": "",
            "tool_calls": [
                {"id": f"c{step}_{index}", "name": "big", "arguments": {}} for index in range(calls)
            ],
        }
        for step in range(steps)
    ]
    script.append({"text": final})
    return script


def compacting_loop(
    cwd: Path,
    script: Sequence[dict[str, Any]],
    *,
    window: int | None,
    summarizer: Any = None,
    session: Session | None = None,
    max_steps: int = 100,
    size: int = 10_000,
    **compaction: Any,
) -> tuple[Session, ScriptedModel, AgentLoop]:
    """A loop over a scripted model with a `window`-token context and the `big` tool."""
    session = session if session is not None else Session("s")
    model = ScriptedModel(list(script))
    model.context_window = window
    config = LoopConfig(
        max_steps=max_steps,
        system_prompt="You are a test agent.",
        compaction=CompactionConfig(summarizer=summarizer or TestSummarizer(), **compaction),
    )
    loop = AgentLoop(session, model=model, tools=[big_tool(size)], cwd=cwd, config=config)
    return session, model, loop


def of_type(events: Sequence[Event], *kinds: str) -> list[Event]:
    """The events of the given types, in order."""
    return [event for event in events if event.type in kinds]


async def assert_pairs_for_both_providers(messages: Sequence[Message]) -> None:
    """The exact Chat Completions and Anthropic payloads of `messages` pass the pre-send checks."""
    request = ModelRequest(messages=list(messages), system="s", tools=TOOLS)
    openai = OpenAIChatModel("gpt-test", api_key="sk-test", base_url=CLOSED_PORT)
    anthropic = AnthropicMessagesModel("claude-test", api_key="sk-ant-test", base_url=CLOSED_PORT)
    try:
        check_chat_completions_messages(openai.payload(request)["messages"], provider="openai")
        check_anthropic_messages(anthropic.payload(request)["messages"])
    finally:
        await openai.aclose()
        await anthropic.aclose()
