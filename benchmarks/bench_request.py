"""Micro-benchmark: building one Chat Completions request at a 4,000-message history.

The history is one user message plus steps of (an assistant message with 3 tool calls, its
3 tool results), filled up to 4,000 messages with user messages (whole steps only, so the
pairing check `encode_request` runs on the wire messages passes). Then 100 requests follow,
each adding one step
(4 messages), and each is timed: `OpenAIChatModel.encode_request` (the body `stream()`
sends) and `ScriptedModel._input_tokens` (its usage estimate). For reference, the
msgspec encoding of the whole body once (the floor) and a cold
`encode_request` (a fresh adapter, as on resume) are timed too. The previous body is
released before each timed call, as in `stream()`, where a request's body is freed when
its response ends.

    /work/venv/bin/python benchmarks/bench_request.py [--messages 4000] [--requests 100]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import msgspec

from duraloop.llm import ModelRequest, OpenAIChatModel, ScriptedModel, ToolSchema
from duraloop.log._messages import assistant_message, tool_result_message, user_message

PARAMETERS = {"type": "object", "properties": {"i": {"type": "integer"}}}
TOOLS = [ToolSchema(n, "Return at once.", PARAMETERS) for n in ("read", "list", "stat")]


def step(number: int) -> list[Any]:
    """Return one tool step: an assistant message with 3 calls, then its 3 results."""
    calls = [
        {
            "type": "tool-call",
            "id": f"call_{number}_{k}",
            "name": TOOLS[k].name,
            "arguments": json.dumps({"i": number}),
        }
        for k in range(3)
    ]
    reply = assistant_message(calls, provider="openai", model="m")
    results = [
        tool_result_message(c["id"], [{"type": "text", "text": "ok"}], is_error=False)
        for c in calls
    ]
    return [reply, *results]


def history(count: int) -> list[Any]:
    """Return a scenario-shaped, provider-valid history of exactly `count` messages.

    Whole steps only (a step cut short would leave calls without results, which the
    adapter's pairing check refuses); user messages fill up to `count`.
    """
    messages = [user_message("Run the benchmark task.")]
    number = 0
    while len(messages) + 4 <= count:
        messages += step(number)
        number += 1
    while len(messages) < count:
        messages.append(user_message("Continue."))
    return messages


def ms(values: list[float]) -> str:
    """Format `median (min-max)` in ms."""
    return f"{statistics.median(values):.3f} ms ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=4000)
    parser.add_argument("--requests", type=int, default=100)
    args = parser.parse_args()
    base = history(args.messages)
    model = OpenAIChatModel("bench-model", api_key="sk-bench-not-used")
    scripted = ScriptedModel([{"text": "x"}] * (args.requests + 1))
    messages = list(base)
    first = ModelRequest(messages=list(messages), system="be brief", tools=TOOLS)
    cold: list[float] = []
    for _ in range(5):
        fresh = OpenAIChatModel("bench-model", api_key="sk-bench-not-used")
        started = time.perf_counter()
        fresh.encode_request(first)
        cold.append((time.perf_counter() - started) * 1000)
    body = model.encode_request(first)
    scripted._input_tokens(first)
    encode_ms: list[float] = []
    estimate_ms: list[float] = []
    for number in range(args.requests):
        messages += step(100_000 + number)
        request = ModelRequest(messages=list(messages), system="be brief", tools=TOOLS)
        del body
        started = time.perf_counter()
        body = model.encode_request(request)
        encode_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        scripted._input_tokens(request)
        estimate_ms.append((time.perf_counter() - started) * 1000)
    whole = model.payload(request)
    started = time.perf_counter()
    msgspec.json.encode(whole)
    floor_ms = (time.perf_counter() - started) * 1000
    print(f"history {args.messages} -> {len(messages)} messages, last body {len(body)} bytes")
    print(f"encode_request, per request (+4 messages): {ms(encode_ms)}")
    print(f"ScriptedModel._input_tokens, per request:    {ms(estimate_ms)}")
    print(f"encode_request on a fresh adapter (cold):   {ms(cold)}")
    print(f"msgspec.json.encode of the whole body once: {floor_ms:.3f} ms (reference)")


if __name__ == "__main__":
    main()
