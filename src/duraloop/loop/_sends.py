"""The named sends of a loop: `followup`, `steer` and `inject`, each `send` with fixed arguments.

See docs/loop.md#send-and-cancel.

A send queues a user message for the next turn (`next-turn`) or the next step (`next-step`)
and may wake the loop. The three combinations hooks and callers use have names (they are
what `Steering` offers a hook); `NamedSends` defines them once over the loop's `send`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Literal

from ..log import Message
from ..log.vocabulary import INBOX_NEXT_STEP, INBOX_NEXT_TURN

SendTarget = Literal["next-turn", "next-step"]
"""Where `send` queues a message: the next turn's prompt queue, or the next step."""


class NamedSends(ABC):
    """`followup`, `steer` and `inject` over `send`, for a class that defines `send`."""

    @abstractmethod
    def send(
        self, message: str | Message, *, target: SendTarget = INBOX_NEXT_TURN, wakeup: bool = True
    ) -> Message:
        """Queue a user message and, if `wakeup`, wake the loop (see `AgentLoop.send`)."""

    def followup(self, message: str | Message) -> Message:
        """Queue a follow-up (`next-turn`, waking): the prompt of its own later turn.

        Same as `send(message, target="next-turn", wakeup=True)`; never merged into the
        running turn.

        Args:
            message: the text, or a complete user message (its id must not be pending).

        Returns:
            The queued message as logged.

        Raises:
            UsageError, DuplicateMessageError, EventRejectedError: as `send`.
        """
        return self.send(message, target=INBOX_NEXT_TURN, wakeup=True)

    def steer(self, message: str | Message) -> Message:
        """Queue steering (`next-step`, waking): it enters the running turn at its next step.

        Same as `send(message, target="next-step", wakeup=True)`. A running turn claims it
        before its next step (it follows `step/start` as a `user/message`, B44) and keeps
        going even if the model had finished. While idle it starts a turn (background) or
        waits for the next `run_turn()`. After `cancel()` of the running turn it goes to
        `next-turn` instead (docs/loop.md#send-and-cancel).

        Args:
            message: the text, or a complete user message (its id must not be pending).

        Returns:
            The queued message as logged.

        Raises:
            UsageError, DuplicateMessageError, EventRejectedError: as `send`.
        """
        return self.send(message, target=INBOX_NEXT_STEP, wakeup=True)

    def inject(self, message: str | Message) -> Message:
        """Queue context for the next step (`next-step`, not waking).

        Same as `send(message, target="next-step", wakeup=False)`. A running turn claims it
        at its next step boundary; while idle it only records the splice and waits (B46),
        also across persist and resume (B58).

        Args:
            message: the text, or a complete user message (its id must not be pending).

        Returns:
            The queued message as logged.

        Raises:
            UsageError, DuplicateMessageError, EventRejectedError: as `send`.
        """
        return self.send(message, target=INBOX_NEXT_STEP, wakeup=False)
