"""Anthropic Messages request bodies: the thinking options and the incremental body encoder.

Wire rules (docs/providers.md#anthropic-wire, #anthropic-pairing, #error-tool-results, #adapters),
beyond the conversion of each message (`_convert`):

- Consecutive user-role messages (tool results, user text, history system text) become ONE
  user message whose content starts with every `tool_result` block, then the other blocks
  (pairing rule: Anthropic Messages, docs/providers.md#anthropic-pairing). Consecutive assistant
  messages merge too (the API would merge them anyway). A user message of one text block is sent as
  a string.
- Without `tools` in the request, a history holding tool calls still declares them (by
  name, with `tool_choice: none`): the API rejects tool blocks without `tools`.
- Tool-call ids go through one `ToolIdMap(ANTHROPIC_IDS)` per encoder (ids map
  deterministically, so this equals one map per request, and a collision among the ids
  sent is still caught).

`MessagesEncoder` builds the body incrementally, like the Chat Completions encoder: every
history message is converted once, and every finished wire message is JSON-encoded once (all
those one request closes in one msgspec call; a cold cache converts with the GC paused). Only
the last wire message (which may still grow, e.g. by another tool result) is encoded
again on each request. `check_anthropic_messages` runs on the wire messages before the body
is built; wire messages an earlier request checked and that have not changed since are not
checked again (the check restarts at the last checked assistant message, the only one that
pairs with what follows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import msgspec

from ...errors import WirePairingError
from ...log import JsonObject, Message
from .._bulk import gc_paused
from .._model import ModelRequest, ToolSchema
from ._convert import THINKING_TYPES, ConvertedMessage, MessageConverter, place_thinking
from ._pairing import check_anthropic_messages

HISTORY_TOOL_DESCRIPTION: Final = "A tool called earlier in this conversation; not available now."

_encoder: Final = msgspec.json.Encoder()
_encode: Final = _encoder.encode


class _Group:
    """One wire message being folded from consecutive history messages of one role."""

    __slots__ = ("blocks", "results", "role", "thinking")

    def __init__(self, role: str) -> None:
        self.role = role
        self.results: list[JsonObject] = []
        self.blocks: list[JsonObject] = []
        self.thinking = False

    def add(self, part: ConvertedMessage) -> None:
        self.results.extend(part.results)
        self.blocks.extend(part.blocks)
        self.thinking = self.thinking or part.thinking

    def _assistant_blocks(self) -> list[JsonObject]:
        return place_thinking(self.blocks) if self.thinking else self.blocks

    def wire(self) -> JsonObject | None:
        """Return the wire message, or None when it has no content to send."""
        if self.role == "assistant":
            blocks = self._assistant_blocks()
            return {"role": "assistant", "content": blocks} if blocks else None
        content: list[JsonObject] = [*self.results, *self.blocks]
        if not content:
            return None
        if len(content) == 1 and content[0]["type"] == "text":
            return {"role": "user", "content": content[0]["text"]}
        return {"role": "user", "content": content}

    def starts_with_thinking(self) -> bool:
        if not self.thinking:
            return False
        blocks = self._assistant_blocks()
        return bool(blocks) and blocks[0]["type"] in THINKING_TYPES

    def is_turn_start(self) -> bool:
        """Whether this is a user message that answers no tool call (a new user turn)."""
        return self.role == "user" and not self.results


def tools_json(tools: Sequence[ToolSchema]) -> list[JsonObject]:
    """Return the Messages `tools` list: `[{"name", "description", "input_schema"}]`."""
    return [
        {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
        for tool in tools
    ]


@dataclass(frozen=True)
class BodyOptions:
    """The request-level body keys around `messages` (docs/providers.md#anthropic-wire).

    Args:
        max_tokens: the output cap, thinking included (the API requires it).
        thinking: `{"type": "enabled", "budget_tokens"}` or None for no thinking.
        temperature: sent only when thinking is off (the API rejects it with thinking).
    """

    max_tokens: int
    thinking: JsonObject | None
    temperature: float | None


class OptionsFor(Protocol):
    """Computes the body options of a request; `thinking_allowed` says if thinking may be on."""

    def __call__(self, request: ModelRequest, *, thinking_allowed: bool) -> BodyOptions:
        """Return `max_tokens`, `thinking` and `temperature` for `request`."""
        ...


class MessagesEncoder:
    """Build Messages request bodies, converting and encoding each message once.

    Not safe for concurrent use; one encoder per adapter.

    Args:
        model: the model id, sent verbatim.
        converter: turns one history message into wire blocks.
        options_for: computes `max_tokens`, `thinking` and `temperature` for a request.
    """

    def __init__(self, model: str, converter: MessageConverter, options_for: OptionsFor) -> None:
        self.model = model
        self.converter = converter
        self.options_for = options_for
        self._reset()

    def _reset(self) -> None:
        self._messages: list[Message] = []  # the history folded so far, in order
        self._parts: dict[str, tuple[Message, ConvertedMessage]] = {}
        self._closed: list[JsonObject] = []  # finished wire messages
        self._joined = bytearray()  # their JSON, joined by commas
        self._encoded = 0  # how many of _closed _joined holds
        self._open: _Group | None = None  # the last wire message, still growing
        self._loop_head: bool | None = None  # see `_thinking_allowed`
        self._checked = 0  # closed wire messages already pairing-checked
        self._tool_names: dict[str, None] = {}  # tool_use names in the history, first seen first

    def body(self, request: ModelRequest) -> JsonObject:
        """Return the body of `request` as a dict (the value `encode` returns as bytes).

        Args:
            request: the messages and options.

        Returns:
            `{model, max_tokens, system?, messages, tools?, tool_choice?, thinking?, temperature?,
            stream: true}`.

        Raises:
            LlmError: `UNSUPPORTED_CONTENT` if a message cannot be converted.
            WirePairingError: if the wire messages break the pairing rule
                (docs/providers.md#anthropic-pairing).
        """
        messages = self._sync(request.messages)
        options = self.options_for(request, thinking_allowed=self._thinking_allowed())
        head, tail = _head_tail(self.model, request, options, self._tool_names)
        return {**head, "messages": messages, **tail}

    def encode(self, request: ModelRequest) -> bytes:
        """Return the body of `request` as compact JSON bytes, reusing encoded messages.

        Args:
            request: the messages and options.

        Returns:
            The UTF-8 JSON of `body(request)`.

        Raises:
            LlmError: `UNSUPPORTED_CONTENT` if a message cannot be converted.
            WirePairingError: if the wire messages break the pairing rule
                (docs/providers.md#anthropic-pairing); checked before any byte is built, so nothing
                unpaired is ever sent.
        """
        messages = self._sync(request.messages)
        options = self.options_for(request, thinking_allowed=self._thinking_allowed())
        head, tail = _head_tail(self.model, request, options, self._tool_names)
        head_bytes = _encode({**head, "messages": []})[:-2]  # drop the closing `]}`
        open_bytes = b""
        if len(messages) > len(self._closed):
            open_bytes = (b"," if self._closed else b"") + _encode(messages[-1])
        tail_bytes = b"]," + _encode(tail)[1:]  # `tail` always holds `stream`
        return b"".join((head_bytes, self._joined, open_bytes, tail_bytes))

    def _sync(self, messages: Sequence[Message]) -> list[JsonObject]:
        count = len(self._messages)
        prefix = messages[:count]
        if type(prefix) is not list:
            prefix = list(prefix)
        if len(prefix) != count or prefix != self._messages:
            parts = self._parts
            self._reset()
            self._parts = {
                m["id"]: entry
                for m in messages
                if (entry := parts.get(m["id"])) is not None and (entry[0] is m or entry[0] == m)
            }
            count = 0
        try:
            with gc_paused(len(messages) - count):
                for message in messages[count:]:
                    self._fold(message)
        finally:
            self._encode_closed()
        wire = list(self._closed)
        last = self._open.wire() if self._open is not None else None
        if last is not None:
            wire.append(last)
        self._check(wire)
        return wire

    def _fold(self, message: Message) -> None:
        entry = self._parts.get(message["id"])
        if entry is None or not (entry[0] is message or entry[0] == message):
            entry = (message, self.converter.convert(message))
            self._parts[message["id"]] = entry
        self._messages.append(message)
        part = entry[1]
        if not part.results and not part.blocks:
            return  # nothing to send; the neighbours may merge
        if part.role == "assistant":
            for block in part.blocks:
                if block["type"] == "tool_use":
                    self._tool_names.setdefault(block["name"], None)
        if self._open is None or self._open.role != part.role:
            self._close()
            self._open = _Group(part.role)
        self._open.add(part)

    def _close(self) -> None:
        group = self._open
        self._open = None
        if group is None:
            return
        message = group.wire()
        if message is None:
            return
        if group.is_turn_start():
            self._loop_head = None
        elif group.role == "assistant" and self._loop_head is None:
            self._loop_head = group.starts_with_thinking()
        self._closed.append(message)  # encoded by `_encode_closed`, with the others

    def _encode_closed(self) -> None:
        # Every newly closed wire message in one msgspec call: b"[a,b]" appended to the
        # buffer becomes b",a,b" (or b"a,b" in an empty buffer).
        new = self._closed[self._encoded :] if self._encoded else self._closed
        if not new:
            return
        joined = self._joined
        at = len(joined)
        _encoder.encode_into(new, joined, at)
        del joined[-1]  # "]"
        if at:
            joined[at] = 0x2C  # ","
        else:
            del joined[0]  # "["
        self._encoded = len(self._closed)

    def _thinking_allowed(self) -> bool:
        # While a tool loop continues (assistant messages after the last user turn), the
        # first assistant message of the loop must start with a thinking block, or the API
        # rejects thinking ("When `thinking` is enabled, a final `assistant` message must
        # start with a thinking block ... To avoid this requirement, disable `thinking`").
        head = self._loop_head
        group = self._open
        if group is not None and group.wire() is not None:
            if group.is_turn_start():
                head = None
            elif group.role == "assistant" and head is None:
                head = group.starts_with_thinking()
        return head is not False

    def _check(self, wire: list[JsonObject]) -> None:
        # The closed prefix was checked by an earlier request and has not changed; only
        # its last assistant message can still pair with what follows.
        start = self._checked
        if start and wire[start - 1]["role"] == "assistant":
            start -= 1
        try:
            check_anthropic_messages(wire[start:] if start else wire)
        except WirePairingError:
            if start:
                check_anthropic_messages(wire)  # the same error, with absolute indices
            raise
        self._checked = len(self._closed)


def _head_tail(
    model: str, request: ModelRequest, options: BodyOptions, history_tools: Mapping[str, None]
) -> tuple[JsonObject, JsonObject]:
    head: JsonObject = {"model": model, "max_tokens": options.max_tokens}
    if request.system is not None and request.system.strip():
        head["system"] = request.system
    tail: JsonObject = {}
    if request.tools:
        tail["tools"] = tools_json(request.tools)
    elif history_tools:
        # The API rejects a body whose messages hold `tool_use`/`tool_result` blocks without
        # `tools` ("Requests which include `tool_use` or `tool_result` blocks must define
        # tools"): declare the history's tools by name, and forbid new calls.
        tail["tools"] = [
            {
                "name": name,
                "description": HISTORY_TOOL_DESCRIPTION,
                "input_schema": {"type": "object"},
            }
            for name in history_tools
        ]
        tail["tool_choice"] = {"type": "none"}
    if options.thinking is not None:
        tail["thinking"] = options.thinking
    elif options.temperature is not None:
        tail["temperature"] = options.temperature
    tail["stream"] = True
    return head, tail
