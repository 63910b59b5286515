"""LangGraph through scenarios S, R and P (its own SqliteSaver, a fake chat model in a node).

The graph is the usual tool-calling agent: a `model` node, the prebuilt `ToolNode` and
`tools_condition`, over `MessagesState`, compiled with `SqliteSaver` and run with
`durability="sync"` (each checkpoint is committed before the next step starts). The model
node converts the whole history to OpenAI chat messages and JSON-encodes the request (as a
chat-model integration does before sending), then asks langchain-core's
`GenericFakeChatModel` for the next scripted `AIMessage`. The ToolNode runs a step's calls
in a thread pool capped by the run's `max_concurrency` (10, scenario P's cap).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _common as c
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.messages import convert_to_openai_messages as to_openai
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

THREAD = "bench"


@tool
def noop_read(i: int) -> str:
    """Return at once (a no-op tool).

    Args:
        i: the step number.
    """
    return "ok"


@tool
def noop_list(i: int) -> str:
    """Return at once (a no-op tool).

    Args:
        i: the step number.
    """
    return "ok"


@tool
def noop_stat(i: int) -> str:
    """Return at once (a no-op tool).

    Args:
        i: the step number.
    """
    return "ok"


NOOP_TOOLS: list[BaseTool] = [noop_read, noop_list, noop_stat]


def sleep_tool(seconds: float) -> BaseTool:
    """Return a `sleep` tool whose body blocks its worker thread for `seconds`."""

    @tool("sleep")
    def sleep(i: int) -> str:
        """Sleep for a fixed time, then return.

        Args:
            i: the call number.
        """
        if seconds > 0:
            time.sleep(seconds)
        return "ok"

    return sleep


def _tool_step(step: int, calls: Sequence[tuple[str, dict[str, int]]]) -> AIMessage:
    tool_calls = [
        {"name": name, "args": args, "id": c.call_id(step, k), "type": "tool_call"}
        for k, (name, args) in enumerate(calls)
    ]
    return AIMessage(content="", tool_calls=tool_calls)


def steps_script(steps: int) -> list[AIMessage]:
    """Return `steps` tool steps of 3 calls each, then one text-only final step."""
    script = [_tool_step(s, c.step_calls(s)) for s in range(1, steps + 1)]
    return [*script, AIMessage(content=c.FINAL_TEXT)]


def _graph(
    script: Sequence[AIMessage], tools: list[BaseTool], clock: c.Clock, saver: Any, *, encode: bool
) -> Any:
    fake = GenericFakeChatModel(messages=iter(script))
    schemas = [convert_to_openai_tool(t) for t in tools]

    def model(state: MessagesState) -> dict[str, list[AnyMessage]]:
        if encode:
            messages = [{"role": "system", "content": c.SYSTEM}, *to_openai(state["messages"])]
            body = {"model": "bench", "messages": messages, "tools": schemas}
            clock.request_bytes = len(c.dumps(body))
        clock.requests.append(time.perf_counter())
        answer = fake.invoke(state["messages"])
        clock.responses.append(time.perf_counter())
        return {"messages": [answer]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", model)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition, ["tools", END])
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=saver)


def _saver(root: Path) -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(root / "langgraph.db", check_same_thread=False))


def _run(graph: Any, prompt: str, steps: int, thread: str = THREAD) -> dict[str, Any]:
    config = {
        "configurable": {"thread_id": thread},
        "recursion_limit": 2 * steps + 10,
        "max_concurrency": c.P_CAP,
    }
    result: dict[str, Any] = graph.invoke(
        {"messages": [HumanMessage(prompt)]}, config, durability="sync"
    )
    return result


async def steps(n: int, root: Path) -> dict[str, Any]:
    """Scenario S: one run of `n` tool steps + a final text step, SqliteSaver on disk."""
    clock = c.Clock()
    saver = _saver(root)
    graph = _graph(steps_script(n), NOOP_TOOLS, clock, saver, encode=True)
    t0, cpu0 = c.timed()
    result = _run(graph, c.PROMPT, n)
    t1, cpu1 = c.timed()
    saver.conn.close()
    if result["messages"][-1].content != c.FINAL_TEXT or len(clock.requests) != n + 1:
        raise RuntimeError("langgraph run did not end with the final text")
    return c.steps_result(n, t1 - t0, cpu1 - cpu0, clock, root)


async def pgsteps(n: int, root: Path) -> dict[str, Any]:
    """Scenario S on PostgreSQL: `PostgresSaver` in a fresh schema, `durability="sync"`."""
    import _pg
    from langgraph.checkpoint.postgres import PostgresSaver

    schema = _pg.fresh_schema()
    try:
        clock = c.Clock()
        with PostgresSaver.from_conn_string(_pg.conninfo(schema)) as saver:
            saver.setup()
            graph = _graph(steps_script(n), NOOP_TOOLS, clock, saver, encode=True)
            t0, cpu0 = c.timed()
            result = _run(graph, c.PROMPT, n)
            t1, cpu1 = c.timed()
        if result["messages"][-1].content != c.FINAL_TEXT or len(clock.requests) != n + 1:
            raise RuntimeError("langgraph run did not end with the final text")
        figures = c.steps_result(n, t1 - t0, cpu1 - cpu0, clock, root)
        figures["disk_bytes"] = _pg.schema_bytes(schema)
    finally:
        _pg.drop_schema(schema)
    return figures


def history(n: int) -> list[AnyMessage]:
    """Return the messages scenario S's run of `n` steps leaves in the graph's state."""
    messages: list[AnyMessage] = [HumanMessage(c.PROMPT)]
    for s in range(1, n + 1):
        calls = c.step_calls(s)
        messages.append(_tool_step(s, calls))
        messages += [
            ToolMessage(content="ok", name=name, tool_call_id=c.call_id(s, k))
            for k, (name, _) in enumerate(calls)
        ]
    return [*messages, AIMessage(content=c.FINAL_TEXT)]


def _shape(messages: Sequence[AnyMessage]) -> list[tuple[Any, ...]]:
    return [
        (m.type, m.content, getattr(m, "tool_calls", None), getattr(m, "tool_call_id", None))
        for m in messages
    ]


async def build(n: int, root: Path) -> None:
    """Persist the scenario-S session of `n` steps as one checkpoint of the whole state.

    A real run at N = 1000 takes minutes and writes GBs (every checkpoint holds the whole
    history); the state is written directly with `update_state`, after checking that the
    messages have the shape a real 2-step run leaves.
    """
    clock = c.Clock()
    memory = InMemorySaver()
    real = _run(_graph(steps_script(2), NOOP_TOOLS, clock, memory, encode=False), c.PROMPT, 2)
    if _shape(real["messages"]) != _shape(history(2)):
        raise RuntimeError(f"langgraph's messages changed shape: {real['messages']}")
    saver = _saver(root)
    graph = _graph([], NOOP_TOOLS, clock, saver, encode=False)
    config = {"configurable": {"thread_id": THREAD}}
    graph.update_state(config, {"messages": history(n)}, as_node="model")
    saver.conn.close()


async def resume(root: Path) -> dict[str, Any]:
    """Scenario R: open the checkpoint, start the next run, stop the clock at the request."""
    clock = c.Clock()
    t0 = time.perf_counter()
    saver = _saver(root)
    graph = _graph([AIMessage(content=c.FINAL_TEXT)], NOOP_TOOLS, clock, saver, encode=True)
    _run(graph, c.RESUME_PROMPT, 1)
    saver.conn.close()
    return {"resume_ms": (clock.requests[0] - t0) * 1000, "request_bytes": clock.request_bytes}


async def parallel(root: Path) -> dict[str, Any]:
    """Scenario P: one step of 30 x 100 ms calls (cap 10), then 10 steps of 30 x 0 ms calls."""
    spans: list[list[float]] = []
    saver = _saver(root)
    for seconds, count in ((0.1, 1), (0.0, c.P_NOOP_STEPS)):
        clock = c.Clock()
        step = _tool_step(1, [("sleep", {"i": k}) for k in range(c.P_CALLS)])
        script = [step] * count + [AIMessage(content=c.FINAL_TEXT)]
        graph = _graph(script, [sleep_tool(seconds)], clock, saver, encode=True)
        _run(graph, c.PROMPT, count, thread=f"p{seconds}")
        spans.append(clock.spans_ms())
    saver.conn.close()
    return c.parallel_result(spans[0][0], spans[1])
