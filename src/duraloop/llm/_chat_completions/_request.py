"""Chat Completions request bodies: message conversion, the pairing check, the body encoder.

Shared by the OpenAI and DeepSeek adapters. Wire rules follow
docs/providers.md#chat-completions-wire, the pairing rule of 3.1 and the error-result rule of
section 4: an assistant message carries all its tool calls (raw argument strings) and string
`content` (never null, `""` without text); each tool result becomes one `tool` message right after
it, in call order, whose text says when the call failed and is never empty (`(no output)`). Every
tool-call id and tool-result id goes through one `ToolIdMap(CHAT_COMPLETIONS_IDS)`, so a call and
its result carry the same wire id and a history from another provider (e.g. Anthropic's 64-character
ids) continues here (docs/providers.md#tool-call-ids).

Encoding is incremental (README.md#performance: "the provider payload of the unchanged prefix is
encoded once and reused"). Each history message is converted and JSON-encoded once, into
one byte fragment (its 1+ wire messages joined by commas). The encoder keeps the previous
request's messages, wire dicts and fragments; when the new request's history starts with
the very same message objects (one list comparison, which compares identical items by
pointer in C: messages are immutable values shared with the session log), only the new
tail is converted and appended, and the body is one join of cached bytes. When the prefix
differs (a fork, a replaced surface, a resumed process with fresh dicts), fragments are
reused by message id where the message is identical or equal, and the rest is converted.

The pairing check (`check_chat_completions_messages`) runs on the exact wire messages of
every body before it is returned, and is incremental the same way: after a body passes,
everything before its last non-tool message is a sequence of complete call groups that
cannot change while the prefix is unchanged, so the next body is checked from there on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, Literal, TypeAlias

import msgspec

from ...errors import LlmError, WirePairingError
from ...log import JsonObject, Message
from ...log.vocabulary import (
    BLOCK_IMAGE,
    BLOCK_REASONING,
    BLOCK_TEXT,
    BLOCK_TOOL_CALL,
    BLOCK_TOOL_RESULT,
    UNSUPPORTED_CONTENT,
)
from .._model import ModelRequest, ToolSchema
from .._tool_ids import CHAT_COMPLETIONS_IDS, ToolIdMap
from ._pairing import check_chat_completions_messages

NO_OUTPUT: Final = "(no output)"
ERROR_PREFIX: Final = "Error: "
STREAM_OPTIONS: Final[JsonObject] = {"include_usage": True}

ReasoningEcho: TypeAlias = Literal["never", "present", "always"]
"""How an assistant's reasoning goes back as `reasoning_content`: `never` (OpenAI, which
has no such field), `present` (only when the message has reasoning), `always` (as
`present`, and `""` when it has none: DeepSeek in thinking mode)."""

Converter: TypeAlias = Callable[[Message], list[JsonObject]]
"""Turns one history message into its Chat Completions wire messages (at least one)."""

_encode = msgspec.json.encode


def convert_message(
    message: Message, *, echo: ReasoningEcho, wire_id: Callable[[str], str]
) -> list[JsonObject]:
    """Convert one history message into its Chat Completions wire messages.

    Args:
        message: a user, assistant or system message.
        echo: how the assistant's reasoning blocks are sent back (see `ReasoningEcho`;
            DeepSeek's rule is docs/providers.md#deepseek-thinking-mode).
        wire_id: maps a history tool-call id to the id sent (a `ToolIdMap.to_wire`).

    Returns:
        One wire message, or for a user message holding tool results one `tool` message
        per result (then a `user` message if it also holds text); never empty.

    Raises:
        LlmError: `UNSUPPORTED_CONTENT` if the message holds an image or has an unknown role.
        WirePairingError: `TOOL_ID_COLLISION` if two history ids map to one wire id.
    """
    role = message["role"]
    if role == "assistant":
        return [_convert_assistant(message, echo=echo, wire_id=wire_id)]
    if role == "user":
        return _convert_user(message, wire_id=wire_id)
    if role == "system":
        content = _joined_text(message.get("content", []), message, sep="")
        return [{"role": "system", "content": content}]
    raise LlmError(
        f"message {message['id']} has role {role!r}, which Chat Completions cannot carry",
        code=UNSUPPORTED_CONTENT,
    )


def body_options(
    request: ModelRequest,
    *,
    extra: JsonObject,
    max_tokens_field: str,
    default_max_tokens: int | None,
) -> JsonObject:
    """Return the body keys after `messages`, in wire order; absent options are omitted.

    Args:
        request: the request whose tools and sampling options to send.
        extra: dialect keys placed after `stream_options` (DeepSeek's `thinking` and
            `reasoning_effort`, OpenAI's `reasoning_effort`).
        max_tokens_field: the name of the output cap (`max_tokens` for DeepSeek,
            `max_completion_tokens` for OpenAI).
        default_max_tokens: the adapter's cap, used when `request.max_tokens` is None.

    Returns:
        `{stream: true, stream_options: {include_usage: true}, **extra, tools?,
        <max_tokens_field>?, temperature?}`; usage arrives in a trailing chunk and is held
        until `[DONE]` (docs/providers.md#chat-completions-wire).
    """
    options: JsonObject = {"stream": True, "stream_options": STREAM_OPTIONS, **extra}
    if request.tools:
        options["tools"] = tools_json(request.tools)
    max_tokens = request.max_tokens if request.max_tokens is not None else default_max_tokens
    if max_tokens is not None:
        options[max_tokens_field] = max_tokens
    if request.temperature is not None:
        options["temperature"] = request.temperature
    return options


def tools_json(tools: Sequence[ToolSchema]) -> list[JsonObject]:
    """Return the Chat Completions `tools` list.

    Args:
        tools: the tools the model may call.

    Returns:
        `[{"type": "function", "function": {"name", "description", "parameters"}}, ...]`.
    """
    return [{"type": "function", "function": tool.to_json()} for tool in tools]


def check_from(wire: Sequence[JsonObject], start: int, *, provider: str) -> int:
    """Check `wire[start:]` and return where the next check of a longer list may start.

    Args:
        wire: the wire messages of a body (without a leading system message, which no
            pairing rule concerns), `wire[:start]` already checked.
        start: the index of a non-tool message (or 0) from which to check.
        provider: the route, for `check_chat_completions_messages`.

    Returns:
        The index of the last non-tool message of `wire` (0 when there is none): every call
        group before it is complete, so a list that extends `wire` need only be checked
        from there.

    Raises:
        WirePairingError: on the first violation; its index counts from the start of `wire`.
    """
    try:
        check_chat_completions_messages(wire[start:] if start else wire, provider=provider)
    except WirePairingError:
        if not start:
            raise
        # Re-check the whole list so the error's message index is the true one.
        check_chat_completions_messages(wire, provider=provider)
        raise
    index = len(wire) - 1
    while index > 0 and wire[index].get("role") == "tool":
        index -= 1
    return max(index, 0)


class RequestEncoder:
    """Build Chat Completions request bodies as bytes, reusing the unchanged prefix.

    Not safe for concurrent use from several threads; one encoder per model adapter.

    Args:
        model: the provider's model id, sent verbatim.
        provider: the route, for the pairing check's provider rules and messages.
        echo: how assistant reasoning is sent back (see `ReasoningEcho`).
        options: builds the body keys after `messages` from a request; must depend only on
            the request's `tools`, `max_tokens` and `temperature`.
    """

    def __init__(
        self,
        model: str,
        *,
        provider: str,
        echo: ReasoningEcho,
        options: Callable[[ModelRequest], JsonObject],
    ) -> None:
        self.provider = provider
        self.echo: ReasoningEcho = echo
        self.options = options
        self.ids = ToolIdMap(CHAT_COMPLETIONS_IDS)
        """One id map for the adapter's life: `wire_tool_id` is deterministic, so this gives
        the ids a fresh map per request would, and cached fragments stay valid."""
        self._head = b'{"model":' + _encode(model) + b',"messages":['
        self._messages: list[Message] = []  # the previous request's history, in order
        self._wire: list[list[JsonObject]] = []  # the wire messages of each of _messages
        self._fragments: list[bytes] = []  # the encoded wire messages of each of _messages
        self._flat: list[JsonObject] = []  # every wire message, in order (no system)
        self._joined = bytearray()  # b",".join(_fragments), grown in place
        self._checked = 0  # _flat[:_checked] holds complete, checked call groups
        self._system: tuple[str, bytes] | None = None
        self._options: tuple[tuple[Any, ...], bytes] | None = None

    def convert(self, message: Message) -> list[JsonObject]:
        """Convert one history message with this encoder's reasoning echo and id map.

        Args:
            message: the history message.

        Returns:
            Its wire messages (see `convert_message`).
        """
        return convert_message(message, echo=self.echo, wire_id=self.ids.to_wire)

    def encode(self, request: ModelRequest) -> bytes:
        """Return the JSON body of `request`, converting only messages not seen before.

        Args:
            request: the messages and options.

        Returns:
            `{"model", "messages", ...options}` as compact UTF-8 JSON, its messages checked.

        Raises:
            LlmError: `UNSUPPORTED_CONTENT` if a new message cannot be converted; the cache
                stays consistent with the messages converted before the failure.
            WirePairingError: if the wire messages break the pairing rule
                (docs/providers.md#chat-completions-pairing); nothing may be sent.
        """
        self._sync(request.messages)
        self._checked = check_from(self._flat, self._checked, provider=self.provider)
        if request.system is None:
            head = self._head
        else:
            head = self._head + self._system_fragment(request.system)
            if self._fragments:
                head += b","
        return b"".join((head, self._joined, self._options_tail(request)))

    def wire_messages(self, request: ModelRequest) -> list[JsonObject]:
        """Return the wire `messages` of `request`, converted from scratch with a fresh id map.

        Args:
            request: the messages and system prompt.

        Returns:
            The system message (if any) then every history message's wire messages; the
            same value `encode` sends, not checked.

        Raises:
            LlmError: `UNSUPPORTED_CONTENT` if a message cannot be converted.
        """
        ids = ToolIdMap(CHAT_COMPLETIONS_IDS)
        messages: list[JsonObject] = []
        if request.system is not None:
            messages.append({"role": "system", "content": request.system})
        for message in request.messages:
            messages.extend(convert_message(message, echo=self.echo, wire_id=ids.to_wire))
        return messages

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
                self._append(message, self.convert(message))
            return
        known = {
            m["id"]: (m, w, f) for m, w, f in zip(cached, self._wire, self._fragments, strict=True)
        }
        self._messages, self._wire, self._fragments, self._flat = [], [], [], []
        self._joined = bytearray()
        self._checked = 0
        for message in messages:
            entry = known.get(message["id"])
            if entry is not None and (entry[0] is message or entry[0] == message):
                self._append(message, entry[1], entry[2])
            else:
                self._append(message, self.convert(message))

    def _append(self, message: Message, wire: list[JsonObject], fragment: bytes = b"") -> None:
        if not fragment:
            fragment = _encode(wire)[1:-1]  # the encoded list minus its brackets
        if self._fragments:
            self._joined += b","
        self._joined += fragment
        self._messages.append(message)
        self._wire.append(wire)
        self._fragments.append(fragment)
        self._flat.extend(wire)

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
            cached = (key, b"]," + _encode(self.options(request))[1:])
            self._options = cached
        return cached[1]


def _convert_assistant(
    message: Message, *, echo: ReasoningEcho, wire_id: Callable[[str], str]
) -> JsonObject:
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[JsonObject] = []
    for block in message.get("content", []):
        kind = block.get("type")
        if kind == BLOCK_TEXT:
            text.append(block["text"])
        elif kind == BLOCK_REASONING:
            reasoning.append(block["text"])
        elif kind == BLOCK_TOOL_CALL:
            function = {"name": block["name"], "arguments": block["arguments"]}
            calls.append({"id": wire_id(block["id"]), "type": "function", "function": function})
        elif kind == BLOCK_IMAGE:
            raise _unsupported_image(message)
    out: JsonObject = {"role": "assistant", "content": "".join(text)}
    if echo != "never" and (reasoning or echo == "always"):
        out["reasoning_content"] = "".join(reasoning)
    if calls:
        out["tool_calls"] = calls
    return out


def _convert_user(message: Message, *, wire_id: Callable[[str], str]) -> list[JsonObject]:
    # Tool messages first, then any text: keeps the pairing rule of
    # docs/providers.md#chat-completions-pairing even if a user message mixes text and tool results
    # (docs/providers.md#chat-completions-wire).
    out: list[JsonObject] = []
    text: list[str] = []
    has_results = False
    for block in message.get("content", []):
        kind = block.get("type")
        if kind == BLOCK_TOOL_RESULT:
            has_results = True
            content = _joined_text(block.get("content", []), message, sep="\n") or NO_OUTPUT
            if block.get("isError") and not content.startswith("Error"):
                content = ERROR_PREFIX + content
            call_id = wire_id(block["toolCallId"])
            out.append({"role": "tool", "tool_call_id": call_id, "content": content})
        elif kind == BLOCK_TEXT:
            text.append(block["text"])
        elif kind == BLOCK_IMAGE:
            raise _unsupported_image(message)
    if text or not has_results:
        out.append({"role": "user", "content": "".join(text)})
    return out


def _joined_text(blocks: list[Any], message: Message, *, sep: str) -> str:
    parts: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == BLOCK_TEXT:
            parts.append(block["text"])
        elif kind == BLOCK_IMAGE:
            raise _unsupported_image(message)
    return sep.join(parts)


def _unsupported_image(message: Message) -> LlmError:
    return LlmError(
        f"message {message['id']} holds an image; the Chat Completions adapters send text "
        "only; remove the image or use a provider that accepts images",
        code=UNSUPPORTED_CONTENT,
    )
