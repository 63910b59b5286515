"""The pairing rules: one rule engine, and its view over derived messages.

Pairing rule (OpenAI Chat Completions: "An assistant message with 'tool_calls' must be
followed by tool messages responding to each 'tool_call_id'"; Anthropic Messages:
"tool_use ids were found without tool_result blocks immediately after"): every tool call of
an assistant message is answered by one tool-result message, in the assistant's call order,
before the next non-tool message; no tool result answers a call that was not just made.

`CallGroup` is the rule engine: the tool calls of one assistant message and how many of
them are answered, with the verdict for each result (in order, unexpected, a duplicate, or
out of order). Three views use it, each reading its own message shape and writing its own
error texts: `PairingCheck` here (derived history, `PairingError`), and the pre-send wire
checks of the two provider dialects in `llm/` (`WirePairingError`, whose rule names are
below).

`PairingCheck` checks incrementally: history only grows between requests (except after a
surface replace), so each request checks only the messages added since the last one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ..errors import PairingError
from ._messages import Message, result_call_id
from .vocabulary import BLOCK_TOOL_CALL

UNANSWERED_TOOL_CALL: Final = "UNANSWERED_TOOL_CALL"
"""A call has no result where the dialect requires one."""
UNEXPECTED_TOOL_RESULT: Final = "UNEXPECTED_TOOL_RESULT"
"""A result answers no call of the message just before it."""
DUPLICATE_TOOL_RESULT: Final = "DUPLICATE_TOOL_RESULT"
"""A call is answered twice."""
TOOL_RESULT_ORDER: Final = "TOOL_RESULT_ORDER"
"""Results out of the assistant's call order.

duraloop's own rule: Law 6 of docs/architecture.md#laws.
"""
TOOL_RESULTS_NOT_FIRST: Final = "TOOL_RESULTS_NOT_FIRST"
"""Anthropic results after other content in their message."""
DUPLICATE_TOOL_CALL_ID: Final = "DUPLICATE_TOOL_CALL_ID"
"""Two calls of one assistant message share an id."""
INVALID_TOOL_CALL_ID: Final = "INVALID_TOOL_CALL_ID"
"""An id the dialect does not accept."""
ASSISTANT_CONTENT_MISSING: Final = "ASSISTANT_CONTENT_MISSING"
"""A DeepSeek assistant message with neither string content nor tool calls."""


class CallGroup:
    """The pairing rule engine: one assistant message's tool calls, answered in call order.

    A view opens a group at each assistant message (`open`, then `add_call` per call),
    feeds it each result that follows (`answer`), and asks what is still `missing` when a
    message that is no result arrives or the history ends. Linear time: a result that is
    the one due costs one comparison.

    Attributes:
        calls: the group's call ids, in call order (an id may be None for a foreign log's
            call block without one).
        answered: how many of `calls`, from the first, have their result.
        owner: the index of the assistant message that made the calls; -1 for no group.
    """

    __slots__ = ("answered", "calls", "owner", "positions")

    def __init__(self) -> None:
        self.calls: list[str | None] = []
        self.positions: dict[str, int] = {}
        self.answered = 0
        self.owner = -1

    def open(self, owner: int) -> None:
        """Start the group of the assistant message at index `owner`, with no calls yet.

        Args:
            owner: the message's index; -1 to close the group (no calls are open).
        """
        self.calls, self.positions, self.answered, self.owner = [], {}, 0, owner

    def add_call(self, call_id: str | None) -> bool:
        """Add the next call of the group's message.

        Args:
            call_id: the call's id.

        Returns:
            False when an earlier call of the group has the same string id (the call is
            still added, after it), else True.
        """
        if not isinstance(call_id, str):  # a foreign log's call may lack its id
            self.calls.append(call_id)
            return True
        new = call_id not in self.positions
        if new:
            self.positions[call_id] = len(self.calls)
        self.calls.append(call_id)
        return new

    def answer(self, call_id: str) -> str | None:
        """Take one result; return None when it answers the call due, else the rule it breaks.

        Args:
            call_id: the id the result answers.

        Returns:
            None (the call is answered); `UNEXPECTED_TOOL_RESULT` for an id that is no call
            of the group; `DUPLICATE_TOOL_RESULT` for a call answered already;
            `TOOL_RESULT_ORDER` for a call answered before the one due. A result that
            breaks a rule changes nothing.
        """
        calls, answered = self.calls, self.answered
        if answered < len(calls) and calls[answered] == call_id:
            self.answered = answered + 1
            return None
        position = self.positions.get(call_id)
        if position is None:
            return UNEXPECTED_TOOL_RESULT
        if position < answered:
            return DUPLICATE_TOOL_RESULT
        return TOOL_RESULT_ORDER

    @property
    def pending(self) -> bool:
        """Whether some call of the group has no result yet."""
        return self.answered < len(self.calls)

    @property
    def due(self) -> str | None:
        """The id of the call whose result is due next (only while `pending`)."""
        return self.calls[self.answered]

    def missing(self) -> list[str | None]:
        """Return the ids of the calls without a result, in call order."""
        return self.calls[self.answered :]


def _result_call_id(message: Message) -> str | None:
    source = message.get("source")
    if isinstance(source, dict) and source.get("kind") == "tool":
        call_id = result_call_id(message)
        return call_id if isinstance(call_id, str) else None
    return None


class PairingCheck:
    """Check derived messages for pairing, remembering the checked prefix between calls."""

    __slots__ = ("_checked", "_group", "_generation")

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._checked = 0
        self._group = CallGroup()
        self._generation = -1

    @classmethod
    def resumed(cls, checked: int, generation: int) -> PairingCheck:
        """Return a check that knows the first `checked` messages pair (a snapshot's).

        Only valid for a prefix that ends with every call answered (a snapshot is taken
        between turns, after its messages were checked): the next `check` with the same
        `generation` checks only the messages after it.
        """
        check = cls()
        check._checked = checked
        check._generation = generation
        return check

    def check(self, messages: Sequence[Message], *, generation: int = 0) -> None:
        """Raise unless every tool call in `messages` is answered in order.

        Args:
            messages: the derived messages, oldest first.
            generation: the surface's replace generation; a change rechecks everything.

        Raises:
            PairingError: naming the message index and the offending call id.
        """
        if generation != self._generation or len(messages) < self._checked:
            self._reset()
            self._generation = generation
        try:
            for index in range(self._checked, len(messages)):
                self._step(index, messages[index])
            group = self._group
            if group.pending:
                raise PairingError(
                    f"tool call(s) {', '.join(map(repr, group.missing()))} of message "
                    f"{group.owner} are unanswered at the end of the history"
                )
        except PairingError:
            self._reset()
            raise
        self._checked = len(messages)

    def _step(self, index: int, message: Message) -> None:
        group = self._group
        call_id = _result_call_id(message)
        if call_id is not None:
            if not group.pending:
                raise PairingError(
                    f"message {index} is a tool result for {call_id!r} that answers no "
                    "pending tool call"
                )
            if group.answer(call_id) is not None:
                raise PairingError(
                    f"message {index} answers tool call {call_id!r}, but {group.due!r} from "
                    f"message {group.owner} is next in the assistant's call order"
                )
            return
        if group.pending:
            raise PairingError(
                f"tool call(s) {', '.join(map(repr, group.missing()))} of message {group.owner} "
                f"are unanswered before message {index}"
            )
        if message.get("role") == "assistant":
            # A foreign log's block may lack its id: `None` is then expected and unmatched.
            group.open(index)
            for block in message.get("content", ()):
                if isinstance(block, dict) and block.get("type") == BLOCK_TOOL_CALL:
                    group.add_call(block.get("id"))


def check_pairing(messages: Sequence[Message]) -> None:
    """Raise unless every assistant tool call is answered, in order, before other messages.

    Args:
        messages: derived messages, oldest first.

    Raises:
        PairingError: naming the message index and the unanswered or unexpected call id.
    """
    PairingCheck().check(messages)
