"""The pre-send pairing check of Anthropic Messages payloads, a rules view.

See docs/providers.md#anthropic-pairing.

`log._pairing` holds the pairing rule engine (`CallGroup`) and checks derived history; this
view reads what the Anthropic adapter is about to put on the wire, after conversion, id
mapping and merging, because the API rejects an unpaired history with a 400 that no retry
can fix (docs/providers.md#error-tool-results). The adapter calls it on the body's `messages` right
before sending; a violation raises `WirePairingError` (a duraloop bug) and nothing is sent.

One pass over the messages and their blocks (linear time, no copies) reports the first
violation: its rule (the names of `log._pairing`), the wire message index and the call id.
A payload that breaks no rule (every payload duraloop builds) is first accepted by a lean
pass, `_well_paired`, which gives no diagnostics; only one it refuses goes through the pass
that names the violation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, NoReturn

from ...errors import WirePairingError
from ...log import (
    DUPLICATE_TOOL_CALL_ID,
    DUPLICATE_TOOL_RESULT,
    INVALID_TOOL_CALL_ID,
    TOOL_RESULTS_NOT_FIRST,
    UNANSWERED_TOOL_CALL,
    UNEXPECTED_TOOL_RESULT,
    CallGroup,
)
from .._tool_ids import ANTHROPIC_IDS

# Provider error texts, quoted from docs/providers.md#anthropic-pairing (with their public sources
# there).
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
_ID: Final = f"[a-zA-Z0-9_-]{{1,{ANTHROPIC_IDS.max_length}}}"
_IDS: Final = re.compile(f"{_ID}(?:\x00{_ID})*")
"""NUL-joined ids that `ANTHROPIC_IDS` accepts, one each (NUL is no id character)."""


def check_anthropic_messages(messages: Sequence[Mapping[str, Any]]) -> None:
    """Raise unless an Anthropic Messages `messages` list pairs every `tool_use`.

    See docs/providers.md#anthropic-pairing.

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
    if not _well_paired(messages):
        _find_violation(messages)


def _find_violation(messages: Sequence[Mapping[str, Any]]) -> None:
    """The pass that names the first violation; returns only if there is none."""
    group = CallGroup()  # the previous message's tool_use ids

    def fail(rule: str, index: int, call_id: str, detail: str, text: str | None) -> NoReturn:
        raise WirePairingError(
            detail,
            provider=_ANTHROPIC,
            call_id=call_id,
            message_index=index,
            rule=rule,
            provider_error=text,
        )

    def unanswered(detail: str) -> NoReturn:
        missing = [str(call_id) for call_id in group.missing()]
        text = ANTHROPIC_UNANSWERED.format(index=group.owner, ids=", ".join(missing))
        fail(UNANSWERED_TOOL_CALL, group.owner, missing[0], detail, text)

    for index, message in enumerate(messages):
        content = message.get("content")
        blocks: Sequence[Any] = content if isinstance(content, list) else ()
        if group.calls:
            if message.get("role") != "user":
                unanswered(
                    f"messages[{index}] right after the tool_use blocks has role "
                    f"{message.get('role')!r}, not 'user' with their tool_result blocks",
                )
            for block_index, block in enumerate(blocks):
                if not _is_tool_result(block):
                    break
                call_id = _result_id(block)
                broken = group.answer(call_id)
                if broken == UNEXPECTED_TOOL_RESULT:
                    fail(
                        broken,
                        index,
                        call_id,
                        f"content[{block_index}] answers {call_id!r}, which is not a tool_use "
                        f"of messages[{group.owner}]",
                        ANTHROPIC_UNEXPECTED.format(index=index, block=block_index, id=call_id),
                    )
                elif broken == DUPLICATE_TOOL_RESULT:
                    fail(
                        broken,
                        index,
                        call_id,
                        f"content[{block_index}] answers {call_id!r} of messages[{group.owner}] "
                        "again",
                        None,
                    )
                elif broken is not None:
                    due = str(group.due)
                    fail(
                        broken,
                        index,
                        due,
                        f"the tool_result for {due!r} is due at content[{block_index}] "
                        f"in the call order of messages[{group.owner}], but it answers {call_id!r} "
                        "(duraloop sends results in call order: Law 6, docs/architecture.md)",
                        None,
                    )
            if group.pending:
                missing = [str(call_id) for call_id in group.missing()]
                late = {_result_id(b) for b in blocks[group.answered :] if _is_tool_result(b)}
                if late.intersection(missing):
                    fail(
                        TOOL_RESULTS_NOT_FIRST,
                        index,
                        missing[0],
                        f"the tool_result for {missing[0]!r} is not among the blocks the "
                        f"message starts with",
                        ANTHROPIC_NOT_FIRST.format(index=index, count=len(group.calls)),
                    )
                unanswered(
                    f"messages[{index}] does not start with a tool_result for "
                    f"{', '.join(map(repr, missing))}",
                )
        for block_index in range(group.answered, len(blocks)):
            block = blocks[block_index]
            if _is_tool_result(block):
                call_id = _result_id(block)
                duplicate = call_id in group.positions
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
        group.open(-1)
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
            if not group.add_call(use_id):
                fail(
                    DUPLICATE_TOOL_CALL_ID,
                    index,
                    use_id,
                    f"two tool_use blocks of the assistant message share the id {use_id!r}",
                    None,
                )
        if group.calls:
            group.owner = index
    if group.calls:
        unanswered("it is the last message; no user message answers it")


def _is_tool_result(block: object) -> bool:
    return isinstance(block, Mapping) and block.get("type") == "tool_result"


def _result_id(block: Mapping[str, Any]) -> str:
    call_id = block.get("tool_use_id")
    return call_id if isinstance(call_id, str) else repr(call_id)


def _well_paired(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Return True only if `check_anthropic_messages` accepts `messages` (JSON values).

    The same rules with the fewest Python operations per message: the message after one
    with `tool_use` blocks is a user message whose first blocks are `tool_result`s for
    exactly those ids, in order; no other `tool_result` appears anywhere; the ids of one
    message are distinct; all ids are validated at once, by one regular expression over
    them joined. False says only that the full pass must find (and describe) a violation.
    """
    due: list[Any] = []  # the tool_use ids of the previous message
    ids: list[Any] = []  # every tool_use id, validated at the end
    for message in messages:
        content = message.get("content")
        blocks: Sequence[Any] = content if isinstance(content, list) else ()
        count = len(due)
        if count:
            if message.get("role") != "user" or len(blocks) < count:
                return False
            answers = [
                block.get("tool_use_id") if _is_tool_result(block) else None
                for block in blocks[:count]
            ]
            if answers != due:
                return False
        if any(_is_tool_result(block) for block in (blocks[count:] if count else blocks)):
            return False
        if message.get("role") != "assistant":
            due = []
            continue
        due = [
            block.get("id")
            for block in blocks
            if isinstance(block, Mapping) and block.get("type") == "tool_use"
        ]
        if len(due) > 1:
            try:
                if len(set(due)) != len(due):
                    return False
            except TypeError:  # an unhashable id
                return False
        ids += due
    if due:
        return False
    try:
        return not ids or _IDS.fullmatch("\x00".join(ids)) is not None
    except TypeError:  # an id that is no string
        return False
