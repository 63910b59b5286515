"""Synchronous tool bodies: each runs in its own daemon thread, bounded after cancellation.

A synchronous body cannot be interrupted: Python cannot stop a thread blocked in
`time.sleep(3600)` or in a read that never returns. So cancellation gives such a body a
grace period (`LoopConfig.tool_cancel_grace_seconds`) to return; a body that returns in time
is reported as usual (a success becomes `ABORTED` with its output,
docs/scheduler.md#tool-error-codes), and one still running after it raises
`BodyNotInterruptedError`, which the pipeline answers `TOOL_OUTCOME_UNKNOWN` saying so. The loop
stops waiting for that thread; being a daemon thread, it never holds the process open at exit, so a
cancelled turn closes its log and a SIGTERMed `duraloop run` exits in bounded time.

Before the cancellation nothing else stops the wait: a tool's `timeout_seconds` is reported
when the body returns, as before. `anyio.from_thread` works in these threads with the
`token=` argument (`anyio.lowlevel.current_token()` taken on the event loop).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import suppress
from typing import Final, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

from ._signal import CancelSignal

T = TypeVar("T")

DEFAULT_CANCEL_GRACE_SECONDS: Final = 5.0
"""How long a body that cannot be interrupted gets after cancellation, in seconds."""


class BodyNotInterruptedError(Exception):
    """Raised by `run_blocking` when a synchronous body outlived the grace period.

    The body's thread is left running (a daemon thread); the pipeline answers the call
    `TOOL_OUTCOME_UNKNOWN` with `NOT_INTERRUPTED_TEXT`.

    Args:
        grace_seconds: how long the body was waited for after the cancellation, in seconds.
    """

    def __init__(self, grace_seconds: float) -> None:
        super().__init__(
            f"the tool body was still running {grace_seconds:g} seconds after cancellation"
        )
        self.grace_seconds = grace_seconds


class LoopCaller:
    """Run a callable on the event loop thread that built this, from that thread or any other.

    Signal listeners run wherever `CancelSignal.cancel()` is called, which may be a tool
    body's thread; cancel scopes may only be touched on the event loop.
    """

    def __init__(self) -> None:
        self._token = anyio.lowlevel.current_token()
        self._thread = threading.get_ident()

    def __call__(self, fn: Callable[[], object]) -> None:
        """Call `fn` now on the loop thread, or hand it to the loop and wait for it.

        Args:
            fn: a synchronous callable that must run on the event loop.
        """
        if threading.get_ident() == self._thread:
            fn()
            return
        # The loop may be gone (the body outlived the run that waited for it): nothing to do.
        with suppress(anyio.RunFinishedError):
            anyio.from_thread.run_sync(fn, token=self._token)


def postpone_cancel(scope: anyio.CancelScope, grace_seconds: float) -> None:
    """Make `scope` expire `grace_seconds` from now, unless it expires sooner already.

    Args:
        scope: the scope to bound.
        grace_seconds: the grace period, in seconds.
    """
    scope.deadline = min(scope.deadline, anyio.current_time() + grace_seconds)


async def run_blocking(
    fn: Callable[[], T], *, signal: CancelSignal, grace_seconds: float, name: str
) -> T:
    """Run `fn` in a new daemon thread and return its value (or raise what it raised).

    Args:
        fn: the synchronous body, with its arguments bound.
        signal: the turn's cancellation signal; once it fires, `fn` has `grace_seconds`.
        grace_seconds: how long to wait for `fn` after cancellation, in seconds.
        name: the thread's name (shown in debuggers and thread dumps).

    Returns:
        What `fn` returned.

    Raises:
        BodyNotInterruptedError: if `fn` was still running `grace_seconds` after the signal
            fired; its thread keeps running, detached.
        BaseException: what `fn` raised.
    """
    caller = LoopCaller()
    finished = anyio.Event()
    returned: list[T] = []
    raised: list[BaseException] = []

    def target() -> None:
        try:
            returned.append(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task below
            raised.append(exc)
        finally:
            caller(finished.set)

    def on_cancel(_reason: object) -> None:
        caller(lambda: postpone_cancel(scope, grace_seconds))

    # Shielded: only the signal's grace deadline ends the wait before `fn` returns, not a
    # timeout or the pipeline's prompt cancel (a thread cannot be interrupted either way).
    with anyio.CancelScope(shield=True) as scope:
        remove = signal.add_listener(on_cancel)
        try:
            threading.Thread(target=target, name=name, daemon=True).start()
            await finished.wait()
        finally:
            remove()
    if raised:
        raise raised[0]
    if not returned:
        raise BodyNotInterruptedError(grace_seconds)
    return returned[0]
