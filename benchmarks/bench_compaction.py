"""Issue 13: a 2,000-step session with 10 KB tool outputs against a 32k-token window.

The session runs through a real adapter and the wire-level server (`tests/llm/_wire_chat.py`,
`_wire_anthropic.py`), which counts every request's tokens itself, refuses one over the window
with the provider's 400, checks pairing on every request, and answers one `fetch` call per
step (the tool returns 10,000 characters), a checkpoint text for each summary request, then a
final text. The log is durable JSONL in a temp dir. Printed: whether it ran to the end, how
many requests the server accepted and refused, compactions (summaries, prunes), the agent
requests' sizes (the server's count; before a compaction and after it), and the time the
compactions took (`compaction/start` to `compaction/end`, from the log's clocks, plus the
prunes' share) per step. Then, in process (ScriptedModel, memory store), the cost of the
pressure check alone: the same N steps with compaction on and a window it never reaches,
against compaction off; and the same session with compaction off through the server, to show
where it fails.

    /work/venv/bin/python benchmarks/bench_compaction.py [--steps 2000] [--provider openai]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from duraloop.errors import LlmError
from duraloop.llm import Model, ScriptedModel
from duraloop.log import Session
from duraloop.log.vocabulary import (
    COMPACTION_END,
    COMPACTION_PRUNE,
    COMPACTION_START,
    COMPACTION_SUMMARY,
)
from duraloop.loop import AgentLoop, CompactionConfig, LoopConfig, SessionSetup, start_session
from duraloop.store import JsonlStore

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from llm._wire_anthropic import AnthropicWireServer  # noqa: E402
from llm._wire_chat import WireChatServer  # noqa: E402
from llm._wire_long import anthropic_responder, chat_responder, fetch_tool  # noqa: E402
from llm._wire_window import LongSession, is_summary_request, request_tokens  # noqa: E402

WINDOW = 32_768
OUTPUT = 10_000


def _server(provider: str, script: LongSession) -> tuple[Any, Model]:
    from duraloop.llm._anthropic import AnthropicMessagesModel
    from duraloop.llm._chat_completions import DeepSeekChatModel, OpenAIChatModel

    if provider == "anthropic":
        server: Any = AnthropicWireServer(
            context_window=WINDOW, responder=anthropic_responder(script)
        )
        model: Model = AnthropicMessagesModel(
            "claude-test", api_key="sk-ant-test", base_url=server.base_url, context_window=WINDOW
        )
        return server, model
    server = WireChatServer(
        provider,  # type: ignore[arg-type]
        context_window=WINDOW,
        responder=chat_responder(script, provider),  # type: ignore[arg-type]
    )
    kind = DeepSeekChatModel if provider == "deepseek" else OpenAIChatModel
    model = kind("m-test", api_key="sk-test", base_url=server.base_url, context_window=WINDOW)
    return server, model


def _config(steps: int, *, compaction: bool) -> LoopConfig:
    return LoopConfig(
        max_steps=steps + 5,
        system_prompt="You read documents.",
        compaction=CompactionConfig() if compaction else None,
    )


async def wire_run(steps: int, provider: str, *, compaction: bool) -> dict[str, Any]:
    """Run the long session through the server; return its figures."""
    script = LongSession(steps=steps)
    server, model = _server(provider, script)
    server.start()
    failure: str | None = None
    with tempfile.TemporaryDirectory(prefix="duraloop-bench-c-") as tmp:
        loop = start_session(
            SessionSetup(
                store=JsonlStore(Path(tmp) / "store"),
                model=model,
                tools=[fetch_tool(OUTPUT)],
                cwd=tmp,
                config=_config(steps, compaction=compaction),
            )
        )
        started = time.perf_counter()
        try:
            result = await loop.run_turn("read every page")
            outcome = result.kind
        except LlmError as error:
            outcome, failure = "failed", str(error.code)
        wall = time.perf_counter() - started
        events = list(loop.session.events)
        loop.close()
    await model.aclose()
    server.stop()
    agent = [request_tokens(r.body) for r in server.requests if not _summary(r)]
    return {
        "outcome": outcome,
        "failure": failure,
        "steps_done": script.made,
        "wall_s": wall,
        "requests": len(server.requests),
        "summary_requests": script.summaries,
        "refused": server.overflows,
        "events": events,
        "agent_tokens": agent,
    }


def _summary(request: Any) -> bool:
    return is_summary_request(request.body)


def bracket_ms(events: list[Any]) -> tuple[int, int]:
    """Return (ms inside compaction brackets, ms from each prune run to the next event)."""
    inside = 0
    opened: int | None = None
    pruning = 0
    for index, event in enumerate(events):
        if event.type == COMPACTION_START:
            opened = event.time
        elif event.type == COMPACTION_END and opened is not None:
            inside += event.time - opened
            opened = None
        elif event.type == COMPACTION_PRUNE and opened is None and index > 0:
            pruning += event.time - events[index - 1].time
    return inside, pruning


def drops(tokens: list[int]) -> tuple[list[int], list[int]]:
    """Return the agent request sizes just before and just after each fall in size."""
    before = [a for a, b in zip(tokens, tokens[1:], strict=False) if b < a]
    after = [b for a, b in zip(tokens, tokens[1:], strict=False) if b < a]
    return before, after


async def scripted_ms(steps: int, *, compaction: bool) -> float:
    """ms/step of `steps` fetch steps in process, compaction on (never reached) or off."""
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"id": f"c{i}", "name": "fetch", "arguments": {"page": i}}]}
        for i in range(steps)
    ]
    model = ScriptedModel([*script, {"text": "done"}], context_window=10**9)
    with tempfile.TemporaryDirectory(prefix="duraloop-bench-c-") as tmp:
        loop = AgentLoop(
            Session("s"),
            model=model,
            tools=[fetch_tool(OUTPUT)],
            cwd=tmp,
            config=_config(steps, compaction=compaction),
        )
        started = time.perf_counter()
        await loop.run_turn("go")
        return (time.perf_counter() - started) * 1000 / steps


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--provider", choices=("openai", "deepseek", "anthropic"), default="openai")
    parser.add_argument("--check-steps", type=int, default=300)
    args = parser.parse_args(argv)
    print(
        f"compaction: {args.steps} steps, {OUTPUT}-character tool outputs, a {WINDOW}-token "
        f"window, the {args.provider} wire server, durable JSONL"
    )
    run = anyio.run(lambda: wire_run(args.steps, args.provider, compaction=True))
    events = run["events"]
    count = {
        kind: sum(e.type == kind for e in events)
        for kind in (COMPACTION_START, COMPACTION_SUMMARY, COMPACTION_PRUNE)
    }
    failed = sum(e.type == COMPACTION_END and "error" in e.data for e in events)
    tokens: list[int] = run["agent_tokens"]
    before, after = drops(tokens)
    inside, pruning = bracket_ms(events)
    ms_step = run["wall_s"] * 1000 / max(run["steps_done"], 1)
    print(
        f"  {run['outcome']} after {run['steps_done']} steps in {run['wall_s']:.1f} s "
        f"({ms_step:.2f} ms/step); the server accepted {run['requests'] - run['refused']} "
        f"requests ({run['summary_requests']} summary requests), refused {run['refused']}"
    )
    print(
        f"  compactions: {count[COMPACTION_START]} ({count[COMPACTION_SUMMARY]} summaries, "
        f"{failed} failed), pruned results: {count[COMPACTION_PRUNE]}"
    )
    print(
        f"  agent requests (server's count, tokens): max {max(tokens)} "
        f"({max(tokens) / WINDOW:.0%} of the window), last {tokens[-1]}; before a compaction "
        f"median {statistics.median(before) if before else 0:.0f}, after it median "
        f"{statistics.median(after) if after else 0:.0f} ({len(before)} falls)"
    )
    per_step = (inside + pruning) / max(run["steps_done"], 1)
    print(
        f"  time in compaction: {inside} ms in brackets + {pruning} ms pruning = "
        f"{per_step:.2f} ms/step ({per_step / ms_step:.0%} of a step)"
    )
    on_runs: list[float] = []
    off_runs: list[float] = []
    for _ in range(3):  # interleaved, so a warming or busy machine favours neither
        on_runs.append(anyio.run(lambda: scripted_ms(args.check_steps, compaction=True)))
        off_runs.append(anyio.run(lambda: scripted_ms(args.check_steps, compaction=False)))
    on, off = statistics.median(on_runs), statistics.median(off_runs)
    print(
        f"  pressure check alone, in process ({args.check_steps} steps, memory store, never "
        f"compacting; median of 3): {on:.2f} ms/step on vs {off:.2f} off ({on - off:+.2f} ms, "
        f"x{on / off:.2f})"
    )
    bare = anyio.run(lambda: wire_run(args.steps, args.provider, compaction=False))
    print(
        f"  without compaction: {bare['outcome']} ({bare['failure']}) at step "
        f"{bare['steps_done']}, its last request {bare['agent_tokens'][-1]} tokens"
    )


if __name__ == "__main__":
    main()
