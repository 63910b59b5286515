"""Run a turn so that cancelling its caller cancels the turn the durable way."""

from __future__ import annotations

import anyio

from ._result import TurnResult
from ._turn import Turn


async def run_guarded(turn: Turn) -> TurnResult:
    """Run `turn` so that cancelling the caller cancels the turn the durable way.

    The turn runs shielded in a child task. A cancel of an enclosing scope
    (`anyio.move_on_after`, a cancelled task group, leaving `async with loop:` by a cancel)
    or a native cancel of the calling task (the first Ctrl-C under `anyio.run`/`asyncio.run`)
    becomes `turn.signal.cancel({"kind": "parent"})`: tools see the signal, started ones
    drain, their results are recorded (`ABORTED` for a cancelled body, not
    `TOOL_OUTCOME_UNKNOWN`), and the turn ends `aborted {parent}` before the cancellation
    continues outward. A tool that never honours cancellation therefore delays the caller;
    a second Ctrl-C (which `asyncio.Runner` raises as `KeyboardInterrupt`) still stops at
    once, and resume repairs the log.

    Args:
        turn: an opened turn.

    Returns:
        The turn's result; the caller's pending cancellation is raised when this returns.

    Raises:
        BaseException: what `turn.run()` raised (never wrapped in an exception group).
    """
    outcome: list[TurnResult] = []
    raised: list[BaseException] = []
    finished = anyio.Event()

    async def run_shielded() -> None:
        try:
            with anyio.CancelScope(shield=True):
                outcome.append(await turn.run())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below, unwrapped
            raised.append(exc)
        finally:
            finished.set()

    async with anyio.create_task_group() as group:
        group.start_soon(run_shielded)
        try:
            await finished.wait()
        except anyio.get_cancelled_exc_class():
            # The caller is cancelled (a scope, or a native cancel such as asyncio.Runner's
            # first Ctrl-C): cancel the turn the durable way, wait for it to close, go on.
            turn.signal.cancel({"kind": "parent"})
            with anyio.CancelScope(shield=True):
                await finished.wait()
            raise
    if raised:
        raise raised[0]
    return outcome[0]
