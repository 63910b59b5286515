"""Provider tool-call id rules and the stable, reversible mapping onto them.

Durable history keeps every tool-call id exactly as the provider issued it
(docs/providers.md#tool-call-ids); ids are mapped only when a request is serialized, so a session
started on one provider continues on another and back. Each provider limits ids differently:

- Chat Completions (OpenAI, DeepSeek and compatible servers): at most 40 characters
  (docs/providers.md#tool-call-ids: pi-ai truncates ids longer than 40 for provider `openai` and
  limits sanitised ids to 40). duraloop also keeps the characters to `[A-Za-z0-9_.:-]`, which covers
  the ids OpenAI (`call_...`), DeepSeek (`call_00_...`) and Anthropic (`toolu_...`) issue, and
  leaves out whitespace, quotes and `|` (pi-ai's Responses composite ids).
- Anthropic Messages: `^[a-zA-Z0-9_-]+$`, at most 64 characters
  (docs/providers.md#anthropic-pairing; Bedrock's ToolResultBlock documents the same pattern and
  length).

`wire_tool_id` returns an id that is valid for a rule unchanged; any other id becomes
`<sanitised prefix>_<16 hex digits of SHA-256 of the original>`. The hash makes the mapping
deterministic across processes (no `hash()`, which is salted per process) and, for distinct
originals, distinct with overwhelming probability (64 bits). Mapped ids use only
`[A-Za-z0-9_-]` and at most 40 characters, so they are valid for both rules and survive
a move between providers unchanged.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Final

from ..errors import ConfigError, WirePairingError

HASH_HEX_DIGITS: Final = 16
"""Hex digits of the SHA-256 suffix of a mapped id (64 bits)."""

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_-]")
_MAPPED_SAMPLE: Final = "a-Z_" + "0" * HASH_HEX_DIGITS


@dataclass(frozen=True)
class ToolIdRule:
    """The tool-call ids one provider dialect accepts.

    Args:
        max_length: the longest accepted id, in characters; at least 17 (an underscore
            plus the hash suffix of a mapped id).
        pattern: the characters an id may hold, matched with `fullmatch` (so a trailing
            newline never slips past a `$`).
        name: the dialect, for error messages (e.g. `Chat Completions`).

    Raises:
        ConfigError: if `max_length` is below 17 or `pattern` rejects the ids `wire_tool_id`
            produces (letters, digits, `_` and `-`).
    """

    max_length: int
    pattern: re.Pattern[str]
    name: str = field(default="tool-call id", compare=False)

    def __post_init__(self) -> None:
        """Refuse a rule that the mapped form `<prefix>_<hash>` could not satisfy."""
        minimum = HASH_HEX_DIGITS + 1
        if type(self.max_length) is not int or self.max_length < minimum:
            raise ConfigError(
                f"ToolIdRule.max_length must be an integer >= {minimum}, got {self.max_length!r}"
            )
        if self.pattern.fullmatch(_MAPPED_SAMPLE) is None:
            raise ConfigError(
                f"ToolIdRule.pattern {self.pattern.pattern!r} must accept letters, digits, '_' "
                "and '-', the characters of a mapped id"
            )

    def accepts(self, call_id: str) -> bool:
        """Return whether `call_id` can be sent unchanged under this rule.

        Args:
            call_id: a tool-call id.

        Returns:
            True when it is non-empty, at most `max_length` characters and fully matches
            `pattern`.
        """
        return 0 < len(call_id) <= self.max_length and self.pattern.fullmatch(call_id) is not None


CHAT_COMPLETIONS_IDS: Final = ToolIdRule(
    max_length=40, pattern=re.compile(r"[A-Za-z0-9_.:-]+"), name="Chat Completions"
)
"""OpenAI / DeepSeek Chat Completions ids: `[A-Za-z0-9_.:-]`, at most 40.

See docs/providers.md#tool-call-ids.
"""

ANTHROPIC_IDS: Final = ToolIdRule(
    max_length=64, pattern=re.compile(r"[a-zA-Z0-9_-]+"), name="Anthropic Messages"
)
"""Anthropic Messages ids: `^[a-zA-Z0-9_-]+$`, at most 64 (docs/providers.md#anthropic-pairing)."""


def wire_tool_id(call_id: str, rule: ToolIdRule) -> str:
    """Return the id to send for tool call `call_id` under `rule`.

    Args:
        call_id: the id as durable history holds it (the issuing provider's own id).
        rule: the target dialect's id rule.

    Returns:
        `call_id` itself when `rule.accepts(call_id)`; otherwise
        `<prefix>_<hash>`: the first characters of `call_id` with every character outside
        `[A-Za-z0-9_-]` replaced by `_` (as many as fit in `min(rule.max_length, 40)`), an
        underscore, and the first 16 hex digits of SHA-256 of `call_id` in UTF-8. The same
        input always gives the same output, in every process.
    """
    if rule.accepts(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()
    room = min(rule.max_length, CHAT_COMPLETIONS_IDS.max_length) - HASH_HEX_DIGITS - 1
    prefix = _UNSAFE.sub("_", call_id[:room])
    return f"{prefix}_{digest[:HASH_HEX_DIGITS]}"


class ToolIdMap:
    """Map the tool-call ids of one request onto a rule, remembering each pair.

    An adapter uses one map per request for every tool-call id and every tool-result id,
    so a call and its result always carry the same wire id; `from_wire` turns a wire id
    back into the history's id.

    Args:
        rule: the target dialect's id rule.
    """

    __slots__ = ("_originals", "_wires", "rule")

    def __init__(self, rule: ToolIdRule) -> None:
        self.rule = rule
        self._originals: dict[str, str] = {}  # wire id -> history id
        self._wires: dict[str, str] = {}  # history id -> wire id, once mapped without collision

    def to_wire(self, call_id: str) -> str:
        """Return the wire id of `call_id` (see `wire_tool_id`) and remember the pair.

        Args:
            call_id: the id as durable history holds it.

        Returns:
            The id to send.

        Raises:
            WirePairingError: `TOOL_ID_COLLISION` if another id of this request already has
                the same wire id (two calls would be indistinguishable on the wire).
        """
        wire = self._wires.get(call_id)
        if wire is not None:  # mapped before: a call's result, or a re-encoded message
            return wire
        rule = self.rule
        # `wire_tool_id`, its common case inlined: an id the rule accepts is sent as it is.
        if 0 < len(call_id) <= rule.max_length and rule.pattern.fullmatch(call_id) is not None:
            wire = call_id
        else:
            wire = wire_tool_id(call_id, rule)
        original = self._originals.setdefault(wire, call_id)
        if original != call_id:
            raise WirePairingError(
                f"tool-call ids {original!r} and {call_id!r} both map to {wire!r} under the "
                f"{self.rule.name} id rule",
                provider=self.rule.name,
                call_id=call_id,
                message_index=-1,
                rule="TOOL_ID_COLLISION",
            )
        self._wires[call_id] = wire
        return wire

    def aliases(self) -> dict[str, str]:
        """Return the pairs mapped to another id (history id -> wire id), for a seed."""
        return {call_id: wire for call_id, wire in self._wires.items() if wire != call_id}

    def adopt(self, aliases: dict[str, str]) -> bool:
        """Remember pairs another map of the same rule made (`aliases`), all or none.

        Args:
            aliases: history id -> wire id, as `aliases()` returned them.

        Returns:
            False (nothing remembered) if a pair is no `wire_tool_id` mapping of this rule or
            disagrees with a pair this map holds; else True.
        """
        for call_id, wire in aliases.items():
            if (
                not isinstance(call_id, str)
                or not isinstance(wire, str)
                or self._wires.get(call_id, wire) != wire
                or self._originals.get(wire, call_id) != call_id
                or wire_tool_id(call_id, self.rule) != wire
            ):
                return False
        for call_id, wire in aliases.items():
            self._wires[call_id] = wire
            self._originals[wire] = call_id
        return True

    def from_wire(self, wire_id: str) -> str:
        """Return the history id that `to_wire` mapped to `wire_id`.

        Args:
            wire_id: an id as sent (or as echoed back by the provider).

        Returns:
            The original id, or `wire_id` unchanged when this map never produced it.
        """
        return self._originals.get(wire_id, wire_id)
