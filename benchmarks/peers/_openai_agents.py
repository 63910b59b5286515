"""The OpenAI Agents SDK through scenarios S, R and P (its own SQLiteSession, a scripted Model).

The model is a `Model` subclass that answers from a script; before each answer it JSON-encodes
the whole request (instructions, every input item, the tool schemas) the way the Responses
adapter hands it to the HTTP client, so the per-request cost of the whole history is in the
figures, as it is for duraloop. The SDK runs the 3 tool calls of a step concurrently and has
no concurrency cap of its own: scenario P caps the tool bodies with a capacity limiter.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import _common as c
import anyio
from agents import Agent, FunctionTool, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.items import ModelResponse, TResponseOutputItem
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage
from openai.types.responses import ResponseOutputText as Text

MODULES = ("agents",)
SESSION_ID = "bench"

set_tracing_disabled(True)


def _call(step: int, k: int, name: str, args: dict[str, Any]) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=f"fc_{step:05d}_{k}",
        call_id=c.call_id(step, k),
        type="function_call",
        name=name,
        arguments=json.dumps(args),
        status="completed",
    )


def _text(text: str) -> ResponseOutputMessage:
    content = [Text(text=text, type="output_text", annotations=[])]
    return ResponseOutputMessage(
        id="msg_final", type="message", role="assistant", status="completed", content=content
    )


def steps_script(steps: int) -> list[list[TResponseOutputItem]]:
    """Return `steps` tool steps of 3 calls each, then one text-only final step."""
    script: list[list[TResponseOutputItem]] = [
        [_call(s, k, name, args) for k, (name, args) in enumerate(c.step_calls(s))]
        for s in range(1, steps + 1)
    ]
    script.append([_text(c.FINAL_TEXT)])
    return script


class ScriptedModel(Model):
    """Answers each request with the next scripted output, after encoding the request."""

    def __init__(
        self, script: Sequence[list[TResponseOutputItem]], clock: c.Clock, *, encode: bool = True
    ) -> None:
        self._script = list(script)
        self._next = 0
        self._clock = clock
        self._encode = encode

    async def get_response(
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        if self._encode:
            schemas = [
                {"type": "function", "name": t.name, "parameters": t.params_json_schema}
                for t in tools
                if isinstance(t, FunctionTool)
            ]
            body = {"model": "bench", "instructions": system_instructions, "input": input}
            self._clock.request_bytes = len(c.dumps({**body, "tools": schemas}))
        self._clock.requests.append(time.perf_counter())
        output = self._script[self._next]
        self._next += 1
        self._clock.responses.append(time.perf_counter())
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the benchmark does not stream")


@function_tool
async def noop_read(i: int) -> str:
    """Return at once (a no-op tool).

    Args:
        i: the step number.
    """
    return "ok"


@function_tool
async def noop_list(i: int) -> str:
    """Return at once (a no-op tool).

    Args:
        i: the step number.
    """
    return "ok"


@function_tool
async def noop_stat(i: int) -> str:
    """Return at once (a no-op tool).

    Args:
        i: the step number.
    """
    return "ok"


NOOP_TOOLS = [noop_read, noop_list, noop_stat]


def sleep_tool(seconds: float, limiter: Callable[[], anyio.CapacityLimiter]) -> FunctionTool:
    """Return a `sleep` tool whose body sleeps `seconds` under the shared capacity limiter."""

    @function_tool(name_override="sleep")
    async def sleep(i: int) -> str:
        """Sleep for a fixed time, then return.

        Args:
            i: the call number.
        """
        async with limiter():
            if seconds > 0:
                await anyio.sleep(seconds)
        return "ok"

    return sleep


def _agent(model: Model, tools: list[Any]) -> Agent[Any]:
    return Agent(name="bench", instructions=c.SYSTEM, model=model, tools=tools)


async def steps(n: int, root: Path) -> dict[str, Any]:
    """Scenario S: one run of `n` tool steps + a final text step, SQLiteSession on disk."""
    clock = c.Clock()
    session = SQLiteSession(SESSION_ID, db_path=root / "agents.db")
    agent = _agent(ScriptedModel(steps_script(n), clock), NOOP_TOOLS)
    t0, cpu0 = c.timed()
    result = await Runner.run(agent, c.PROMPT, session=session, max_turns=n + 2)
    t1, cpu1 = c.timed()
    session.close()
    if result.final_output != c.FINAL_TEXT or len(clock.requests) != n + 1:
        raise RuntimeError(f"openai-agents run ended with {result.final_output!r}")
    return c.steps_result(n, t1 - t0, cpu1 - cpu0, clock, root)


async def pgsteps(n: int, root: Path) -> dict[str, Any]:
    """Scenario S on PostgreSQL: `SQLAlchemySession` (async engine, psycopg 3), fresh schema."""
    import _pg
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
    from sqlalchemy.ext.asyncio import create_async_engine

    schema = _pg.fresh_schema()
    engine = create_async_engine(
        _pg.sqlalchemy_url(), connect_args={"options": f"-c search_path={schema}"}
    )
    try:
        clock = c.Clock()
        session = SQLAlchemySession(SESSION_ID, engine=engine, create_tables=True)
        agent = _agent(ScriptedModel(steps_script(n), clock), NOOP_TOOLS)
        t0, cpu0 = c.timed()
        result = await Runner.run(agent, c.PROMPT, session=session, max_turns=n + 2)
        t1, cpu1 = c.timed()
        if result.final_output != c.FINAL_TEXT or len(clock.requests) != n + 1:
            raise RuntimeError(f"openai-agents run ended with {result.final_output!r}")
        stored = len(await session.get_items())
        if stored != len(history(n)):
            raise RuntimeError(f"the SQLAlchemy session holds {stored} items")
        figures = c.steps_result(n, t1 - t0, cpu1 - cpu0, clock, root)
        figures["disk_bytes"] = _pg.schema_bytes(schema)
    finally:
        await engine.dispose()
        _pg.drop_schema(schema)
    return figures


def history(n: int) -> list[dict[str, Any]]:
    """Return the session items the SDK stores for scenario S's run of `n` steps."""
    items: list[dict[str, Any]] = [{"content": c.PROMPT, "role": "user"}]
    for s in range(1, n + 1):
        calls = c.step_calls(s)
        items += [
            _call(s, k, name, args).model_dump(exclude_none=True)
            for k, (name, args) in enumerate(calls)
        ]
        items += [
            {"call_id": c.call_id(s, k), "output": "ok", "type": "function_call_output"}
            for k in range(len(calls))
        ]
    final = _text(c.FINAL_TEXT).model_dump(exclude_none=True)
    for part in final["content"]:
        part.pop("logprobs", None)
    return [*items, final]


async def build(n: int, root: Path) -> None:
    """Persist the scenario-S session of `n` steps in one batch.

    The SDK itself takes minutes to run 1000 steps, so the items are written directly; they
    are first checked equal to what a real 2-step run stores (so the shape is the SDK's).
    """
    agent = _agent(ScriptedModel(steps_script(2), c.Clock(), encode=False), NOOP_TOOLS)
    result = await Runner.run(agent, c.PROMPT, max_turns=4)
    real = json.loads(json.dumps(result.to_input_list(), default=str))
    if real != history(2):
        raise RuntimeError(f"the SDK's items changed shape: {real}")
    session = SQLiteSession(SESSION_ID, db_path=root / "agents.db")
    await session.add_items(history(n))  # type: ignore[arg-type]
    session.close()


async def resume(root: Path) -> dict[str, Any]:
    """Scenario R: open the stored session, start the next run, stop the clock at the request."""
    clock = c.Clock()
    t0 = time.perf_counter()
    session = SQLiteSession(SESSION_ID, db_path=root / "agents.db")
    agent = _agent(ScriptedModel([[_text(c.FINAL_TEXT)]], clock), NOOP_TOOLS)
    await Runner.run(agent, c.RESUME_PROMPT, session=session, max_turns=2)
    session.close()
    return {"resume_ms": (clock.requests[0] - t0) * 1000, "request_bytes": clock.request_bytes}


async def parallel(root: Path) -> dict[str, Any]:
    """Scenario P: one step of 30 x 100 ms calls (cap 10), then 10 steps of 30 x 0 ms calls."""
    spans: list[list[float]] = []
    for seconds, count in ((0.1, 1), (0.0, c.P_NOOP_STEPS)):
        limiter = anyio.CapacityLimiter(c.P_CAP)
        clock = c.Clock()
        step = [_call(1, k, "sleep", {"i": k}) for k in range(c.P_CALLS)]
        model = ScriptedModel([step] * count + [[_text(c.FINAL_TEXT)]], clock)
        session = SQLiteSession(f"p{seconds}", db_path=root / "agents.db")
        agent = _agent(model, [sleep_tool(seconds, lambda lim=limiter: lim)])
        await Runner.run(agent, c.PROMPT, session=session, max_turns=count + 2)
        session.close()
        spans.append(clock.spans_ms())
    return c.parallel_result(spans[0][0], spans[1])
