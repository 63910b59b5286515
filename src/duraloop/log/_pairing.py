"""The provider pairing check on derived messages.

Pairing rule (OpenAI Chat Completions: "An assistant message with 'tool_calls' must be
followed by tool messages responding to each 'tool_call_id'"; Anthropic Messages:
"tool_use ids were found without tool_result blocks immediately after"): every tool call of
an assistant message is answered by one tool-result message, in the assistant's call order,
before the next non-tool message; no tool result answers a call that was not just made.
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


def check_pairing(messages: Sequence[Message]) -> None:
    """Raise unless every assistant tool call is answered, in order, before other messages.

    Args:
        messages: derived messages, oldest first.

    Raises:
        PairingError: naming the message index and the unanswered or unexpected call id.
    """
    expected: list[str] = []
    expected_from = -1
    for index, message in enumerate(messages):
        call_id = _result_call_id(message)
        if call_id is not None:
            if not expected:
                raise PairingError(
                    f"message {index} is a tool result for {call_id!r} that answers no pending tool call"
                )
            if call_id != expected[0]:
                raise PairingError(
                    f"message {index} answers tool call {call_id!r}, but {expected[0]!r} from "
                    f"message {expected_from} is next in the assistant's call order"
                )
            expected.pop(0)
            continue
        if expected:
            raise PairingError(
                f"tool call(s) {', '.join(map(repr, expected))} of message {expected_from} are "
                f"unanswered before message {index}"
            )
        if message.get("role") == "assistant":
            expected = [
                block["id"]
                for block in message.get("content", ())
                if isinstance(block, dict) and block.get("type") == "tool-call"
            ]
            expected_from = index
    if expected:
        raise PairingError(
            f"tool call(s) {', '.join(map(repr, expected))} of message {expected_from} are unanswered "
            "at the end of the history"
        )
