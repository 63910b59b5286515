"""pydantic-ai through scenarios S, R and P (FunctionModel; an append-only SQLite log added).

pydantic-ai has no durable store of its own, so this driver adds the smallest honest one: an
append-only SQLite table (WAL, `synchronous=FULL`) of the run's messages, each row one
message as pydantic-ai's own JSON (`ModelMessagesTypeAdapter`). The run is driven with
`agent.iter`: when a model response is in (a `CallToolsNode`), every message not yet stored
is appended and committed before the tools run, and the rest at the end, so each step costs
one commit. Resume reads the rows back, validates them into messages and passes them as
`message_history`. The `FunctionModel` encodes the whole history (and the tool definitions)
to JSON before answering from the script. The tool calls of a step run concurrently;
pydantic-ai has no concurrency cap, so scenario P caps the tool bodies with a capacity limiter.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import _common as c
import anyio
from pydantic_ai import Agent, CallToolsNode
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits


async def noop_read(i: int) -> str:
    """Return at once (a no-op tool).

    Args:
        i: the step number.
    """
    return "ok"


async def noop_list(i: int) -> str:
    """Return at once (a no-op tool).

    Args:
        i: the step number.
    """
    return "ok"


async def noop_stat(i: int) -> str:
    """Return at once (a no-op tool).

    Args:
        i: the step number.
    """
    return "ok"


NOOP_TOOLS = [noop_read, noop_list, noop_stat]


def _tool_step(step: int, calls: Sequence[tuple[str, dict[str, int]]]) -> ModelResponse:
    parts = [ToolCallPart(name, args, c.call_id(step, k)) for k, (name, args) in enumerate(calls)]
    return ModelResponse(parts=parts)


def steps_script(steps: int) -> list[ModelResponse]:
    """Return `steps` tool steps of 3 calls each, then one text-only final step."""
    script = [_tool_step(s, c.step_calls(s)) for s in range(1, steps + 1)]
    return [*script, ModelResponse(parts=[TextPart(c.FINAL_TEXT)])]


def _agent(
    script: Sequence[ModelResponse], tools: list[Any], clock: c.Clock, *, encode: bool
) -> Any:
    answers = iter(script)

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if encode:
            body = ModelMessagesTypeAdapter.dump_json(messages)
            schemas = c.dumps([t.parameters_json_schema for t in info.function_tools])
            clock.request_bytes = len(body) + len(schemas)
        clock.requests.append(time.perf_counter())
        answer = next(answers)
        clock.responses.append(time.perf_counter())
        return answer

    return Agent(FunctionModel(respond), tools=tools, system_prompt=c.SYSTEM)


class Log:
    """The append-only SQLite log of a run's messages (one row per message, pydantic-ai JSON)."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("CREATE TABLE IF NOT EXISTS log (seq INTEGER PRIMARY KEY, body BLOB)")
        self.conn.commit()
        self.stored = 0

    def load(self) -> list[ModelMessage]:
        """Return every stored message, in order."""
        rows = self.conn.execute("SELECT body FROM log ORDER BY seq").fetchall()
        self.stored = len(rows)
        return ModelMessagesTypeAdapter.validate_json(b"[" + b",".join(r[0] for r in rows) + b"]")

    def append(self, messages: Sequence[ModelMessage]) -> None:
        """Append the messages past the stored ones and commit (durable at return)."""
        new = messages[self.stored :]
        if new:
            rows = [(ModelMessagesTypeAdapter.dump_json([m])[1:-1],) for m in new]
            self.conn.executemany("INSERT INTO log (body) VALUES (?)", rows)
            self.conn.commit()
            self.stored += len(new)


async def _run(agent: Any, prompt: str, log: Log | None, history: list[ModelMessage]) -> Any:
    unlimited = UsageLimits(request_limit=None)
    async with agent.iter(prompt, message_history=history, usage_limits=unlimited) as run:
        async for node in run:
            if log is not None and isinstance(node, CallToolsNode):
                log.append(run.all_messages())
    if log is not None:
        log.append(run.all_messages())
    return run.result


async def steps(n: int, root: Path) -> dict[str, Any]:
    """Scenario S: one run of `n` tool steps + a final text step, the SQLite log on disk."""
    clock = c.Clock()
    agent = _agent(steps_script(n), NOOP_TOOLS, clock, encode=True)
    log = Log(root / "pydantic_ai.db")
    t0, cpu0 = c.timed()
    result = await _run(agent, c.PROMPT, log, [])
    t1, cpu1 = c.timed()
    log.conn.close()
    if result.output != c.FINAL_TEXT or len(clock.requests) != n + 1:
        raise RuntimeError(f"pydantic-ai run ended with {result.output!r}")
    return c.steps_result(n, t1 - t0, cpu1 - cpu0, clock, root)


def _shape(messages: Sequence[ModelMessage]) -> list[list[tuple[Any, ...]]]:
    return [
        [
            (p.part_kind, getattr(p, "tool_name", None), getattr(p, "args", None))
            + (getattr(p, "tool_call_id", None), getattr(p, "content", None))
            for p in m.parts
        ]
        for m in messages
    ]


def history(template: Sequence[ModelMessage], n: int) -> list[ModelMessage]:
    """Return the messages of a run of `n` steps, made from a real 2-step run's `template`."""
    first, response, returns, final = template[0], template[1], template[2], template[-1]
    messages: list[ModelMessage] = [first]
    for s in range(1, n + 1):
        messages.append(replace(response, parts=_tool_step(s, c.step_calls(s)).parts))
        parts = [replace(p, tool_call_id=c.call_id(s, k)) for k, p in enumerate(returns.parts)]
        messages.append(replace(returns, parts=parts))
    return [*messages, final]


async def build(n: int, root: Path) -> None:
    """Persist the scenario-S session of `n` steps in one batch.

    pydantic-ai takes minutes to run 1000 steps, so the messages are made from a real 2-step
    run's (timestamps and all), after checking they have that run's shape.
    """
    agent = _agent(steps_script(2), NOOP_TOOLS, c.Clock(), encode=False)
    real = (await _run(agent, c.PROMPT, None, [])).all_messages()
    if _shape(history(real, 2)) != _shape(real):
        raise RuntimeError(f"pydantic-ai's messages changed shape: {real}")
    log = Log(root / "pydantic_ai.db")
    log.append(history(real, n))
    log.conn.close()


async def resume(root: Path) -> dict[str, Any]:
    """Scenario R: read the log back, start the next run, stop the clock at the request."""
    clock = c.Clock()
    t0 = time.perf_counter()
    log = Log(root / "pydantic_ai.db")
    history = log.load()
    agent = _agent([ModelResponse(parts=[TextPart(c.FINAL_TEXT)])], NOOP_TOOLS, clock, encode=True)
    await _run(agent, c.RESUME_PROMPT, log, history)
    log.conn.close()
    return {"resume_ms": (clock.requests[0] - t0) * 1000, "request_bytes": clock.request_bytes}


def sleep_tool(seconds: float, limiter: anyio.CapacityLimiter) -> Any:
    """Return a `sleep` tool function whose body sleeps `seconds` under `limiter`."""

    async def sleep(i: int) -> str:
        """Sleep for a fixed time, then return.

        Args:
            i: the call number.
        """
        async with limiter:
            if seconds > 0:
                await anyio.sleep(seconds)
        return "ok"

    return sleep


async def parallel(root: Path) -> dict[str, Any]:
    """Scenario P: one step of 30 x 100 ms calls (cap 10), then 10 steps of 30 x 0 ms calls."""
    spans: list[list[float]] = []
    for index, (seconds, count) in enumerate(((0.1, 1), (0.0, c.P_NOOP_STEPS))):
        clock = c.Clock()
        step = _tool_step(1, [("sleep", {"i": k}) for k in range(c.P_CALLS)])
        script = [step] * count + [ModelResponse(parts=[TextPart(c.FINAL_TEXT)])]
        tools = [sleep_tool(seconds, anyio.CapacityLimiter(c.P_CAP))]
        log = Log(root / f"pydantic_ai_{index}.db")
        await _run(_agent(script, tools, clock, encode=True), c.PROMPT, log, [])
        log.conn.close()
        spans.append(clock.spans_ms())
    return c.parallel_result(spans[0][0], spans[1])
