"""The name the llm conftest imports: the wire-level Chat Completions server of `_wire_chat`.

`FakeOpenAIServer` is `WireChatServer` in the OpenAI dialect: the `fake_openai` fixture
gets a server that validates every request and fails the test at `stop()` on a violation.
"""

from __future__ import annotations

from ._wire_chat import RecordedRequest as RecordedRequest
from ._wire_chat import WireChatServer as FakeOpenAIServer
from ._wire_chat import chunk_event as chunk_event
from ._wire_chat import tool_delta as tool_delta
from ._wire_chat import usage_event as usage_event

__all__ = ["FakeOpenAIServer", "RecordedRequest", "chunk_event", "tool_delta", "usage_event"]
