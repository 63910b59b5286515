"""The provider pairing check on derived messages.

Pairing rule (OpenAI Chat Completions: "An assistant message with 'tool_calls' must be
followed by tool messages responding to each 'tool_call_id'"; Anthropic Messages:
"tool_use ids were found without tool_result blocks immediately after"): every tool call of
an assistant message is answered by one tool-result message, in the assistant's call order,
before the next non-tool message; no tool result answers a call that was not just made.

`PairingCheck` checks incrementally: history only grows between requests (except after a
surface replace), so each request checks only the messages added since the last one.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import PairingError
from ._messages import Message


def _result_call_id(message: Message) -> str | None:
    source = message.get("source")
    if isinstance(source, dict) and source.get("kind") == "tool":
        call_id = source.get("callId")
        return call_id if isinstance(call_id, str) else None
    return None


class PairingCheck:
    """Check derived messages for pairing, remembering the checked prefix between calls."""

    __slots__ = ("_checked", "_expected", "_expected_from", "_generation")

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._checked = 0
        self._expected: list[str | None] = []
        self._expected_from = -1
        self._generation = -1

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
            if self._expected:
                raise PairingError(
                    f"tool call(s) {', '.join(map(repr, self._expected))} of message "
                    f"{self._expected_from} are unanswered at the end of the history"
                )
        except PairingError:
            self._reset()
            raise
        self._checked = len(messages)

    def _step(self, index: int, message: Message) -> None:
        expected = self._expected
        call_id = _result_call_id(message)
        if call_id is not None:
            if not expected:
                raise PairingError(
                    f"message {index} is a tool result for {call_id!r} that answers no pending tool call"
                )
            if call_id != expected[0]:
                raise PairingError(
                    f"message {index} answers tool call {call_id!r}, but {expected[0]!r} from "
                    f"message {self._expected_from} is next in the assistant's call order"
                )
            expected.pop(0)
            return
        if expected:
            raise PairingError(
                f"tool call(s) {', '.join(map(repr, expected))} of message {self._expected_from} "
                f"are unanswered before message {index}"
            )
        if message.get("role") == "assistant":
            # A foreign log's block may lack its id: `None` is then expected and unmatched.
            self._expected = [
                block.get("id")
                for block in message.get("content", ())
                if isinstance(block, dict) and block.get("type") == "tool-call"
            ]
            self._expected_from = index


def check_pairing(messages: Sequence[Message]) -> None:
    """Raise unless every assistant tool call is answered, in order, before other messages.

    Args:
        messages: derived messages, oldest first.

    Raises:
        PairingError: naming the message index and the unanswered or unexpected call id.
    """
    PairingCheck().check(messages)
