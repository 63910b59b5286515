"""Neutral history -> Anthropic Messages request body.

See docs/providers.md#anthropic-wire, #anthropic-pairing, #error-tool-results, #adapters.

Through `AnthropicMessagesModel.payload` (a full conversion) and `encode_request` (the
incremental encoder `stream()` uses): results first in one user message, error results
flagged, empty output replaced, reasoning replayed as signed thinking only for the same
model, thinking placement, id mapping, thinking options, and the incremental body equal to
the full one after growth, forks and edits. No server: these are pure conversions.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from duraloop.errors import ConfigError, LlmError, WirePairingError
from duraloop.llm import ModelRequest, ToolSchema
from duraloop.llm._anthropic import AnthropicMessagesModel
from duraloop.log._messages import Message, assistant_message, tool_result_message, user_message

MODEL = "claude-test"


def _model(**options: Any) -> AnthropicMessagesModel:
    return AnthropicMessagesModel(MODEL, api_key="sk-ant-test", **options)


@pytest.fixture
def model() -> Iterator[AnthropicMessagesModel]:
    yield _model()


def _call(call_id: str, name: str = "read", arguments: str = "{}") -> dict[str, Any]:
    return {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}


def _ours(content: list[Any], *, replay: Any = None, model: str = MODEL) -> Message:
    return assistant_message(content, provider="anthropic", model=model, replay_state=replay)


def _text_result(call_id: str, text: str, *, is_error: bool = False) -> Message:
    return tool_result_message(call_id, [{"type": "text", "text": text}], is_error=is_error)


def test_tool_results_merge_into_one_user_message_results_first(
    model: AnthropicMessagesModel,
) -> None:
    history = [
        user_message("look at a"),
        assistant_message(
            [
                {"type": "reasoning", "text": "deepseek thinks"},
                {"type": "text", "text": "Sure."},
                {"type": "text", "text": "   "},
                _call("c1", "read_file", '{"path":"a"}'),
                _call("c2", "ls", "{bad json"),
                _call("c3", "ls", "[1, 2]"),
            ],
            provider="deepseek",
            model="deepseek-chat",
        ),
        _text_result("c1", "contents"),
        _text_result("c2", "no such dir", is_error=True),
        tool_result_message("c3", [], is_error=False),
        user_message("and now?"),
    ]
    tool = ToolSchema("read_file", "Read a file.", {"type": "object"})
    body = model.payload(
        ModelRequest(messages=history, system="sys", tools=[tool], temperature=0.5)
    )
    assert body == {
        "model": MODEL,
        "max_tokens": 8192,
        "system": "sys",
        "messages": [
            {"role": "user", "content": "look at a"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "deepseek thinks"},
                    {"type": "text", "text": "Sure."},
                    {"type": "tool_use", "id": "c1", "name": "read_file", "input": {"path": "a"}},
                    {"type": "tool_use", "id": "c2", "name": "ls", "input": {}},
                    {"type": "tool_use", "id": "c3", "name": "ls", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "c1", "content": "contents"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "c2",
                        "content": "no such dir",
                        "is_error": True,
                    },
                    {"type": "tool_result", "tool_use_id": "c3", "content": "(no output)"},
                    {"type": "text", "text": "and now?"},
                ],
            },
        ],
        "tools": [
            {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}}
        ],
        "temperature": 0.5,
        "stream": True,
    }


def test_same_model_reasoning_is_replayed_as_signed_thinking(model: AnthropicMessagesModel) -> None:
    replay = {
        "response": {"id": "msg_1"},
        "blocks": [
            {"type": "thinking", "signature": "SIG+/=="},
            {"type": "redacted_thinking", "data": "REDACTED=="},
            {"type": "text"},
            {"type": "tool_use"},
        ],
    }
    reply = _ours(
        [
            {"type": "reasoning", "text": " exact\n text "},
            {"type": "reasoning", "text": ""},
            {"type": "text", "text": "ok"},
            _call("toolu_1"),
        ],
        replay=replay,
    )
    body = model.payload(
        ModelRequest(messages=[user_message("q"), reply, _text_result("toolu_1", "r")])
    )
    assert body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": " exact\n text ", "signature": "SIG+/=="},
        {"type": "redacted_thinking", "data": "REDACTED=="},
        {"type": "text", "text": "ok"},
        {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}},
    ]


@pytest.mark.parametrize(
    "reply",
    [
        _ours(
            [{"type": "reasoning", "text": "mine"}, {"type": "text", "text": "a"}],
            replay={"blocks": [{"type": "thinking", "signature": "S"}, {"type": "text"}]},
            model="claude-other",
        ),
        _ours([{"type": "reasoning", "text": "mine"}, {"type": "text", "text": "a"}]),
        _ours(
            [{"type": "reasoning", "text": "mine"}, {"type": "text", "text": "a"}],
            replay={"blocks": [{"type": "thinking"}, {"type": "text"}]},
        ),
    ],
    ids=["other-model", "no-replay-state", "unsigned"],
)
def test_unreplayable_reasoning_becomes_plain_text(
    model: AnthropicMessagesModel, reply: Message
) -> None:
    body = model.payload(ModelRequest(messages=[user_message("q"), reply, user_message("again")]))
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "mine"},
        {"type": "text", "text": "a"},
    ]


def test_replay_state_not_matching_the_content_degrades_with_a_warning(
    model: AnthropicMessagesModel, caplog: pytest.LogCaptureFixture
) -> None:
    reply = _ours(
        [{"type": "reasoning", "text": "mine"}, {"type": "text", "text": "a"}],
        replay={"blocks": [{"type": "thinking", "signature": "S"}]},
    )
    with caplog.at_level(logging.WARNING):
        body = model.payload(
            ModelRequest(messages=[user_message("q"), reply, user_message("again")])
        )
    assert body["messages"][1]["content"][0] == {"type": "text", "text": "mine"}
    assert "replay state does not match" in caplog.text


def test_thinking_only_where_the_api_accepts_it(model: AnthropicMessagesModel) -> None:
    signed = {"type": "thinking", "signature": "S"}
    only_thinking = _ours([{"type": "reasoning", "text": "t"}], replay={"blocks": [signed]})
    thinking_late = _ours(
        [
            {"type": "text", "text": "a"},
            {"type": "reasoning", "text": "late"},
            {"type": "text", "text": "b"},
        ],
        replay={"blocks": [{"type": "text"}, signed, {"type": "text"}]},
    )
    thinking_last = _ours(
        [
            {"type": "reasoning", "text": "t1"},
            {"type": "text", "text": "a"},
            {"type": "reasoning", "text": "t2"},
        ],
        replay={"blocks": [signed, {"type": "text"}, signed]},
    )
    history = [
        user_message("1"),
        only_thinking,
        user_message("2"),
        thinking_late,
        user_message("3"),
        thinking_last,
        user_message("4"),
    ]
    messages = model.payload(ModelRequest(messages=history))["messages"]
    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "1"}, {"type": "text", "text": "2"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "text", "text": "late"},
                {"type": "text", "text": "b"},
            ],
        },
        {"role": "user", "content": "3"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "t1", "signature": "S"},
                {"type": "text", "text": "a"},
                {"type": "text", "text": "t2"},
            ],
        },
        {"role": "user", "content": "4"},
    ]


def test_history_system_message_becomes_user_text_and_blank_messages_vanish(
    model: AnthropicMessagesModel,
) -> None:
    system: Message = {
        "id": "sys-1",
        "role": "system",
        "content": [{"type": "text", "text": "be brief"}],
        "source": {"kind": "plugin", "plugin": "p"},
    }
    history = [
        user_message("hi"),
        system,
        _ours([{"type": "text", "text": " "}]),
        user_message("   "),
    ]
    messages = model.payload(ModelRequest(messages=history, system="  "))
    assert "system" not in messages
    assert messages["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "be brief"}],
        }
    ]


def test_ids_outside_the_anthropic_pattern_map_consistently_and_history_keeps_them(
    model: AnthropicMessagesModel,
) -> None:
    long_id = "call_" + "x" * 70
    history = [
        user_message("go"),
        assistant_message(
            [_call("functions.read:0"), _call(long_id), _call("call_00_ok")],
            provider="deepseek",
            model="deepseek-chat",
        ),
        _text_result("functions.read:0", "a"),
        _text_result(long_id, "b"),
        _text_result("call_00_ok", "c"),
    ]
    body = model.payload(ModelRequest(messages=history))
    uses = [b["id"] for b in body["messages"][1]["content"]]
    results = [b["tool_use_id"] for b in body["messages"][2]["content"]]
    assert uses == results
    assert uses[2] == "call_00_ok"
    assert uses[0] != "functions.read:0" and uses[0].startswith("functions_read_0_")
    assert len(uses[1]) <= 64 and uses[1] != long_id
    assert history[1]["content"][0]["id"] == "functions.read:0"


def test_image_content_is_refused_before_any_request(model: AnthropicMessagesModel) -> None:
    request = ModelRequest(messages=[user_message([{"type": "image", "attachment": {}}])])
    with pytest.raises(LlmError) as caught:
        model.encode_request(request)
    assert caught.value.code == "UNSUPPORTED_CONTENT"


def test_unanswered_tool_call_is_a_wire_pairing_error_naming_the_call(
    model: AnthropicMessagesModel,
) -> None:
    history = [
        user_message("go"),
        assistant_message([_call("c1"), _call("c2")], provider="x", model="y"),
        _text_result("c1", "ok"),
        user_message("next"),
    ]
    with pytest.raises(WirePairingError) as caught:
        model.encode_request(ModelRequest(messages=history))
    assert (caught.value.call_id, caught.value.message_index, caught.value.rule) == (
        "c2",
        1,
        "UNANSWERED_TOOL_CALL",
    )
    assert "duraloop bug" in str(caught.value)


@pytest.mark.parametrize(
    ("options", "request_max", "max_tokens", "budget"),
    [
        ({"reasoning_effort": "low"}, None, 8192 + 2048, 2048),
        ({"reasoning_effort": "medium"}, None, 8192 + 8192, 8192),
        ({"reasoning_effort": "high"}, None, 8192 + 16384, 16384),
        ({"reasoning_effort": "high", "max_tokens": 20000}, None, 20000, 16384),
        ({"reasoning_effort": "high", "max_tokens": 10000}, None, 10000, 10000 - 1024),
        ({"reasoning_effort": "high", "max_tokens": 50000}, 4096, 4096, 4096 - 1024),
        ({"reasoning_effort": "off", "max_tokens": 500}, None, 500, None),
        ({"max_tokens": 500}, 300, 300, None),
    ],
)
def test_reasoning_effort_maps_to_a_thinking_budget_below_max_tokens(
    options: dict[str, Any], request_max: int | None, max_tokens: int, budget: int | None
) -> None:
    body = _model(**options).payload(
        ModelRequest(messages=[user_message("q")], max_tokens=request_max)
    )
    assert body["max_tokens"] == max_tokens
    assert body.get("thinking") == (
        None if budget is None else {"type": "enabled", "budget_tokens": budget}
    )


def test_request_max_tokens_too_small_for_thinking_fails_before_sending() -> None:
    with pytest.raises(LlmError) as caught:
        _model(reasoning_effort="low").payload(
            ModelRequest(messages=[user_message("q")], max_tokens=1500)
        )
    assert (caught.value.code, caught.value.retryable) == ("UNSUPPORTED_OPTION", False)


def test_temperature_is_not_sent_with_thinking(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        body = _model(reasoning_effort="low").payload(
            ModelRequest(messages=[user_message("q")], temperature=0.2)
        )
    assert "temperature" not in body and "thinking" in body
    assert "ignores temperature" in caplog.text


def test_tool_loop_begun_by_another_model_is_continued_without_thinking(
    caplog: pytest.LogCaptureFixture,
) -> None:
    foreign = assistant_message([_call("c1")], provider="deepseek", model="deepseek-chat")
    history = [user_message("go"), foreign, _text_result("c1", "r")]
    with caplog.at_level(logging.WARNING):
        body = _model(reasoning_effort="high").payload(ModelRequest(messages=history))
    assert "thinking" not in body and body["max_tokens"] == 8192
    assert "without thinking" in caplog.text
    new_turn = [*history, _ours([{"type": "text", "text": "done"}]), user_message("next")]
    assert (
        _model(reasoning_effort="high").payload(ModelRequest(messages=new_turn))["thinking"]["type"]
        == "enabled"
    )


def test_tool_loop_begun_with_signed_thinking_keeps_thinking() -> None:
    reply = _ours(
        [{"type": "reasoning", "text": "t"}, _call("toolu_1")],
        replay={"blocks": [{"type": "thinking", "signature": "S"}, {"type": "tool_use"}]},
    )
    later = _ours([_call("toolu_2")], replay={"blocks": [{"type": "tool_use"}]})
    history = [
        user_message("go"),
        reply,
        _text_result("toolu_1", "r"),
        later,
        _text_result("toolu_2", "r2"),
    ]
    body = _model(reasoning_effort="low").payload(ModelRequest(messages=history))
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}


def _growing_histories() -> list[list[Message]]:
    base = [user_message("start")]
    step1 = [
        assistant_message([_call("c1"), _call("c2")], provider="anthropic", model=MODEL),
        _text_result("c1", "one"),
    ]
    step1_done = [*step1, _text_result("c2", "two", is_error=True)]
    turn2 = [_ours([{"type": "text", "text": "answer"}]), user_message("more")]
    histories = [base, base + step1_done, base + step1_done + turn2]
    forked = [
        base[0],
        assistant_message([_call("c9")], provider="x", model="y"),
        _text_result("c9", "nine"),
    ]
    changed: Message = {**turn2[0], "content": [{"type": "text", "text": "edited"}]}  # same id
    edited = [*base, *step1_done, changed, turn2[1]]
    return [*histories, forked, edited, histories[2], []]


def test_incremental_encoding_equals_the_full_payload_through_growth_and_forks() -> None:
    model = _model()
    for messages in _growing_histories():
        request = ModelRequest(
            messages=messages, system="s", tools=[ToolSchema("read", "r", {"type": "object"})]
        )
        if not messages:
            continue
        assert json.loads(model.encode_request(request)) == model.payload(request)


def test_incremental_encoding_rechecks_pairing_of_a_grown_open_message() -> None:
    model = _model()
    first = [
        user_message("go"),
        assistant_message([_call("c1"), _call("c2")], provider="x", model="y"),
        _text_result("c1", "a"),
        _text_result("c2", "b"),
    ]
    model.encode_request(ModelRequest(messages=first))
    broken = [
        *first,
        assistant_message([_call("c3")], provider="x", model="y"),
        user_message("skipped the result"),
    ]
    with pytest.raises(WirePairingError) as caught:
        model.encode_request(ModelRequest(messages=broken))
    assert (caught.value.call_id, caught.value.message_index) == ("c3", 3)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"api_key": "sk ant"}, "Anthropic API key"),
        ({"api_key": ""}, "Anthropic API key"),
        ({"api_key": "k", "reasoning_effort": "ultra"}, "unknown reasoning effort 'ultra'"),
        ({"api_key": "k", "max_tokens": 0}, "max_tokens must be an integer >= 1"),
        ({"api_key": "k", "max_tokens": 2000, "reasoning_effort": "low"}, "too small for thinking"),
    ],
)
def test_bad_constructor_options_are_config_errors(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        AnthropicMessagesModel(MODEL, **options)


def test_history_tool_blocks_without_request_tools_still_declare_tools() -> None:
    # The API answers tool_use/tool_result blocks without `tools` with HTTP 400 "Requests
    # which include `tool_use` or `tool_result` blocks must define tools" (e.g. a
    # tool-less summary request over a tool-calling history).
    model = _model()
    history = [
        user_message("go"),
        assistant_message([_call("c1", "read"), _call("c2", "ls")], provider="x", model="y"),
        _text_result("c1", "a"),
        _text_result("c2", "b"),
        user_message("summarize"),
    ]
    request = ModelRequest(messages=history, system="s")
    body = model.payload(request)
    assert [tool["name"] for tool in body["tools"]] == ["read", "ls"]
    assert all(tool["input_schema"] == {"type": "object"} for tool in body["tools"])
    assert body["tool_choice"] == {"type": "none"}  # declared for the history, not callable
    assert json.loads(model.encode_request(request)) == body
    plain = model.payload(ModelRequest(messages=[user_message("hi")]))
    assert "tools" not in plain and "tool_choice" not in plain


def test_whitespace_only_tool_output_is_sent_as_no_output(model: AnthropicMessagesModel) -> None:
    # A string tool_result content is a text block to the API, which rejects a blank one
    # ("text content blocks must contain non-whitespace text").
    history = [
        user_message("go"),
        assistant_message([_call("c1")], provider="x", model="y"),
        _text_result("c1", "\n  "),
    ]
    body = model.payload(ModelRequest(messages=history))
    assert body["messages"][2]["content"][0]["content"] == "(no output)"
