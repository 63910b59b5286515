"""Chat Completions request bodies: message conversion and the incremental body encoder.

Wire rules follow llm-spec 2.1/2.3 and the pairing rule of 3.1: an assistant message carries
all its tool calls (raw argument strings), each tool result becomes one `tool` message
right after it, and error results say so in their text (section 4).

Encoding is incremental (PERFORMANCE.md: "the provider payload of the unchanged prefix is
encoded once and reused"). Each history message is converted and JSON-encoded once, into
one byte fragment (its 1+ wire messages joined by commas). The encoder keeps the previous
request's messages and fragments; when the new request's history starts with the very same
message objects (checked with one list comparison, which compares identical items by
pointer in C: messages are immutable values shared with the session log), only the new
tail is converted and appended to the joined fragments, and the body is one join of
cached bytes. When the prefix differs (a fork, a replaced surface, a resumed process with
fresh dicts), fragments are reused by message id where the message is identical or equal,
and the rest is converted again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec

from ..errors import LlmError
from ..log._json import JsonObject
from ..log._messages import Message
from ._errors import UNSUPPORTED_CONTENT
from ._model import ModelRequest, ToolSchema

NO_OUTPUT: Final = "(no output)"
ERROR_PREFIX: Final = "Error: "
STREAM_OPTIONS: Final[JsonObject] = {"include_usage": True}

Converter = Callable[[Message], list[JsonObject]]
"""Turns one history message into its Chat Completions wire messages (at least one)."""

_encode = msgspec.json.encode


def convert_message(message: Message, *, send_reasoning: bool) -> list[JsonObject]:
    """Convert one history message into its Chat Completions wire messages.

    Args:
        message: a user, assistant or system message.
        send_reasoning: whether an assistant's reasoning is sent back as
            `reasoning_content` (DeepSeek, llm-spec 3.3).

    Returns:
        One wire message, or for a user message holding tool results one `tool` message
        per result (then a `user` message if it also holds text); never empty.

    Raises:
        LlmError: `UNSUPPORTED_CONTENT` if the message holds an image or has an unknown role.
    """
    role = message["role"]
    if role == "assistant":
        return [_convert_assistant(message, send_reasoning=send_reasoning)]
    if role == "user":
        return _convert_user(message)
    if role == "system":
        content = _joined_text(message.get("content", []), message, sep="")
        return [{"role": "system", "content": content}]
    raise LlmError(
        f"message {message['id']} has role {role!r}, which Chat Completions cannot carry",
        code=UNSUPPORTED_CONTENT,
    )


def body_options(request: ModelRequest) -> JsonObject:
    """Return the body keys after `messages`, in wire order.

    Args:
        request: the request whose options to send.

    Returns:
        `{stream, stream_options, tools?, max_tokens?, temperature?}`.
    """
    options: JsonObject = {"stream": True, "stream_options": STREAM_OPTIONS}
    if request.tools:
        options["tools"] = tools_json(request.tools)
    if request.max_tokens is not None:
        options["max_tokens"] = request.max_tokens
    if request.temperature is not None:
        options["temperature"] = request.temperature
    return options


def tools_json(tools: Sequence[ToolSchema]) -> list[JsonObject]:
    """Return the Chat Completions `tools` list: `[{"type": "function", "function": ...}]`."""
    return [{"type": "function", "function": tool.to_json()} for tool in tools]


class RequestEncoder:
    """Build Chat Completions request bodies as bytes, reusing the unchanged prefix.

    Not safe for concurrent use from several threads; one encoder per model adapter.

    Args:
        model: the provider's model id, sent verbatim.
        convert: the message converter; called once per new (or changed) message.
    """

    def __init__(self, model: str, convert: Converter) -> None:
        self.convert = convert
        self._head = b'{"model":' + _encode(model) + b',"messages":['
        self._messages: list[Message] = []  # the previous request's history, in order
        self._fragments: list[bytes] = []  # one encoded fragment per entry of _messages
        self._joined = bytearray()  # b",".join(_fragments), grown in place
        self._system: tuple[str, bytes] | None = None
        self._options: tuple[tuple[Any, ...], bytes] | None = None

    def encode(self, request: ModelRequest) -> bytes:
        """Return the JSON body of `request`, converting only messages not seen before.

        Args:
            request: the messages and options.

        Returns:
            `{"model", "messages", "stream", "stream_options", "tools"?, "max_tokens"?,
            "temperature"?}` as compact UTF-8 JSON.

        Raises:
            LlmError: `UNSUPPORTED_CONTENT` if a new message cannot be converted; the cache
                stays consistent with the messages converted before the failure.
        """
        self._sync(request.messages)
        if request.system is None:
            head = self._head
        else:
            head = self._head + self._system_fragment(request.system)
            if self._fragments:
                head += b","
        return b"".join((head, self._joined, self._options_tail(request)))

    def _sync(self, messages: Sequence[Message]) -> None:
        cached = self._messages
        count = len(cached)
        prefix = messages[:count]
        if type(prefix) is not list:
            prefix = list(prefix)
        # List equality compares identical items by pointer, in C: the common case (the
        # same message objects as last time, plus new ones) costs no Python per message.
        if len(prefix) == count and prefix == cached:
            for message in messages[count:]:
                self._append(message, self._fragment(message))
            return
        known = {m["id"]: (m, f) for m, f in zip(cached, self._fragments, strict=True)}
        fragments: list[bytes] = []
        for message in messages:
            entry = known.get(message["id"])
            if entry is not None and (entry[0] is message or entry[0] == message):
                fragments.append(entry[1])
            else:
                fragments.append(self._fragment(message))
        self._messages = list(messages)
        self._fragments = fragments
        self._joined = bytearray(b",".join(fragments))

    def _append(self, message: Message, fragment: bytes) -> None:
        if self._fragments:
            self._joined += b","
        self._joined += fragment
        self._messages.append(message)
        self._fragments.append(fragment)

    def _fragment(self, message: Message) -> bytes:
        # The encoded list minus its brackets: the wire messages joined by commas.
        return _encode(self.convert(message))[1:-1]

    def _system_fragment(self, system: str) -> bytes:
        cached = self._system
        if cached is None or cached[0] != system:
            cached = (system, _encode({"role": "system", "content": system}))
            self._system = cached
        return cached[1]

    def _options_tail(self, request: ModelRequest) -> bytes:
        key = (tuple(request.tools), request.max_tokens, request.temperature)
        cached = self._options
        if cached is None or cached[0] != key:
            # b'],"stream":true,...}': closes the messages list, then the remaining keys.
            cached = (key, b"]," + _encode(body_options(request))[1:])
            self._options = cached
        return cached[1]


def _convert_assistant(message: Message, *, send_reasoning: bool) -> JsonObject:
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[JsonObject] = []
    for block in message.get("content", []):
        kind = block.get("type")
        if kind == "text":
            text.append(block["text"])
        elif kind == "reasoning":
            reasoning.append(block["text"])
        elif kind == "tool-call":
            function = {"name": block["name"], "arguments": block["arguments"]}
            calls.append({"id": block["id"], "type": "function", "function": function})
        elif kind == "image":
            raise _unsupported_image(message)
    out: JsonObject = {"role": "assistant", "content": "".join(text)}
    if send_reasoning and reasoning:
        out["reasoning_content"] = "".join(reasoning)
    if calls:
        out["tool_calls"] = calls
    return out


def _convert_user(message: Message) -> list[JsonObject]:
    # Tool messages first, then any text: keeps the pairing rule of llm-spec 3.1 even if a
    # user message mixes text and tool results (llm-spec 6.14).
    out: list[JsonObject] = []
    text: list[str] = []
    has_results = False
    for block in message.get("content", []):
        kind = block.get("type")
        if kind == "tool-result":
            has_results = True
            content = _joined_text(block.get("content", []), message, sep="\n") or NO_OUTPUT
            if block.get("isError") and not content.startswith("Error"):
                content = ERROR_PREFIX + content
            out.append({"role": "tool", "tool_call_id": block["toolCallId"], "content": content})
        elif kind == "text":
            text.append(block["text"])
        elif kind == "image":
            raise _unsupported_image(message)
    if text or not has_results:
        out.append({"role": "user", "content": "".join(text)})
    return out


def _joined_text(blocks: list[Any], message: Message, *, sep: str) -> str:
    parts: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            parts.append(block["text"])
        elif kind == "image":
            raise _unsupported_image(message)
    return sep.join(parts)


def _unsupported_image(message: Message) -> LlmError:
    return LlmError(
        f"message {message['id']} holds an image; the Chat Completions adapter sends text only",
        code=UNSUPPORTED_CONTENT,
    )
