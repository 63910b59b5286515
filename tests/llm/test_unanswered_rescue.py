"""A closed turn with unanswered calls: refused, rescued by a fork, continued on the wire.

Issue 9's "must show": a log whose closed turn 1 asked for two calls and answered neither
(the shape dsh's live failure path writes: one `tool/call` recorded, `step/end`, `turn/end`
error). `duraloop resume` and `duraloop run --session` write nothing, send nothing and name
the rescue; the rescue command, run as printed, forks a child whose cut is closed with crash
repair's closers; the child then continues through the wire-level Chat Completions and
Anthropic servers, which validate pairing independently of duraloop (a violation fails the
test) and accept every request. Real `python -m duraloop` processes on a JSONL store.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli._support import Cli, clean_env, ok
from duraloop.log import Event, SessionHeader
from duraloop.log import vocabulary as v
from duraloop.store import JsonlStore

from ._wire_anthropic import AnthropicWireServer, text_reply
from ._wire_chat import WireChatServer, chunk_event, usage_event


def _wedged_log() -> list[Event]:
    blocks: list[dict[str, Any]] = [
        {"type": "text", "text": "Reading both."},
        {"type": "tool-call", "id": "c1", "name": "read_file", "arguments": '{"path":"a.txt"}'},
        {"type": "tool-call", "id": "c2", "name": "read_file", "arguments": '{"path":"b.txt"}'},
    ]
    message = {
        "id": "m1",
        "role": "assistant",
        "content": blocks,
        "source": {"kind": "model", "provider": "openai", "model": "gpt-test"},
    }
    prompt = {
        "id": "u1",
        "role": "user",
        "content": [{"type": "text", "text": "Read a and b."}],
        "source": {"kind": "user"},
    }
    call = {
        "turn": 1,
        "step": 1,
        "callId": "c1",
        "name": "read_file",
        "arguments": '{"path":"a.txt"}',
    }
    failure = {"kind": "error", "error": {"message": "scheduler failed", "code": "UNKNOWN"}}
    return [
        Event(v.TURN_START, 0, 10, {"turn": 1}),
        Event(v.STEP_START, 1, 10, {"turn": 1, "step": 1}),
        Event(v.USER_MESSAGE, 2, 10, prompt, None, "append"),
        Event(
            v.ASSISTANT_MESSAGE, 3, 11, {"turn": 1, "step": 1, "message": message}, None, "append"
        ),
        Event(v.TOOL_CALL, 4, 12, call),
        Event(v.STEP_END, 5, 13, {"turn": 1, "step": 1}),
        Event(v.TURN_END, 6, 13, {"turn": 1, "reason": failure}),
    ]


@pytest.fixture
def chat_server() -> Iterator[WireChatServer]:
    server = WireChatServer("openai")
    server.start()
    try:
        yield server
    finally:
        server.stop()  # fails the test on any request that broke the pairing rule


@pytest.fixture
def anthropic_server() -> Iterator[AnthropicWireServer]:
    with AnthropicWireServer.running() as server:
        yield server


def _tool_results(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["tool_call_id"], m["content"]) for m in messages if m["role"] == "tool"]


def test_a_closed_unanswered_turn_is_refused_then_rescued_and_continued_on_both_wires(
    tmp_path: Path, chat_server: WireChatServer, anthropic_server: AnthropicWireServer
) -> None:
    cli = Cli(tmp_path)
    JsonlStore(cli.store).backend.materialize(
        SessionHeader(id="wedged", created_at=1, cwd=str(cli.cwd)), _wedged_log()
    )
    parent = cli.log_path("wedged")
    before = parent.read_bytes()
    env = clean_env(tmp_path, OPENAI_API_KEY="sk-test", ANTHROPIC_API_KEY="sk-ant-test")
    openai = ["--model", "openai:gpt-test", "--base-url", chat_server.base_url]

    # resume and run write nothing, send nothing, and name the exact rescue command.
    refused = [
        cli("resume", "wedged"),
        cli("run", "go on", "--session", "wedged", *openai, env=env),
    ]
    for result in refused:
        assert result.returncode == 1
        assert result.stderr.startswith("UnpairedHistoryError: ")
        assert "'c1', 'c2'" in result.stderr and "Nothing was written" in result.stderr
    assert parent.read_bytes() == before
    assert chat_server.requests == []
    found = re.search(r"`(duraloop fork [^`]+)`", refused[0].stderr)
    assert found is not None
    rescue = shlex.split(found.group(1))
    assert rescue == ["duraloop", "fork", "wedged", "--at", "4", "--store", f"jsonl:{cli.store}"]

    # The rescue, run as printed, keeps seqs 0-4 and closes the cut as crash repair would.
    child = ok(cli(*rescue[1:], "--id", "rescued", store=False)).stdout.strip()
    events = cli.events(child)
    assert [e["type"] for e in events[5:]] == [
        "tool/result",
        "tool/result",
        "step/end",
        "turn/end",
        "session/end-seed",
    ]
    assert [e["data"]["error"]["code"] for e in events[5:7]] == [
        "TOOL_OUTCOME_UNKNOWN",
        "TOOL_NOT_STARTED",
    ]
    ok(cli("check", child))

    # The child continues through Chat Completions: the request pairs both calls.
    chat_server.queue_sse(
        [chunk_event(content="Recovered."), chunk_event(finish_reason="stop"), usage_event(50, 3)]
    )
    ran = ok(cli("run", "Carry on.", "--session", child, *openai, env=env))
    assert "Recovered." in ran.stdout
    [request] = chat_server.requests
    results = _tool_results(request.body["messages"])
    assert [call_id for call_id, _ in results] == ["c1", "c2"]
    assert (
        "outcome is unknown" in results[0][1] and "before the Harness recorded it" in results[1][1]
    )

    # A second rescue continues through Anthropic Messages, with the same history.
    other = ok(cli(*rescue[1:], "--id", "rescued-anthropic", store=False)).stdout.strip()
    anthropic_server.queue_events(text_reply("Recovered too."))
    anthropic = ["--model", "anthropic:claude-test", "--base-url", anthropic_server.base_url]
    ok(cli("run", "Carry on.", "--session", other, *anthropic, env=env))
    [sent] = anthropic_server.requests
    answered = [
        b["tool_use_id"]
        for m in sent.body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert answered == ["c1", "c2"]
    assert anthropic_server.violations == []
    ok(cli("check", child))
    ok(cli("check", other))
    assert parent.read_bytes() == before  # the parent was never written
