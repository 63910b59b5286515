"""Chat Completions request bodies: the body encoder, its options and the pairing check.

Shared by the OpenAI and DeepSeek adapters. Wire rules follow
docs/providers.md#chat-completions-wire, the pairing rule of 3.1 and the error-result rule of
section 4: an assistant message carries all its tool calls (raw argument strings) and string
`content` (never null, `""` without text); each tool result becomes one `tool` message right after
it, in call order, whose text says when the call failed and is never empty (`(no output)`). Every
tool-call id and tool-result id goes through one `ToolIdMap(CHAT_COMPLETIONS_IDS)`, so a call and
its result carry the same wire id and a history from another provider (e.g. Anthropic's 64-character
ids) continues here (docs/providers.md#tool-call-ids).

Encoding is incremental (README.md#performance: "the provider payload of the unchanged prefix is
encoded once and reused"). Each history message is converted once (`_convert`), and every
wire message is JSON-encoded once, by one reused `msgspec.json.Encoder`: the encoder keeps the
previous request's messages, their wire dicts, and the bytes `,<wire 1>,<wire 2>...` in one
growing buffer. When the new request's history starts with the very same message objects (one
list comparison, which compares identical items by pointer in C: messages are immutable values
shared with the session log), only the new tail is converted, and its wire messages are encoded
in one msgspec call appended to the buffer; the body is one join of cached bytes. When the
prefix differs (a fork, a replaced surface, another process's fresh dicts), wire dicts are
reused by message id where the message is identical or equal, the rest is converted, and the
whole list is encoded again in one call. A cold cache (a resumed process) thus costs one
conversion per message, one msgspec call and one pairing pass, with the garbage collector
paused for the bulk conversion (`_bulk.gc_paused`).

The pairing check (`check_chat_completions_messages`) runs on the exact wire messages of
every body before it is returned, and is incremental the same way: after a body passes,
everything before its last non-tool message is a sequence of complete call groups that
cannot change while the prefix is unchanged, so the next body is checked from there on.

A resumed process skips even the cold conversion when the history is a snapshot's restored
`LazyMessages` carrying an encoded prefix of this encoder's key (`_seed.py`,
docs/store.md#snapshots): the buffer opens with those bytes, `_messages`/`_wire`/`_flat` hold
only what follows the prefix, and the pairing check starts after it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain
from typing import Any, Final, TypeAlias

import msgspec

from ...errors import LlmError, WirePairingError
from ...log import EncodedPrefix, JsonObject, LazyMessages, Message
from .._bulk import gc_paused
from .._model import ModelRequest, ToolSchema
from .._tool_ids import CHAT_COMPLETIONS_IDS, ToolIdMap
from ._convert import ERROR_PREFIX, NO_OUTPUT, ReasoningEcho, convert_message
from ._pairing import check_chat_completions_messages
from ._seed import check_whole, encoding_key, seed_bytes

__all__ = [
    "ERROR_PREFIX",
    "NO_OUTPUT",
    "STREAM_OPTIONS",
    "Converter",
    "ReasoningEcho",
    "RequestEncoder",
    "body_options",
    "check_from",
    "convert_message",
    "tools_json",
]

STREAM_OPTIONS: Final[JsonObject] = {"include_usage": True}

Converter: TypeAlias = Callable[[Message], list[JsonObject]]
"""Turns one history message into its Chat Completions wire messages (at least one)."""

_encoder: Final = msgspec.json.Encoder()
_encode: Final = _encoder.encode


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
        the ids a fresh map per request would, and cached conversions stay valid."""
        self._head = b'{"model":' + _encode(model) + b',"messages":['
        self._messages: list[Message] = []  # the previous request's history, in order
        self._wire: list[list[JsonObject]] = []  # the wire messages of each of _messages
        self._flat: list[JsonObject] = []  # every wire message, in order (no system)
        self._joined = bytearray()  # b"," + JSON of each of _flat, grown in place
        self._checked = 0  # _flat[:_checked] holds complete, checked call groups
        self._system: tuple[str, bytes] | None = None
        self._options: tuple[tuple[Any, ...], bytes] | None = None
        # A seed from a snapshot's encoded prefix: the restored messages' prefix (its
        # token), whose wire bytes open _joined; _messages/_wire/_flat then hold only what
        # follows it (docs/store.md#snapshots).
        self._base: LazyMessages | None = None
        self._base_bytes = 0

    @property
    def encoding_key(self) -> str:
        """The key of this encoder's encoded prefixes: wire version, route and reasoning echo."""
        return encoding_key(self.provider, self.echo)

    @property
    def seeded(self) -> bool:
        """Whether the cache starts from a snapshot's encoded prefix (nothing converted)."""
        return self._base is not None

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
        self._check()
        tail = self._options_tail(request)
        if request.system is not None:
            return b"".join((self._head, self._system_fragment(request.system), self._joined, tail))
        with memoryview(self._joined) as joined:  # without its leading comma, not copied
            return b"".join((self._head, joined[1:], tail))

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

    def encoded_prefix(self, messages: Sequence[Message]) -> EncodedPrefix | None:
        """Return the wire messages of `messages` as a snapshot's encoded prefix, or None.

        Brings the cache up to `messages` (converting only what is new) and checks their
        pairing, as a request would; a restored session seeds a fresh encoder of the same
        `encoding_key` from it instead of converting (docs/store.md#snapshots).

        Args:
            messages: the session's derived messages (all of them).

        Returns:
            The JSON array of their wire messages, with the tool-id aliases it used; None
            if they cannot be converted or do not pair.
        """
        try:
            self._sync(messages)
            self._check()
        except (LlmError, WirePairingError):
            return None
        base = self._base
        covered = len(self._messages) + (base.prefix_count if base is not None else 0)
        if covered != len(messages):  # pragma: no cover - _sync covers them all
            return None
        joined = self._joined
        body = b"[" + joined[1:] + b"]" if joined else b"[]"
        aliases = self.ids.aliases()
        return EncodedPrefix(
            key=self.encoding_key,
            messages=covered,
            body=body,
            meta={"ids": aliases} if aliases else {},
        )

    def _check(self) -> None:
        """Check the pairing of every wire message not covered by a seed (see `_seed`)."""
        try:
            self._checked = check_from(self._flat, self._checked, provider=self.provider)
        except WirePairingError:
            base = self._base
            if base is None:
                raise
            # The error's index counts the seed's wire messages too: convert them (cold)
            # and check the whole list, which raises the same violation at its true index.
            whole = chain(base[: base.prefix_count], self._messages)
            check_whole(whole, echo=self.echo, provider=self.provider)
            raise

    def _seed(self, messages: LazyMessages) -> bool:
        """Open the empty cache with the encoded prefix `messages` carries (`seed_bytes`)."""
        count = messages.prefix_count
        joined = seed_bytes(messages.encoding(self.encoding_key), messages=count, ids=self.ids)
        if joined is None:
            return False
        self._joined, self._base, self._base_bytes = joined, messages, len(joined)
        return True

    def _sync(self, messages: Sequence[Message]) -> None:
        base = self._base
        if base is not None:
            if isinstance(messages, LazyMessages) and messages.shares_prefix(base.token):
                messages = messages.tail
            else:  # another history: forget the seed, convert this one
                self._base, self._base_bytes = None, 0
                self._messages, self._wire, self._flat = [], [], []
                self._joined = bytearray()
                self._checked = 0
        elif not self._messages and isinstance(messages, LazyMessages) and self._seed(messages):
            messages = messages.tail
        cached = self._messages
        count = len(cached)
        prefix = messages[:count]
        if type(prefix) is not list:
            prefix = list(prefix)
        # List equality compares identical items by pointer, in C: the common case (the
        # same message objects as last time, plus new ones) costs no Python per message.
        if len(prefix) == count and prefix == cached:
            self._extend(messages[count:], {})
            return
        known = {m["id"]: (m, w) for m, w in zip(cached, self._wire, strict=True)}
        self._messages, self._wire, self._flat = [], [], []
        del self._joined[self._base_bytes :]
        self._checked = 0
        self._extend(messages, known)

    def _extend(
        self, messages: Sequence[Message], known: dict[str, tuple[Message, list[JsonObject]]]
    ) -> None:
        """Append `messages`, reusing the wire messages of `known` ones, then encode them.

        Whatever was converted before a conversion error stays cached, and encoded.
        """
        convert = convert_message  # looked up per call: tests count conversions
        echo, wire_id = self.echo, self.ids.to_wire
        converted, wires, flat = self._messages, self._wire, self._flat
        start, first = len(flat), len(wires)
        append = wires.append
        try:
            with gc_paused(len(messages)):
                if not known:
                    for message in messages:
                        append(convert(message, echo=echo, wire_id=wire_id))
                else:
                    for message in messages:
                        entry = known.get(message["id"])
                        if entry is not None and (entry[0] is message or entry[0] == message):
                            append(entry[1])
                        else:
                            append(convert(message, echo=echo, wire_id=wire_id))
        finally:
            done = len(wires) - first
            converted += messages if done == len(messages) else messages[:done]
            flat += chain.from_iterable(wires[first:] if first else wires)
            if len(flat) > start:
                # One msgspec call for every new wire message: b"[a,b]" becomes b",a,b".
                joined = self._joined
                at = len(joined)
                _encoder.encode_into(flat[start:] if start else flat, joined, at)
                joined[at] = 0x2C  # ","
                del joined[-1]  # "]"

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
