"""Seeding a Chat Completions encoder from a snapshot's encoded prefix (docs/store.md#snapshots).

A loop that writes a snapshot asks its model for the encoded wire messages of the derived
messages (`RequestEncoder.encoded_prefix`); the snapshot stores them under the encoder's key
(`encoding_key`: wire version, route, reasoning echo) beside the messages. A fresh encoder whose
first history is the restored `LazyMessages` with an encoded prefix of its own key opens its
cache with those bytes instead of converting every message (`seed_bytes`): the first request
after a resume costs the join of cached bytes plus the conversion of what followed the snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from ...log import EncodedPrefix, JsonObject, Message
from .._tool_ids import CHAT_COMPLETIONS_IDS, ToolIdMap
from ._convert import ReasoningEcho, convert_message
from ._pairing import check_chat_completions_messages

ENCODING_VERSION: Final = 1
"""The version of the wire messages `convert_message` builds, in every encoding key: bump it
whenever a message's conversion or encoding changes, so a snapshot's encoded prefix written
by another version is ignored (that history is then encoded cold)."""


def encoding_key(provider: str, echo: ReasoningEcho) -> str:
    """Return the key of the encoded prefixes of an encoder of `provider` and `echo`."""
    return f"chat-completions/{ENCODING_VERSION}/{provider}/{echo}"


def seed_bytes(prefix: EncodedPrefix | None, *, messages: int, ids: ToolIdMap) -> bytearray | None:
    """Return the cache bytes (`,<wire 1>,<wire 2>...`) of an encoded prefix, or None.

    The snapshot it came from is bound to the log (the store verified its prefix digest and
    body digest), and the prefix was checked for pairing when it was written, ending with
    every call answered; so the pairing check of what follows starts afresh after it.
    Anything else is not believed (None: encode cold): no prefix, another count, bytes that
    are not a JSON array, tool-id aliases `ids` refuses (nothing is adopted then).

    Args:
        prefix: the restored messages' encoded prefix under the encoder's key.
        messages: how many messages the restored prefix holds.
        ids: the encoder's id map; adopts the prefix's aliases when it is used.
    """
    if prefix is None or prefix.messages != messages:
        return None
    body = prefix.body
    aliases = prefix.meta.get("ids", {})
    if len(body) < 2 or body[0] != 0x5B or body[-1] != 0x5D or not isinstance(aliases, dict):
        return None  # "[" ... "]"
    if not ids.adopt(aliases):
        return None
    joined = bytearray(b",")
    joined += memoryview(body)[1:-1]
    if len(joined) == 1:
        joined.clear()
    return joined


def check_whole(messages: Iterable[Message], *, echo: ReasoningEcho, provider: str) -> None:
    """Convert `messages` afresh and check their pairing (a seeded body's true error index).

    Raises:
        WirePairingError: the first violation, its index counted from the first message.
    """
    ids = ToolIdMap(CHAT_COMPLETIONS_IDS)
    whole: list[JsonObject] = []
    for message in messages:
        whole += convert_message(message, echo=echo, wire_id=ids.to_wire)
    check_chat_completions_messages(whole, provider=provider)
