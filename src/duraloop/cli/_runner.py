"""Run one turn from the command line: live rendering plus SIGINT/SIGTERM cancellation.

The first SIGINT (Ctrl-C, to the process alone or to its group) or SIGTERM cancels the turn
the durable way: no new tool starts, started ones drain (a running `bash` tool's process
group is terminated), unstarted calls are answered, and the log is closed. A second SIGINT
exits at once with status 130; the log then ends inside the turn and resume repairs it.
"""

from __future__ import annotations

import os
import signal

import anyio
from rich.console import Console

from ..errors import UsageError
from ..log import Message
from ..loop import AgentLoop, TurnResult
from ..tools._bash_tool import kill_running_commands
from ._render import LiveRenderer

EXIT_AT_ONCE = 130


async def _watch_signals(loop: AgentLoop, errors: Console) -> None:
    received = 0
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            received += 1
            if received == 1:
                errors.print(
                    f"[yellow]{signal.Signals(signum).name}: cancelling the turn "
                    "(running tools drain, the log is closed); press Ctrl-C again to exit at once"
                    "[/yellow]"
                )
                loop.cancel({"kind": "user"})
            else:
                kill_running_commands()  # nothing outlives the process, even mid-drain
                os._exit(EXIT_AT_ONCE)


def require_prompt(prompt: str) -> None:
    """Refuse an empty or whitespace-only prompt before anything is written.

    Raises:
        UsageError: always for such a prompt (providers reject an empty user turn).
    """
    if not prompt.strip():
        raise UsageError("the prompt is empty; pass the text of the user's message")


def refuse_model_flags_without_prompt(**flags: object) -> None:
    """Refuse model options given to `duraloop resume` without a prompt (nothing would use them).

    Args:
        flags: the option values by parameter name (`model`, `base_url`, ...); None if unset.

    Raises:
        UsageError: naming the options that were given.
    """
    given = ["--" + name.replace("_", "-") for name, value in flags.items() if value is not None]
    if given:
        raise UsageError(
            f"{', '.join(given)} only apply when resume runs a turn; add a PROMPT to run "
            "one, or drop them to just repair the session"
        )


async def close_model(model: object) -> None:
    """Close a model adapter's HTTP client, if it has one, inside the event loop that used it.

    Provider adapters (`OpenAIChatModel`, `DeepSeekChatModel`, `AnthropicMessagesModel`)
    hold connections bound to the running event loop; each CLI command runs one event loop,
    so the adapter is closed before it ends. Models without `aclose` hold nothing.
    """
    aclose = getattr(model, "aclose", None)
    if aclose is not None:
        await aclose()


async def run_turn_live(
    loop: AgentLoop, prompt: str | Message, *, console: Console, errors: Console
) -> TurnResult:
    """Run one turn with live rendering and signal handling.

    Returns:
        The turn result.

    Raises:
        Exception: the original failure of an error turn (the log is already closed).
    """
    unsubscribe = loop.session.observe(LiveRenderer(console))
    failure: Exception | None = None
    try:
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(_watch_signals, loop, errors)
            try:
                result = await loop.run_turn(prompt)
            except Exception as exc:  # noqa: BLE001 - re-raised below, outside the task group
                # Raised inside the task group it would come out wrapped in an ExceptionGroup,
                # and the CLI's one-line `DuraloopError` report would not see it.
                failure = exc
            finally:
                task_group.cancel_scope.cancel()
    finally:
        unsubscribe()
        await close_model(loop.model)
    if failure is not None:
        raise failure
    return result
