"""The pre-send pairing check on the exact provider payload (llm-spec 3.1, 3.2).

`log._pairing` checks derived history; this module checks what an adapter is about to put
on the wire, after conversion, id mapping and merging, because a provider rejects an
unpaired history with a 400 that no retry can fix (llm-spec 4). Adapters call the checker
of their dialect on the body's `messages` right before sending; a violation raises
`WirePairingError` (a duraloop bug) and nothing is sent.

Both checkers make one pass over the messages and their blocks (linear time, no copies)
and report the first violation: its rule, the wire message index and the call id.

Rule names (`WirePairingError.rule`):

- `UNANSWERED_TOOL_CALL`: a call has no result where the dialect requires one.
- `UNEXPECTED_TOOL_RESULT`: a result answers no call of the message just before it.
- `DUPLICATE_TOOL_RESULT`: a call is answered twice.
- `TOOL_RESULT_ORDER`: results out of the assistant's call order (duraloop's own rule,
  ARCHITECTURE Law 6; neither provider documents an order check, llm-spec 3.1).
- `TOOL_RESULTS_NOT_FIRST`: Anthropic results after other content in their message.
- `DUPLICATE_TOOL_CALL_ID`: two calls of one assistant message share an id.
- `INVALID_TOOL_CALL_ID`: an id the dialect does not accept.
- `ASSISTANT_CONTENT_MISSING`: DeepSeek assistant message with neither string content
  nor tool calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, NoReturn

from ..errors import WirePairingError
from ._tool_ids import ANTHROPIC_IDS, CHAT_COMPLETIONS_IDS

UNANSWERED_TOOL_CALL: Final = "UNANSWERED_TOOL_CALL"
UNEXPECTED_TOOL_RESULT: Final = "UNEXPECTED_TOOL_RESULT"
DUPLICATE_TOOL_RESULT: Final = "DUPLICATE_TOOL_RESULT"
TOOL_RESULT_ORDER: Final = "TOOL_RESULT_ORDER"
TOOL_RESULTS_NOT_FIRST: Final = "TOOL_RESULTS_NOT_FIRST"
DUPLICATE_TOOL_CALL_ID: Final = "DUPLICATE_TOOL_CALL_ID"
INVALID_TOOL_CALL_ID: Final = "INVALID_TOOL_CALL_ID"
ASSISTANT_CONTENT_MISSING: Final = "ASSISTANT_CONTENT_MISSING"

# Provider error texts, quoted from llm-spec 3.1-3.3 (with their public sources there).
OPENAI_UNANSWERED: Final = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding "
    "to each 'tool_call_id'. The following tool_call_ids did not have response messages: {ids}"
)
DEEPSEEK_UNANSWERED: Final = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding "
    "to each 'tool_call_id'. (insufficient tool messages following tool_calls message)"
)
OPENAI_UNEXPECTED: Final = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
    "message with 'tool_calls'."
)  # sic: OpenAI's spelling, so a search for the provider text finds it
DEEPSEEK_UNEXPECTED: Final = (
    "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'"
)
DEEPSEEK_CONTENT_MISSING: Final = "content or tool_calls must be set"
ANTHROPIC_UNANSWERED: Final = (
    "messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately "
    "after: {ids}. Each `tool_use` block must have a corresponding `tool_result` block in "
    "the next message."
)
ANTHROPIC_UNEXPECTED: Final = (
    "messages.{index}.content.{block}: unexpected `tool_use_id` found in `tool_result` "
    "blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in "
    "the previous message."
)
ANTHROPIC_NOT_FIRST: Final = (
    "messages.{index}: Did not find {count} tool_result block(s) at the beginning of this "
    "message. Messages following tool_use blocks must begin with a matching number of "
    "tool_result blocks."
)

_ANTHROPIC: Final = "anthropic"


def check_chat_completions_messages(
    messages: Sequence[Mapping[str, Any]], *, provider: str
) -> None:
    """Raise unless a Chat Completions `messages` list pairs every tool call (llm-spec 3.1).

    Rules: an assistant message with `tool_calls` is followed, before any other message,
    by one `role: "tool"` message per `tool_call_id`, contiguous and in call order; a tool
    message answers a call of the assistant message just before its run of tool messages,
    once; the calls of one message have distinct ids, each valid for `CHAT_COMPLETIONS_IDS`
    (1 to 40 characters of `[A-Za-z0-9_.:-]`, llm-spec 2.3). For provider `deepseek`, an
    assistant message also has string `content` (never null) unless it has tool calls
    (llm-spec 3.3, "content or tool_calls must be set").

    Args:
        messages: the wire `messages` of the body about to be sent (system, user,
            assistant and tool dicts), oldest first.
        provider: the provider route (`openai`, `deepseek`, ...); selects the quoted
            provider error text and the DeepSeek content rule.

    Raises:
        WirePairingError: on the first violation, naming the rule, the call id and the
            index of the message at fault (the assistant message for an unanswered call,
            the tool message for an unexpected, duplicate or out-of-order result).
    """
    deepseek = provider == "deepseek"
    unexpected_text = DEEPSEEK_UNEXPECTED if deepseek else OPENAI_UNEXPECTED
    calls: list[str] = []  # the open assistant message's call ids, in call order
    positions: dict[str, int] = {}  # call id -> its position in `calls`
    answered = 0  # how many of `calls` have their tool message
    owner = -1  # index of the assistant message whose calls are open

    def fail(rule: str, index: int, call_id: str, detail: str, text: str | None) -> NoReturn:
        raise WirePairingError(
            detail,
            provider=provider,
            call_id=call_id,
            message_index=index,
            rule=rule,
            provider_error=text,
        )

    def unanswered(before: str) -> NoReturn:
        missing = calls[answered:]
        text = DEEPSEEK_UNANSWERED if deepseek else OPENAI_UNANSWERED.format(ids=", ".join(missing))
        fail(
            UNANSWERED_TOOL_CALL,
            owner,
            missing[0],
            f"tool call(s) {', '.join(map(repr, missing))} of the assistant message have no "
            f"tool message {before}",
            text,
        )

    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str):
                fail(
                    UNEXPECTED_TOOL_RESULT,
                    index,
                    "",
                    f"the tool message has no string tool_call_id (got {call_id!r})",
                    unexpected_text,
                )
            position = positions.get(call_id)
            if position is None:
                where = (
                    f"is not a call of messages[{owner}]"
                    if owner >= 0
                    else "follows no assistant message with tool_calls"
                )
                fail(
                    UNEXPECTED_TOOL_RESULT,
                    index,
                    call_id,
                    f"the tool message answers {call_id!r}, which {where}",
                    unexpected_text,
                )
            elif position < answered:
                fail(
                    DUPLICATE_TOOL_RESULT,
                    index,
                    call_id,
                    f"tool call {call_id!r} of messages[{owner}] is already answered",
                    None,
                )
            elif position > answered:
                fail(
                    TOOL_RESULT_ORDER,
                    index,
                    calls[answered],
                    f"the result for {calls[answered]!r} is due here in the call order of "
                    f"messages[{owner}], but the tool message answers {call_id!r} (duraloop "
                    "sends results in call order, ARCHITECTURE Law 6)",
                    None,
                )
            answered += 1
            continue
        if answered < len(calls):
            unanswered(f"before messages[{index}] (role {role!r})")
        calls, positions, answered, owner = [], {}, 0, -1
        if role != "assistant":
            continue
        tool_calls = message.get("tool_calls") or ()
        for call in tool_calls:
            call_id = call.get("id") if isinstance(call, Mapping) else None
            if not isinstance(call_id, str) or not CHAT_COMPLETIONS_IDS.accepts(call_id):
                fail(
                    INVALID_TOOL_CALL_ID,
                    index,
                    call_id if isinstance(call_id, str) else "",
                    f"tool call id {call_id!r} is not 1 to {CHAT_COMPLETIONS_IDS.max_length} "
                    "characters of [A-Za-z0-9_.:-] (map it with ToolIdMap)",
                    None,
                )
            if call_id in positions:
                fail(
                    DUPLICATE_TOOL_CALL_ID,
                    index,
                    call_id,
                    f"two tool calls of the assistant message share the id {call_id!r}",
                    None,
                )
            positions[call_id] = len(calls)
            calls.append(call_id)
        if calls:
            owner = index
        elif deepseek and not isinstance(message.get("content"), str):
            fail(
                ASSISTANT_CONTENT_MISSING,
                index,
                "",
                "the assistant message has no tool calls and its content is "
                f"{message.get('content')!r}, not a string (send '' for no text)",
                DEEPSEEK_CONTENT_MISSING,
            )
    if answered < len(calls):
        unanswered("at the end of the messages")


def check_anthropic_messages(messages: Sequence[Mapping[str, Any]]) -> None:
    """Raise unless an Anthropic Messages `messages` list pairs every `tool_use` (llm-spec 3.2).

    Rules: every `tool_use` block of an assistant message is answered by a `tool_result`
    with the same `tool_use_id` in the immediately next message, which is a user message
    whose content starts with those `tool_result` blocks (other blocks only after them), one
    per call, in call order; a `tool_result` answers a `tool_use` of the previous message;
    `tool_use` ids are distinct within their message, match `^[a-zA-Z0-9_-]+$` and have at
    most 64 characters.

    Args:
        messages: the wire `messages` of the Messages body about to be sent (the top-level
            `system` is not part of it), oldest first. Content may be a string or a list of
            blocks.

    Raises:
        WirePairingError: on the first violation, naming the rule, the call id and the
            index of the message at fault (the assistant message for an unanswered
            `tool_use`, the user message for a misplaced or unexpected `tool_result`).
    """
    calls: list[str] = []  # the previous message's tool_use ids, in call order
    positions: dict[str, int] = {}
    owner = -1

    def fail(rule: str, index: int, call_id: str, detail: str, text: str | None) -> NoReturn:
        raise WirePairingError(
            detail,
            provider=_ANTHROPIC,
            call_id=call_id,
            message_index=index,
            rule=rule,
            provider_error=text,
        )

    def unanswered(missing: Sequence[str], detail: str) -> NoReturn:
        text = ANTHROPIC_UNANSWERED.format(index=owner, ids=", ".join(missing))
        fail(UNANSWERED_TOOL_CALL, owner, missing[0], detail, text)

    for index, message in enumerate(messages):
        content = message.get("content")
        blocks: Sequence[Any] = content if isinstance(content, list) else ()
        answered = 0
        if calls:
            if message.get("role") != "user":
                unanswered(
                    calls,
                    f"messages[{index}] right after the tool_use blocks has role "
                    f"{message.get('role')!r}, not 'user' with their tool_result blocks",
                )
            for block_index, block in enumerate(blocks):
                if not _is_tool_result(block):
                    break
                call_id = _result_id(block)
                position = positions.get(call_id)
                if position is None:
                    fail(
                        UNEXPECTED_TOOL_RESULT,
                        index,
                        call_id,
                        f"content[{block_index}] answers {call_id!r}, which is not a tool_use "
                        f"of messages[{owner}]",
                        ANTHROPIC_UNEXPECTED.format(index=index, block=block_index, id=call_id),
                    )
                elif position < answered:
                    fail(
                        DUPLICATE_TOOL_RESULT,
                        index,
                        call_id,
                        f"content[{block_index}] answers {call_id!r} of messages[{owner}] again",
                        None,
                    )
                elif position > answered:
                    fail(
                        TOOL_RESULT_ORDER,
                        index,
                        calls[answered],
                        f"the tool_result for {calls[answered]!r} is due at content[{block_index}] "
                        f"in the call order of messages[{owner}], but it answers {call_id!r} "
                        "(duraloop sends results in call order, ARCHITECTURE Law 6)",
                        None,
                    )
                answered += 1
            if answered < len(calls):
                missing = calls[answered:]
                late = {_result_id(b) for b in blocks[answered:] if _is_tool_result(b)}
                if late.intersection(missing):
                    fail(
                        TOOL_RESULTS_NOT_FIRST,
                        index,
                        missing[0],
                        f"the tool_result for {missing[0]!r} is not among the blocks the "
                        f"message starts with",
                        ANTHROPIC_NOT_FIRST.format(index=index, count=len(calls)),
                    )
                unanswered(
                    missing,
                    f"messages[{index}] does not start with a tool_result for "
                    f"{', '.join(map(repr, missing))}",
                )
        for block_index in range(answered, len(blocks)):
            block = blocks[block_index]
            if _is_tool_result(block):
                call_id = _result_id(block)
                duplicate = call_id in positions
                fail(
                    DUPLICATE_TOOL_RESULT if duplicate else UNEXPECTED_TOOL_RESULT,
                    index,
                    call_id,
                    f"content[{block_index}] answers {call_id!r}, "
                    + (
                        "already answered at the start of the message"
                        if duplicate
                        else "which is not a tool_use of the previous message"
                    ),
                    None
                    if duplicate
                    else ANTHROPIC_UNEXPECTED.format(index=index, block=block_index, id=call_id),
                )
        calls, positions, owner = [], {}, -1
        if message.get("role") != "assistant":
            continue
        for block in blocks:
            if not isinstance(block, Mapping) or block.get("type") != "tool_use":
                continue
            use_id = block.get("id")
            if not isinstance(use_id, str) or not ANTHROPIC_IDS.accepts(use_id):
                fail(
                    INVALID_TOOL_CALL_ID,
                    index,
                    use_id if isinstance(use_id, str) else "",
                    f"tool_use id {use_id!r} does not match ^[a-zA-Z0-9_-]+$ with at most "
                    f"{ANTHROPIC_IDS.max_length} characters (map it with ToolIdMap)",
                    None,
                )
            if use_id in positions:
                fail(
                    DUPLICATE_TOOL_CALL_ID,
                    index,
                    use_id,
                    f"two tool_use blocks of the assistant message share the id {use_id!r}",
                    None,
                )
            positions[use_id] = len(calls)
            calls.append(use_id)
        if calls:
            owner = index
    if calls:
        unanswered(calls, "it is the last message; no user message answers it")


def _is_tool_result(block: object) -> bool:
    return isinstance(block, Mapping) and block.get("type") == "tool_result"


def _result_id(block: Mapping[str, Any]) -> str:
    call_id = block.get("tool_use_id")
    return call_id if isinstance(call_id, str) else repr(call_id)
