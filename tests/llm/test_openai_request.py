"""The incremental Chat Completions body encoder and its pairing check (README.md#performance).

Three properties are pinned, for both dialects. Equivalence: the bytes `encode_request`
builds from cached fragments decode to exactly the dict `payload` builds from scratch
(fresh id map included), and those bytes are what a real loopback server receives.
Incrementality: conversions and pairing-checked messages are counted through
monkeypatched functions, so a growing history converts and checks only its new messages,
whatever its length. Safety: a pairing violation in a new message is still caught, and
its message index is the one in the full wire `messages` list.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

from duraloop.errors import LlmError, WirePairingError
from duraloop.llm import ModelRequest, OpenAIChatModel, ToolSchema
from duraloop.llm._chat_completions import (
    ChatCompletionsModel,
    DeepSeekChatModel,
    _pairing,
    _request,
)
from duraloop.llm._chat_completions._request import convert_message
from duraloop.log._json import JsonObject
from duraloop.log._messages import Message, assistant_message, tool_result_message, user_message

from ._wire_chat import WireChatServer, chunk_event

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
    """Records the id of every converted message and the length of every checked list."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ids: list[str] = []
        self.checked: list[int] = []
        check = _pairing.check_chat_completions_messages

        def converting(message: Message, **options: Any) -> list[JsonObject]:
            self.ids.append(message["id"])
            return convert_message(message, **options)

        def checking(messages: Sequence[JsonObject], *, provider: str) -> None:
            self.checked.append(len(messages))
            check(messages, provider=provider)

        monkeypatch.setattr(_request, "convert_message", converting)
        monkeypatch.setattr(_request, "check_chat_completions_messages", checking)

    def take(self) -> list[str]:
        ids, self.ids, self.checked = self.ids, [], []
        return ids


Factory = Callable[..., ChatCompletionsModel]
FACTORIES = [
    pytest.param(lambda **kw: OpenAIChatModel("m", api_key="sk-test", **kw), id="openai"),
    pytest.param(lambda **kw: DeepSeekChatModel("m", api_key="sk-test", **kw), id="deepseek"),
]


@pytest.fixture(params=FACTORIES)
async def model(request: pytest.FixtureRequest) -> AsyncIterator[ChatCompletionsModel]:
    adapter: ChatCompletionsModel = request.param()
    try:
        yield adapter
    finally:
        await adapter.aclose()


def _decoded(model: ChatCompletionsModel, request: ModelRequest) -> JsonObject:
    body = json.loads(model.encode_request(request))
    assert isinstance(body, dict)
    return body


@pytest.mark.parametrize("factory", FACTORIES)
@pytest.mark.anyio
async def test_request_body_received_is_encode_request_and_equals_payload(
    factory: Factory,
) -> None:
    probe = factory()
    await probe.aclose()
    server = WireChatServer("openai" if isinstance(probe, OpenAIChatModel) else "deepseek")
    server.start()
    model = factory(base_url=server.base_url)
    call = {"type": "tool-call", "id": "cx", "name": "read_file", "arguments": "{}"}
    # A user message mixing text and a result: the tool message goes first
    # (docs/providers.md#chat-completions-wire).
    mixed = user_message(
        [
            {"type": "text", "text": "and also"},
            {"type": "tool-result", "toolCallId": "cx", "content": [], "isError": False},
        ]
    )
    history = [*_history(2), assistant_message([call], provider="x", model="m"), mixed]
    requests = [
        ModelRequest(messages=history, system="sys", tools=[TOOL], max_tokens=100, temperature=0.5),
        ModelRequest(messages=[*history, *_step(9)], system="sys", tools=[TOOL]),
    ]
    try:
        for request in requests:
            server.queue_sse([chunk_event(content="ok"), chunk_event(finish_reason="stop")])
            _ = [chunk async for chunk in model.stream(request)]
    finally:
        await model.aclose()
        server.stop()
    for received, request in zip(server.requests, requests, strict=True):
        assert received.headers["content-type"] == "application/json"
        assert received.raw == model.encode_request(request)
        assert received.body == model.payload(request)
    first = server.requests[0].body
    assert first["messages"][0] == {"role": "system", "content": "sys"}
    assert first["messages"][-2:] == [
        {"role": "tool", "tool_call_id": "cx", "content": "(no output)"},
        {"role": "user", "content": "and also"},
    ]
    assert first["temperature"] == 0.5


@pytest.mark.anyio
async def test_growing_history_converts_and_checks_only_new_messages(
    model: ChatCompletionsModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = _Counter(monkeypatch)
    history = _history(40)
    model.encode_request(ModelRequest(messages=list(history)))
    assert len(counter.ids) == len(history) == 121
    assert counter.checked == [121]
    counter.take()
    for number in range(100, 103):
        new = _step(number)
        history += new
        request = ModelRequest(messages=list(history), system="s", tools=[TOOL])
        body = _decoded(model, request)
        # The check starts at the last complete call group: the previous step's assistant
        # message and its 2 results, then the 3 new messages.
        assert (counter.ids, counter.checked) == ([m["id"] for m in new], [6])
        assert body == model.payload(request)
        counter.take()
    model.encode_request(ModelRequest(messages=list(history)))
    assert counter.take() == []


@pytest.mark.anyio
async def test_pairing_violation_in_a_new_message_is_caught_with_its_true_index(
    model: ChatCompletionsModel,
) -> None:
    history = _history(30)
    model.encode_request(ModelRequest(messages=history, system="sys"))
    dangling = assistant_message(
        [{"type": "tool-call", "id": "late", "name": "read_file", "arguments": "{}"}],
        provider="openai",
        model="m",
    )
    bad = [*history, dangling, user_message("no result for 'late'")]
    with pytest.raises(WirePairingError) as caught:
        model.encode_request(ModelRequest(messages=bad, system="sys"))
    assert (caught.value.call_id, caught.value.rule) == ("late", "UNANSWERED_TOOL_CALL")
    assert caught.value.message_index == len(history)  # in the flat list, after 1 + 30 * 3
    assert f"messages[{len(history)}]" in str(caught.value)
    # The same prefix with a valid tail still encodes afterwards.
    fixed = [*history, dangling, tool_result_message("late", [], is_error=False)]
    assert _decoded(model, ModelRequest(messages=fixed))["messages"][-1]["tool_call_id"] == "late"


@pytest.mark.anyio
async def test_changed_prefix_reuses_fragments_by_id_and_reconverts_changes(
    model: ChatCompletionsModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = _Counter(monkeypatch)
    history = _history(5)
    model.encode_request(ModelRequest(messages=history))
    counter.take()

    # A fork: the last two messages replaced by one new message.
    forked = [*history[:-3], user_message("instead")]
    body = _decoded(model, ModelRequest(messages=forked))
    assert counter.ids == [forked[-1]["id"]]
    assert counter.checked == [len(body["messages"])]  # a changed prefix is checked whole
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
    model: ChatCompletionsModel, monkeypatch: pytest.MonkeyPatch
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
async def test_long_tool_ids_map_the_same_in_cached_and_fresh_payloads(
    model: ChatCompletionsModel,
) -> None:
    long_id = "toolu_01" + "A" * 56
    history = [
        user_message("go"),
        assistant_message(
            [{"type": "tool-call", "id": long_id, "name": "ls", "arguments": "{}"}],
            provider="anthropic",
            model="claude",
        ),
        tool_result_message(long_id, [{"type": "text", "text": "x"}], is_error=False),
    ]
    first = _decoded(model, ModelRequest(messages=history))
    second = _decoded(model, ModelRequest(messages=[*history, user_message("more")]))
    wire_id = first["messages"][1]["tool_calls"][0]["id"]
    assert wire_id != long_id and len(wire_id) <= 40
    assert first["messages"][2]["tool_call_id"] == wire_id
    assert second["messages"][1]["tool_calls"][0]["id"] == wire_id
    assert model.payload(ModelRequest(messages=history)) == first
    assert model._encoder.ids.from_wire(wire_id) == long_id


@pytest.mark.anyio
async def test_system_and_option_changes_between_requests_are_encoded(
    model: ChatCompletionsModel,
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
