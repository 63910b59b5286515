"""The pre-send pairing check of Chat Completions payloads, a rules view.

See docs/providers.md#chat-completions-pairing.

`log._pairing` holds the pairing rule engine (`CallGroup`) and checks derived history; this
view reads what a Chat Completions adapter is about to put on the wire, after conversion,
id mapping and merging, because a provider rejects an unpaired history with a 400 that no
retry can fix (docs/providers.md#error-tool-results). The adapters call it on the body's `messages`
right before sending; a violation raises `WirePairingError` (a duraloop bug) and nothing is sent.

One pass over the messages (linear time, no copies) reports the first violation: its rule
(the names of `log._pairing`), the wire message index and the call id. A body that breaks no
rule (every body duraloop builds) is first accepted by a lean pass, `_well_paired`, which
gives no diagnostics; only a body it refuses goes through the pass that names the violation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, NoReturn

from ...errors import WirePairingError
from ...log import (
    ASSISTANT_CONTENT_MISSING,
    DUPLICATE_TOOL_CALL_ID,
    DUPLICATE_TOOL_RESULT,
    INVALID_TOOL_CALL_ID,
    UNANSWERED_TOOL_CALL,
    UNEXPECTED_TOOL_RESULT,
    CallGroup,
)
from .._tool_ids import CHAT_COMPLETIONS_IDS

# Provider error texts, quoted from docs/providers.md#pairing-rules (with their public sources
# there).
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

_ID: Final = f"[A-Za-z0-9_.:-]{{1,{CHAT_COMPLETIONS_IDS.max_length}}}"
_IDS: Final = re.compile(f"{_ID}(?:\x00{_ID})*")
"""NUL-joined ids that `CHAT_COMPLETIONS_IDS` accepts, one each (NUL is no id character)."""


def check_chat_completions_messages(
    messages: Sequence[Mapping[str, Any]], *, provider: str
) -> None:
    """Raise unless a Chat Completions `messages` list pairs every tool call.

    See docs/providers.md#chat-completions-pairing.

    Rules: an assistant message with `tool_calls` is followed, before any other message,
    by one `role: "tool"` message per `tool_call_id`, contiguous and in call order; a tool
    message answers a call of the assistant message just before its run of tool messages,
    once; the calls of one message have distinct ids, each valid for `CHAT_COMPLETIONS_IDS`
    (1 to 40 characters of `[A-Za-z0-9_.:-]`, docs/providers.md#chat-completions-wire). For provider
    `deepseek`, an assistant message also has string `content` (never null) unless it has tool calls
    (docs/providers.md#deepseek-thinking-mode, "content or tool_calls must be set").

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
    if not _well_paired(messages, deepseek=provider == "deepseek"):
        _find_violation(messages, provider=provider)


def _find_violation(messages: Sequence[Mapping[str, Any]], *, provider: str) -> None:
    """The pass that names the first violation; returns only if there is none."""
    deepseek = provider == "deepseek"
    unexpected_text = DEEPSEEK_UNEXPECTED if deepseek else OPENAI_UNEXPECTED
    group = CallGroup()  # the open assistant message's calls

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
        missing = [str(call_id) for call_id in group.missing()]
        text = DEEPSEEK_UNANSWERED if deepseek else OPENAI_UNANSWERED.format(ids=", ".join(missing))
        fail(
            UNANSWERED_TOOL_CALL,
            group.owner,
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
            broken = group.answer(call_id)
            if broken == UNEXPECTED_TOOL_RESULT:
                where = (
                    f"is not a call of messages[{group.owner}]"
                    if group.owner >= 0
                    else "follows no assistant message with tool_calls"
                )
                fail(
                    broken,
                    index,
                    call_id,
                    f"the tool message answers {call_id!r}, which {where}",
                    unexpected_text,
                )
            elif broken == DUPLICATE_TOOL_RESULT:
                fail(
                    broken,
                    index,
                    call_id,
                    f"tool call {call_id!r} of messages[{group.owner}] is already answered",
                    None,
                )
            elif broken is not None:
                due = str(group.due)
                fail(
                    broken,
                    index,
                    due,
                    f"the result for {due!r} is due here in the call order of "
                    f"messages[{group.owner}], but the tool message answers {call_id!r} (duraloop "
                    "sends results in call order: Law 6, docs/architecture.md)",
                    None,
                )
            continue
        if group.pending:
            unanswered(f"before messages[{index}] (role {role!r})")
        group.open(-1)
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
            if not group.add_call(call_id):
                fail(
                    DUPLICATE_TOOL_CALL_ID,
                    index,
                    call_id,
                    f"two tool calls of the assistant message share the id {call_id!r}",
                    None,
                )
        if group.calls:
            group.owner = index
        elif deepseek and not isinstance(message.get("content"), str):
            fail(
                ASSISTANT_CONTENT_MISSING,
                index,
                "",
                "the assistant message has no tool calls and its content is "
                f"{message.get('content')!r}, not a string (send '' for no text)",
                DEEPSEEK_CONTENT_MISSING,
            )
    if group.pending:
        unanswered("at the end of the messages")


def _well_paired(messages: Sequence[Mapping[str, Any]], *, deepseek: bool) -> bool:
    """Return True only if `check_chat_completions_messages` accepts `messages` (JSON values).

    The same rules, checked with the fewest Python operations per message: each run of
    tool messages carries exactly the call ids of the assistant message before it, in
    order; the ids of one message are distinct; and all call ids are validated at once, by
    one regular expression over them joined. False says only that the full pass must find
    (and describe) a violation.
    """
    due: list[Any] = []  # the call ids of the open assistant message
    answered = 0
    ids: list[Any] = []  # every call id, validated at the end
    for message in messages:
        role = message.get("role")
        if role == "tool":
            if answered >= len(due) or due[answered] != message.get("tool_call_id"):
                return False
            answered += 1
            continue
        if answered < len(due):
            return False
        answered = 0
        calls = message.get("tool_calls") if role == "assistant" else None
        if not calls:
            due = []
            if deepseek and role == "assistant" and not isinstance(message.get("content"), str):
                return False
            continue
        try:
            due = [call["id"] for call in calls] if type(calls) is list else []
            if not due or (len(due) > 1 and len(set(due)) != len(due)):
                return False
        except (KeyError, TypeError):  # a call that is no object or has no id; an odd id
            return False
        ids += due
    if answered < len(due):
        return False
    try:
        return not ids or _IDS.fullmatch("\x00".join(ids)) is not None
    except TypeError:  # an id that is no string
        return False
