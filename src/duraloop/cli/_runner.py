"""Run one turn from the command line: live rendering plus SIGINT/SIGTERM cancellation.

The first SIGINT (Ctrl-C, to the process alone or to its group) or SIGTERM cancels the turn
the durable way: no new tool starts, started ones drain (a running `bash` tool's process
group is terminated), unstarted calls are answered, and the log is closed. A second SIGINT
exits at once with status 130; the log then ends inside the turn and resume repairs it.
"""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from rich.console import Console

from ..errors import UsageError
from ..log import Message
from ..log.vocabulary import REASON_COMPLETED, REASON_MAX_TOKENS
from ._live import LiveRenderer

if TYPE_CHECKING:
    from ..loop import AgentLoop, TurnResult

EXIT_AT_ONCE = 130
EXIT_PAUSED = 3
"""The exit status of a command whose turn paused: a tool call waits for approval."""
TURN_PAUSED = "paused"
"""`TurnResult.kind` of a paused turn (never written to the log: the turn stays open)."""


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
                from ..tools import kill_running_commands

                kill_running_commands()  # nothing outlives the process, even mid-drain
                os._exit(EXIT_AT_ONCE)


def require_prompt(prompt: str) -> str:
    """Refuse an empty, whitespace-only or non-UTF-8 prompt before anything is written.

    Returns:
        The prompt, unchanged.

    Raises:
        UsageError: for such a prompt (providers reject an empty user turn, and a log holds
            UTF-8 text only).
    """
    text = utf8_argument(
        prompt, source="the prompt", fix="pass the text of the user's message as UTF-8"
    )
    if not text.strip():
        raise UsageError("the prompt is empty; pass the text of the user's message")
    return text


def utf8_text(data: bytes, *, source: str, fix: str) -> str:
    """Decode user input as UTF-8, or refuse it naming where it came from (one check for all).

    Args:
        data: the raw bytes (a file's content, or a command-line argument's bytes).
        source: what the bytes are, for the message (`the prompt`, `the system prompt file 'x'`).
        fix: what to do instead, for the message.

    Returns:
        The decoded text.

    Raises:
        UsageError: if `data` is not UTF-8 (the message names the decoder's reason and byte).
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{source} is not UTF-8 text ({exc.reason} at byte {exc.start}); {fix}"
        ) from exc


def utf8_argument(text: str, *, source: str, fix: str) -> str:
    """Check that a command-line argument is UTF-8 text (`utf8_text` on its original bytes).

    Python hands over undecodable argv bytes as lone surrogates (`surrogateescape`); they
    would be refused only later, when the first event holding them is appended.

    Args:
        text: the argument as Python received it.
        source: what the argument is, for the message.
        fix: what to do instead, for the message.

    Returns:
        The argument, unchanged.

    Raises:
        UsageError: if the argument's bytes are not UTF-8.
    """
    try:
        data = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise UsageError(
            f"{source} is not UTF-8 text (a lone surrogate at index {exc.start}); {fix}"
        ) from exc
    return utf8_text(data, source=source, fix=fix)


def system_prompt(text: str | None) -> str | None:
    """Return the `--system` prompt: the text itself, or the content of `@FILE`.

    Args:
        text: the option's value, or None.

    Returns:
        The system prompt, or None when the option was not given.

    Raises:
        UsageError: if the file cannot be read, or the text or the file is not UTF-8.
    """
    fix = "pass the prompt text itself, or @FILE naming a readable UTF-8 file"
    if text is None:
        return None
    text = utf8_argument(text, source="the --system text", fix=fix)
    if not text.startswith("@"):
        return text
    path = Path(text[1:])
    source = f"the system prompt file {str(path)!r} (from --system {text})"
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {source}: {exc.strerror}; {fix}") from exc
    return utf8_text(data, source=source, fix=fix)


def exit_code_for(kind: str) -> int:
    """Return the exit status of a command that ran a turn, for how the turn ended.

    `run`, `resume`, and `approve`/`deny --continue` exit with it.

    Args:
        kind: `TurnResult.kind`: the `turn/end` reason kind, or `paused`.

    Returns:
        0 for `completed` and `max-tokens`; `EXIT_PAUSED` (3) for a turn paused because a
        tool call waits for a person's approval (the turn stays open: `duraloop approve` or
        `duraloop deny` decides it, from any process); else 1 (`error`, `aborted`,
        `blocked`). Usage errors exit 2, before or instead of a turn.
    """
    if kind == TURN_PAUSED:
        return EXIT_PAUSED
    return 0 if kind in (REASON_COMPLETED, REASON_MAX_TOKENS) else 1


def os_error_text(exc: OSError) -> str:
    """Return a one-line description of a file system failure, with what to check.

    Args:
        exc: the failure.

    Returns:
        `<reason>: <path>; check ...` (the reason alone when no path is known).
    """
    reason = exc.strerror or str(exc)
    if exc.filename is None:
        return f"{reason}; check the paths given to --store, --cwd and --dir"
    return f"{reason}: {exc.filename}; check that this path exists and can be read and written"


def refuse_model_flags_without_prompt(
    *,
    when: str = "when resume runs a turn",
    instead: str = "add a PROMPT to run one, or drop {them} to just repair the session",
    **flags: object,
) -> None:
    """Refuse model options given to a command that runs no turn (`resume` without a prompt).

    Only options given on the command line are refused: a value from the environment
    (`DURALOOP_MODEL`) is a default, not a request.

    Args:
        when: when the options are used, for the message.
        instead: what to do, for the message (`{them}` becomes `it` or `them`).
        flags: the option values by parameter name (`model`, `base_url`, ...); None if unset.

    Raises:
        UsageError: naming the options that were given.
    """
    given = [
        "--" + name.replace("_", "-")
        for name, value in flags.items()
        if value is not None and _on_command_line(name)
    ]
    if given:
        verb, them = ("is", "it") if len(given) == 1 else ("are", "them")
        raise UsageError(f"{', '.join(given)} {verb} used only {when}; {instead.format(them=them)}")


def _on_command_line(name: str) -> bool:
    """Whether the running command's parameter `name` was given on the command line.

    True outside a command (an in-process call) or for a parameter the command lacks.
    """
    from typer._click.core import ParameterSource
    from typer._click.globals import get_current_context

    context = get_current_context(silent=True)
    if context is None or name not in context.params:
        return True
    return context.get_parameter_source(name) not in (
        ParameterSource.ENVIRONMENT,
        ParameterSource.DEFAULT,
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
    return await run_live(
        loop, functools.partial(loop.run_turn, prompt), console=console, errors=errors
    )


async def run_live(
    loop: AgentLoop,
    turn: Callable[[], Awaitable[TurnResult]],
    *,
    console: Console,
    errors: Console,
) -> TurnResult:
    """Run a turn (`loop.run_turn`, or `loop.continue_turn` of a paused one) live.

    Args:
        loop: the session's loop.
        turn: runs the turn and returns its result.
        console: where the live stream goes.
        errors: where signal notices go.

    Returns:
        The turn result.

    Raises:
        Exception: what `turn` raised, e.g. the original failure of an error turn (the log
            is already closed).
    """
    renderer = LiveRenderer(console, loop.config.prices).seed(loop.session.events)
    unsubscribe = loop.session.observe(renderer)
    failure: Exception | None = None
    try:
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(_watch_signals, loop, errors)
            try:
                result = await turn()
            except Exception as exc:  # noqa: BLE001 - re-raised below, outside the task group
                # Raised inside the task group it would come out wrapped in an ExceptionGroup,
                # and the CLI's one-line `DuraloopError` report would not see it.
                failure = exc
            finally:
                task_group.cancel_scope.cancel()
    finally:
        unsubscribe()
        renderer.finish()  # what the command prints next starts on its own line
        await close_model(loop.model)
    if failure is not None:
        raise failure
    return result
