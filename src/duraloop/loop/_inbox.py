"""The inbox: pending user messages, a projection of `agent/inbox/spliced` events.

See docs/loop.md#the-inbox.

Two ordered lists: `next-turn` (follow-ups; one is the prompt of one turn) and `next-step`
(steering and injected context, entered at the next step boundary). Every mutation is one
normalized splice `{target, start, removedCount?, inserted, outcome?}`, appended to the log
BEFORE the lists change, so the log alone rebuilds the inbox (docs/loop.md#the-inbox): a loop
replays the splices after `header.seed_length` when it is constructed (docs/recovery.md#resume), so
pending messages survive resume, and a fork child ignores its parent's pending inbox.

A claim (the loop taking messages into a turn) is a pure deletion with no `outcome`; a
discard (`clear`, from `AgentLoop.cancel`) records the discard outcome
(`INBOX_OUTCOME_DISCARDED`, in dsh's spelling).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import DuplicateMessageError, EventRejectedError, UsageError
from ..log import Event, Message, Session
from ..log.vocabulary import (
    INBOX_NEXT_STEP,
    INBOX_NEXT_TURN,
    INBOX_OUTCOME_DISCARDED,
    INBOX_SPLICED,
    INBOX_TARGETS,
)
from ._snapshot import restored_fold


class Inbox:
    """The pending `next-turn` and `next-step` messages of a session.

    Args:
        session: the live session; its splices after `header.seed_length` are replayed.

    Raises:
        EventRejectedError: if a replayed splice does not fit the lists it mutates (a range
            outside a list, an unknown target, a duplicate id); the message names the seq.
    """

    def __init__(self, session: Session) -> None:
        self._session = session
        self._lists: dict[str, list[Message]] = {INBOX_NEXT_TURN: [], INBOX_NEXT_STEP: []}
        events = session.events
        start = session.header.seed_length or 0
        restored = restored_fold(session)
        if restored is not None and restored[0].count >= start:
            # The snapshot's fold is the replay up to its covered count (docs/store.md#snapshots).
            checkpoint, fold = restored
            start = checkpoint.count
            self._lists[INBOX_NEXT_TURN] = list(fold.next_turn)  # type: ignore[arg-type]
            self._lists[INBOX_NEXT_STEP] = list(fold.next_step)  # type: ignore[arg-type]
        if session.latest_seq(INBOX_SPLICED) is None and (
            restored is None or start == restored[0].count
        ):
            return  # the session validated every event from `start` on, and none is a splice
        for index in range(start, len(events)):
            event = events[index]
            if event.type == INBOX_SPLICED:
                self._replay(event)

    @property
    def next_turn(self) -> tuple[Message, ...]:
        """The pending follow-ups, oldest first; each is the prompt of its own turn."""
        return tuple(self._lists[INBOX_NEXT_TURN])

    @property
    def next_step(self) -> tuple[Message, ...]:
        """The pending steering and injected context, entered together at the next step."""
        return tuple(self._lists[INBOX_NEXT_STEP])

    @property
    def pending(self) -> bool:
        """Whether any message is pending in either list."""
        return bool(self._lists[INBOX_NEXT_TURN] or self._lists[INBOX_NEXT_STEP])

    def insert(self, target: str, message: Message) -> Message:
        """Append `message` at the end of `target` (one durable insertion splice).

        Returns:
            The stored copy of the message (as logged).

        Raises:
            UsageError: if `target` is not `next-turn` or `next-step`, or the message is not
                an identified user message.
            DuplicateMessageError: if a pending message already has its id.
            EventRejectedError: if the message is not lossless JSON (nothing is appended).
        """
        if target not in self._lists:
            raise UsageError(f"inbox target must be one of {INBOX_TARGETS}, got {target!r}")
        message_id = message.get("id") if isinstance(message, dict) else None
        if not isinstance(message_id, str) or not message_id:
            raise UsageError(f"an inbox message needs a non-empty string id, got {message_id!r}")
        if message.get("role") != "user" or not isinstance(message.get("content"), list):
            raise UsageError(
                f"inbox message {message_id!r} must be a user message with a content list "
                "(build one with duraloop.log.user_message)"
            )
        if any(pending["id"] == message_id for pending in self._all()):
            raise DuplicateMessageError(message_id=message_id, target=target)
        stored = self._splice(target, len(self._lists[target]), 0, [message], outcome=None)
        return stored[0]

    def claim(self, *, next_turn: bool) -> list[Message]:
        """Take the messages entering a step: all of `next-step`, then one follow-up.

        Each non-empty removal is one pure-deletion splice; claimed messages never return
        to the inbox (docs/loop.md#pre-step, docs/loop.md#pre-step).

        Args:
            next_turn: also take the head of `next-turn` (the first step of a turn without
                an explicit prompt).

        Returns:
            The claimed messages in entry order (empty when nothing was pending).
        """
        claimed = self._remove_all(INBOX_NEXT_STEP, outcome=None)
        if next_turn and self._lists[INBOX_NEXT_TURN]:
            claimed += self._remove(INBOX_NEXT_TURN, 0, 1, outcome=None)
        return claimed

    def clear(self) -> list[Message]:
        """Discard every pending message: `next-step` first, then `next-turn`.

        See docs/loop.md#send-and-cancel.

        Returns:
            The discarded messages; each list's removal is logged as a discard splice.
        """
        discarded = self._remove_all(INBOX_NEXT_STEP, outcome=INBOX_OUTCOME_DISCARDED)
        return discarded + self._remove_all(INBOX_NEXT_TURN, outcome=INBOX_OUTCOME_DISCARDED)

    def _all(self) -> list[Message]:
        return self._lists[INBOX_NEXT_STEP] + self._lists[INBOX_NEXT_TURN]

    def _remove_all(self, target: str, *, outcome: str | None) -> list[Message]:
        count = len(self._lists[target])
        return self._remove(target, 0, count, outcome=outcome) if count else []

    def _remove(self, target: str, start: int, count: int, *, outcome: str | None) -> list[Message]:
        removed = self._lists[target][start : start + count]
        self._splice(target, start, count, [], outcome=outcome)
        return removed

    def _splice(
        self,
        target: str,
        start: int,
        removed_count: int,
        inserted: Sequence[Message],
        *,
        outcome: str | None,
    ) -> list[Message]:
        """Append the splice event, then (only once it is committed) mutate the list."""
        data: dict[str, Any] = {"target": target, "start": start}
        if removed_count:
            data["removedCount"] = removed_count
        data["inserted"] = list(inserted)
        if outcome is not None:
            data["outcome"] = outcome
        event = self._session.append(INBOX_SPLICED, data)
        stored: list[Message] = list(event.data["inserted"])
        self._lists[target][start : start + removed_count] = stored
        return stored

    def _replay(self, event: Event) -> None:
        data = event.data
        where = f"agent/inbox/spliced at seq {event.seq}"
        if not isinstance(data, dict) or data.get("target") not in self._lists:
            raise EventRejectedError(f"{where} needs a target in {INBOX_TARGETS}")
        items = self._lists[data["target"]]
        start, count, inserted = (
            data.get("start"),
            data.get("removedCount", 0),
            data.get("inserted"),
        )
        if (
            type(start) is not int
            or type(count) is not int
            or not 0 <= start <= len(items)
            or not 0 <= count <= len(items) - start
        ):
            raise EventRejectedError(
                f"{where} removes [{start!r}, +{count!r}) from {data['target']}, which holds "
                f"{len(items)} message(s)"
            )
        if not isinstance(inserted, list) or not all(
            isinstance(item, dict) and isinstance(item.get("id"), str) for item in inserted
        ):
            raise EventRejectedError(f"{where} needs `inserted` as a list of identified messages")
        kept = {message["id"] for message in self._all()} - {
            message["id"] for message in items[start : start + count]
        }
        new_ids = [item["id"] for item in inserted]
        if len(set(new_ids)) != len(new_ids) or kept.intersection(new_ids):
            raise EventRejectedError(f"{where} inserts a message id that is already pending")
        items[start : start + count] = inserted
