"""The per-turn cancellation signal: cooperative, first reason wins (docs/loop.md#vocabulary).

Cancellation is signal-based, not task cancellation: the driver checks the signal at
documented points, tools receive it and settle themselves, and nothing is abandoned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

USER_CANCEL: dict[str, Any] = {"kind": "user"}


class TurnCancelled(Exception):  # noqa: N818 - a signal, not an error (style rule D11)
    """Signal raised by `CancelSignal.throw_if_aborted` once the turn is cancelled.

    Args:
        reason: the cancellation cause JSON, e.g. `{"kind": "user"}`.
    """

    def __init__(self, reason: dict[str, Any]) -> None:
        super().__init__(f"turn cancelled ({reason.get('kind', 'unknown')})")
        self.reason = reason


class CancelSignal:
    """A cancellation signal shared by the driver, the scheduler and every tool of a turn.

    `cancel()` is synchronous and safe to call from any task or from a signal handler
    running on the event loop; the first reason wins. Listeners run synchronously.
    """

    def __init__(self) -> None:
        self._reason: dict[str, Any] | None = None
        self._event: anyio.Event | None = None
        self._listeners: list[Callable[[dict[str, Any]], None]] = []

    @property
    def aborted(self) -> bool:
        """Whether `cancel()` has been called."""
        return self._reason is not None

    @property
    def reason(self) -> dict[str, Any] | None:
        """The first cancellation cause, or None while not cancelled."""
        return self._reason

    def cancel(self, reason: dict[str, Any] | None = None) -> None:
        """Cancel with `reason` (default `{"kind": "user"}`); later calls change nothing."""
        if self._reason is not None:
            return
        self._reason = dict(USER_CANCEL if reason is None else reason)
        if self._event is not None:
            self._event.set()
        for listener in list(self._listeners):
            listener(self._reason)

    def throw_if_aborted(self) -> None:
        """Raise `TurnCancelled` if cancelled.

        Raises:
            TurnCancelled: carrying the first reason.
        """
        if self._reason is not None:
            raise TurnCancelled(self._reason)

    def add_listener(self, listener: Callable[[dict[str, Any]], None]) -> Callable[[], None]:
        """Call `listener(reason)` on cancellation (at once if already cancelled).

        Returns:
            A function that removes the listener.
        """
        if self._reason is not None:
            listener(self._reason)
            return lambda: None
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    async def wait(self) -> None:
        """Wait until cancelled (returns at once if already cancelled)."""
        if self._reason is not None:
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()
