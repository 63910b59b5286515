"""The incremental Chat Completions body encoder (PERFORMANCE.md: prefix encoded once).

Two properties are pinned. Equivalence: the bytes `encode_request` builds from cached
fragments decode to exactly the dict `payload` builds from scratch, and those bytes are what
the server receives (a real loopback server, not a mock, so the SDK's HTTP path is the one
users get). Incrementality: conversions are counted through a monkeypatched converter, so a
growing history converts only its new messages, whatever the history's length.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator

import pytest

from duraloop.errors import LlmError
from duraloop.llm import ModelRequest, OpenAIChatModel, ToolSchema, _openai
from duraloop.llm._openai_request import convert_message
from duraloop.log._json import JsonObject
from duraloop.log._messages import Message, assistant_message, tool_result_message, user_message

from ._fake_openai import FakeOpenAIServer, chunk_event

TOOL = ToolSchema("read_file", "Read a file.", {"type": "object"})


def _step(number: int) -> list[Message]:
    """One tool step: an assistant message with 2 calls, then their 2 results."""
    calls = [
        {"type": "tool-call", "id": f"c{number}_{k}", "name": "read_file", "arguments": "{}"}
        for k in range(2)
    ]
    reply = assistant_message(
        [{"type": "reasoning", "text": "think"}, {"type": "text", "text": "ok"}, *calls],
        provider="deepseek",
        model="m",
    )
    results = [
        tool_result_message(call["id"], [{"type": "text", "text": "é\n✓"}], is_error=k == 1)
        for k, call in enumerate(calls)
    ]
    return [reply, *results]


def _history(steps: int) -> list[Message]:
    messages = [user_message("start")]
    for number in range(steps):
        messages += _step(number)
    return messages


class _Counter:
    """Wraps the adapter's converter and records the id of every converted message."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ids: list[str] = []

        def counting(message: Message, *, send_reasoning: bool) -> list[JsonObject]:
            self.ids.append(message["id"])
            return convert_message(message, send_reasoning=send_reasoning)

        monkeypatch.setattr(_openai, "convert_message", counting)

    def take(self) -> list[str]:
        ids, self.ids = self.ids, []
        return ids


@pytest.fixture
async def model() -> AsyncIterator[OpenAIChatModel]:
    adapter = OpenAIChatModel("m", api_key="sk-test", provider="deepseek")
    try:
        yield adapter
    finally:
        await adapter.aclose()


def _decoded(model: OpenAIChatModel, request: ModelRequest) -> JsonObject:
    body = json.loads(model.encode_request(request))
    assert isinstance(body, dict)
    return body


@pytest.mark.anyio
async def test_request_body_received_is_encode_request_and_equals_payload(
    fake_openai: FakeOpenAIServer,
) -> None:
    model = OpenAIChatModel(
        "m", api_key="sk-test", base_url=fake_openai.base_url, provider="deepseek"
    )
    mixed = user_message(
        [
            {"type": "text", "text": "and also"},
            {"type": "tool-result", "toolCallId": "c0_0", "content": [], "isError": False},
        ]
    )
    history = [*_history(2), mixed]
    requests = [
        ModelRequest(messages=history, system="sys", tools=[TOOL], max_tokens=100, temperature=0.5),
        ModelRequest(messages=[*history, *_step(9)], system="sys", tools=[TOOL]),
    ]
    try:
        for request in requests:
            fake_openai.queue_sse([chunk_event(content="ok"), chunk_event(finish_reason="stop")])
            _ = [chunk async for chunk in model.stream(request)]
    finally:
        await model.aclose()
    for received, request in zip(fake_openai.requests, requests, strict=True):
        assert received.path == "/v1/chat/completions"
        assert received.headers["content-type"] == "application/json"
        assert received.headers["authorization"] == "Bearer sk-test"
        assert received.raw == model.encode_request(request)
        assert received.body == model.payload(request)
    first = fake_openai.requests[0].body
    assert first["messages"][0] == {"role": "system", "content": "sys"}
    assert first["messages"][-2:] == [
        {"role": "tool", "tool_call_id": "c0_0", "content": "(no output)"},
        {"role": "user", "content": "and also"},
    ]
    assert (first["max_tokens"], first["temperature"]) == (100, 0.5)
    assert "max_tokens" not in fake_openai.requests[1].body


@pytest.mark.anyio
async def test_growing_history_converts_only_new_messages(
    model: OpenAIChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = _Counter(monkeypatch)
    history = _history(40)
    model.encode_request(ModelRequest(messages=list(history)))
    assert len(counter.take()) == len(history) == 121
    for number in range(100, 103):
        new = _step(number)
        history += new
        request = ModelRequest(messages=list(history), system="s", tools=[TOOL])
        body = _decoded(model, request)
        assert counter.take() == [message["id"] for message in new]
        assert body == model.payload(request)
        counter.take()
    model.encode_request(ModelRequest(messages=list(history)))
    assert counter.take() == []


@pytest.mark.anyio
async def test_changed_prefix_reuses_fragments_by_id_and_reconverts_changes(
    model: OpenAIChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = _Counter(monkeypatch)
    history = _history(5)
    model.encode_request(ModelRequest(messages=history))
    counter.take()

    # A fork: the last two messages replaced by one new message.
    forked = [*history[:-2], user_message("instead")]
    body = _decoded(model, ModelRequest(messages=forked))
    assert counter.take() == [forked[-1]["id"]]
    assert body == model.payload(ModelRequest(messages=forked))
    counter.take()

    # A resumed process: equal messages, but fresh dicts.
    fresh = copy.deepcopy(forked)
    before = model.encode_request(ModelRequest(messages=forked))
    assert model.encode_request(ModelRequest(messages=fresh)) == before
    assert counter.take() == []

    # The same id with different content is converted again.
    changed = copy.deepcopy(fresh[-1])
    changed["content"] = [{"type": "text", "text": "changed"}]
    edited = [*fresh[:-1], changed]
    assert _decoded(model, ModelRequest(messages=edited))["messages"][-1] == {
        "role": "user",
        "content": "changed",
    }
    assert counter.take() == [edited[-1]["id"]]


@pytest.mark.anyio
async def test_unconvertible_new_message_raises_and_keeps_the_cache_consistent(
    model: OpenAIChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = _Counter(monkeypatch)
    history = _history(3)
    model.encode_request(ModelRequest(messages=history))
    counter.take()
    good = _step(7)
    image = user_message([{"type": "image", "attachment": {}}])
    with pytest.raises(LlmError) as caught:
        model.encode_request(ModelRequest(messages=[*history, *good, image]))
    assert caught.value.code == "UNSUPPORTED_CONTENT"
    assert counter.take() == [m["id"] for m in [*good, image]]
    request = ModelRequest(messages=[*history, *good, user_message("text only")])
    body = _decoded(model, request)
    assert counter.take() == [request.messages[-1]["id"]]
    assert body == model.payload(request)


@pytest.mark.anyio
async def test_system_and_option_changes_between_requests_are_encoded(
    model: OpenAIChatModel,
) -> None:
    history = _history(1)
    other = ToolSchema("ls", "List.", {"type": "object", "properties": {}})
    requests = [
        ModelRequest(messages=[]),
        ModelRequest(messages=[], system="only the system"),
        ModelRequest(messages=history, system="a", tools=[TOOL]),
        ModelRequest(messages=history, system="b", tools=[TOOL, other], max_tokens=5),
        ModelRequest(messages=history, tools=(TOOL, other), temperature=0.0),
        ModelRequest(messages=history, tools=[TOOL, other], temperature=1.5),
        ModelRequest(messages=history),
    ]
    for request in requests:
        assert _decoded(model, request) == model.payload(request)
    assert _decoded(model, requests[0])["messages"] == []
