"""The wire server's own request validator catches what a provider rejects.

See docs/providers.md#chat-completions-pairing, #deepseek-thinking-mode.

The adapter tests rely on the server failing them when a request is invalid; this pins that
the validator (independent of duraloop's pairing views) does fail, one rule at a time,
and that the server answers such a request with a 400 and fails its test at `stop()`.
"""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from ._wire_chat import Dialect, WireChatServer, validate_chat_request


def _body(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": list(messages),
        "stream": True,
        "stream_options": {"include_usage": True},
        **extra,
    }


USER = {"role": "user", "content": "q"}


def _assistant(*ids: str, reasoning: str | None = "r", content: Any = "") -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
        ],
    }
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return message


def _tool(call_id: str, content: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _rules(body: dict[str, Any], dialect: Dialect = "deepseek", **kw: Any) -> list[str]:
    return [rule for _, rule, _ in validate_chat_request(body, dialect=dialect, **kw)]


def test_validator_accepts_paired_parallel_calls() -> None:
    body = _body(USER, _assistant("a", "b"), _tool("a"), _tool("b"), USER)
    assert _rules(body) == []
    openai = _body(USER, _assistant("a", reasoning=None, content=None), _tool("a"))
    assert _rules(openai, "openai") == []


@pytest.mark.parametrize(
    ("messages", "rule"),
    [
        ([USER, _assistant("a", "b"), _tool("a"), USER], "3.1 unanswered"),
        ([USER, _assistant("a"), USER, _tool("a")], "3.1 unanswered"),
        ([USER, _tool("a")], "3.1 unexpected tool"),
        ([USER, _assistant("a", "b"), _tool("b"), _tool("a")], "3.1 order"),
        ([USER, _assistant("a"), _tool("a"), _tool("a")], "3.1 order"),
        ([USER, _assistant("a"), _tool("a", "")], "tool content"),
        ([USER, _assistant("x" * 41), _tool("x" * 41)], "tool call id"),
        ([USER, _assistant("a", content=None), _tool("a")], "3.3 content"),
        ([USER, _assistant("a", reasoning=None), _tool("a")], "3.3 reasoning"),
        ([USER, {"role": "assistant", "content": None}], "3.3 content"),
    ],
)
def test_validator_reports_each_broken_rule(messages: list[dict[str, Any]], rule: str) -> None:
    assert rule in _rules(_body(*messages))


def test_validator_requires_reasoning_only_in_thinking_mode_and_byte_equal_when_streamed() -> None:
    no_reasoning = [USER, _assistant("a", reasoning=None), _tool("a")]
    assert _rules(_body(*no_reasoning, thinking={"type": "disabled"})) == []
    streamed = {"a": "exact text "}
    echoed = [USER, _assistant("a", reasoning="exact text"), _tool("a")]
    assert _rules(_body(*echoed), streamed_reasoning=streamed) == ["3.3 reasoning echo"]


def test_validator_rejects_deepseek_fields_on_openai() -> None:
    body = _body(USER, _assistant("a"), _tool("a"), thinking={"type": "enabled"})
    assert _rules(body, "openai") == ["body", "openai fields"]


def test_server_answers_an_invalid_request_with_400_and_fails_its_test() -> None:
    server = WireChatServer("openai")
    server.start()
    try:
        response = httpx2.post(
            f"{server.base_url}/chat/completions",
            json=_body(USER, _tool("orphan")),
            headers={"authorization": "Bearer sk-x"},
        )
        assert response.status_code == 400
        assert "must be a response to a preceding message" in response.json()["error"]["message"]
    finally:
        with pytest.raises(AssertionError, match="3.1 unexpected tool"):
            server.stop()
