"""Builders shared by the loop tests: a loop over a fresh session, fault-injecting pipelines."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from duraloop.llm import (
    ModelRequest,
    ScriptedModel,
    StreamChunk,
    block_start,
    finish_chunk,
    text_delta,
)
from duraloop.log import Event, Message, Session
from duraloop.loop import AgentLoop, Durability, LoopConfig
from duraloop.tools import (
    Tool,
    ToolCallRequest,
    ToolContext,
    ToolHooks,
    ToolPipeline,
    ToolRegistry,
)
from duraloop.tools._pipeline import Prepared
from duraloop.tools._signal import CancelSignal

Fault = Callable[[ToolCallRequest], Awaitable[None]]


def call(call_id: str, name: str = "p", **arguments: Any) -> dict[str, Any]:
    """A scripted tool call."""
    return {"id": call_id, "name": name, "arguments": arguments}


def tools_step(*calls: dict[str, Any], text: str = "") -> dict[str, Any]:
    """A scripted response that calls tools."""
    return {"text": text, "tool_calls": list(calls)}


def faulty_pipeline(
    *,
    before_prepare: Fault | None = None,
    before_dispatch: Fault | None = None,
    is_parallel_error: BaseException | None = None,
) -> type[ToolPipeline]:
    """A `ToolPipeline` subclass whose stages run an injected fault first."""

    class FaultyPipeline(ToolPipeline):
        def is_parallel(self, call: ToolCallRequest) -> bool:
            if is_parallel_error is not None:
                raise is_parallel_error
            return super().is_parallel(call)

        async def prepare(self, call: ToolCallRequest, signal: CancelSignal) -> Prepared:
            if before_prepare is not None:
                await before_prepare(call)
            return await super().prepare(call, signal)

        async def dispatch(self, call: ToolCallRequest, signal: CancelSignal) -> Any:
            if before_dispatch is not None:
                await before_dispatch(call)
            return await super().dispatch(call, signal)

    return FaultyPipeline


def make_loop(
    cwd: Path,
    script: Sequence[dict[str, Any]],
    tools: Sequence[Tool] | ToolRegistry,
    *,
    cap: int = 10,
    max_steps: int = 100,
    pipeline: type[ToolPipeline] = ToolPipeline,
    hooks: ToolHooks | None = None,
    durability: Durability | None = None,
    session: Session | None = None,
    config: LoopConfig | None = None,
) -> tuple[Session, ScriptedModel, AgentLoop]:
    """A loop over a fresh session (or `session`) driven by a scripted model.

    `config`, when given, replaces the one built from `cap` and `max_steps`.
    """
    session = session if session is not None else Session("s")
    model = ScriptedModel(list(script))
    loop = AgentLoop(
        session,
        model=model,
        tools=tools,
        cwd=cwd,
        config=config or LoopConfig(max_parallel_tool_calls=cap, max_steps=max_steps),
        durability=durability,
        tool_hooks=hooks,
        pipeline_factory=pipeline,
    )
    return session, model, loop


def _any_object(arguments: Any) -> Any:
    if not isinstance(arguments, dict):
        raise ValueError("arguments must be a JSON object")
    return arguments


def recorder_tool(name: str, record: list[str], *, parallel: bool = True) -> Tool:
    """A tool recording `<name>-start-<id>`, yielding once, then `<name>-end-<id>`."""

    async def body(args: Any, ctx: ToolContext) -> str:
        record.append(f"{name}-start-{ctx.call_id}")
        await anyio.lowlevel.checkpoint()
        record.append(f"{name}-end-{ctx.call_id}")
        return f"{name} {ctx.call_id} ok"

    return Tool(
        name=name,
        description=f"Record {name}.",
        parameters={"type": "object", "properties": {}},
        validator=_any_object,
        body=body,
        parallel=parallel,
    )


def of_type(events: Sequence[Event], kind: str) -> list[Event]:
    """The events of one type, in order."""
    return [event for event in events if event.type == kind]


def result_for(events: Sequence[Event], call_id: str) -> Event:
    """The single `tool/result` answering `call_id`."""
    found = [
        e
        for e in of_type(events, "tool/result")
        if e.data["message"]["source"]["callId"] == call_id
    ]
    assert len(found) == 1, f"{len(found)} results for {call_id}"
    return found[0]


def call_seq(events: Sequence[Event], call_id: str) -> int:
    """The seq of the single `tool/call` of `call_id`."""
    found = [e.seq for e in of_type(events, "tool/call") if e.data["callId"] == call_id]
    assert len(found) == 1, f"{len(found)} tool/calls for {call_id}"
    return found[0]


def result_text(event: Event) -> str:
    """The text of a `tool/result`."""
    block = event.data["message"]["content"][0]
    return "".join(part.get("text", "") for part in block["content"])


def tool_results_in(messages: Sequence[Message]) -> list[tuple[str, bool, str]]:
    """`(call id, isError, text)` of every tool-result message in a request."""
    found = []
    for message in messages:
        source = message.get("source") or {}
        if source.get("kind") == "tool":
            block = message["content"][0]
            text = "".join(part.get("text", "") for part in block["content"])
            found.append((block["toolCallId"], block["isError"], text))
    return found


def inbox_log(events: Sequence[Event]) -> list[str]:
    """`describe_log` with inbox splices, in describe_log's notation.

    `ins(nt)`/`ins(ns)` insert into next-turn/next-step, `claim` is a pure deletion and
    `discard` a deletion recorded with the cancel outcome.
    """
    from duraloop.testing import describe_log

    described = []
    for event in events:
        if event.type != "agent/inbox/spliced":
            described.extend(describe_log([event]))
            continue
        data = event.data
        if data["inserted"]:
            described.append("ins(nt)" if data["target"] == "next-turn" else "ins(ns)")
        elif "outcome" in data:
            described.append("discard")
        else:
            described.append("claim")
    return described


def user_texts(messages: Sequence[Message]) -> list[str]:
    """The texts of the user-authored (non-tool) messages of a request, in order."""
    return [
        "".join(block.get("text", "") for block in message["content"])
        for message in messages
        if message["role"] == "user" and (message.get("source") or {}).get("kind") != "tool"
    ]


class HangFirstModel:
    """Streams "partial" and waits until cancelled on its first request; answers later ones
    with `answer N` (N the request number)."""

    provider = "test"
    model = "hang"

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        self.requests.append(request)
        yield block_start(0, "text")
        yield text_delta(
            0, "partial" if len(self.requests) == 1 else f"answer {len(self.requests)}"
        )
        if len(self.requests) == 1:
            await anyio.Event().wait()
        yield finish_chunk("stop")


class TurnOutcome:
    """What a turn run in the background ended with: its result, or the error it raised."""

    def __init__(self) -> None:
        self.result: Any = None
        self.error: BaseException | None = None


async def run_into(loop: AgentLoop, prompt: str | None, out: TurnOutcome) -> None:
    """Run one turn of `loop` and record its result or error in `out` (for task groups)."""
    try:
        out.result = await loop.run_turn(prompt)
    except Exception as exc:
        out.error = exc


def plain_tool(name: str, body: Any, *, parallel: bool = True) -> Tool:
    """A tool named `name` with no parameters that runs `body` (parallel-safe by default)."""
    return Tool(
        name=name,
        description=f"The {name} tool.",
        parameters={"type": "object", "properties": {}},
        validator=lambda arguments: arguments,
        body=body,
        parallel=parallel,
    )
