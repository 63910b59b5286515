"""`duraloop chat`: an interactive, line-oriented conversation with one session.

One anyio event loop runs three things: a reader turning stdin into lines, a signal watcher,
and the dispatcher. While idle (prompt `you> `) a line starts a turn; while a turn runs a
plain line steers it (`AgentLoop.steer`, entered at the next step boundary) and a line
starting with `/` is a command (`/show`, `/fork`, `/compact`, `/quit`, `/help`). When stdin
is not a terminal (a pipe, a file) it is a script: each line is its own turn (a line read while a
turn runs is queued with `AgentLoop.followup`), and a command or the end of input waits for
the turns before it. The chat exits 1 if a turn ended `error` or `blocked`, or a line was
not UTF-8 (refused, like `run` refuses such a prompt), else 3 if it ends paused.

A call that waits for approval is asked about inline (`_chat_approvals.InlineApprover`):
the next line answers it; a `/` command typed there runs, then the question is asked again
(in a pipe, a command read while a turn that may ask runs keeps its place among the
answers). A chat on a paused session asks about its call first.

Ctrl-C (SIGINT) during a turn cancels it the durable way (running tools drain, the log
closes `aborted`) and the prompt returns; a second Ctrl-C while cancelling exits at once
with 130 (resume repairs the open turn). Ctrl-C or EOF (Ctrl-D) while idle ends the chat
with 0; EOF while a turn runs waits for the turn first, so piped input works. SIGTERM
cancels a running turn durably and ends the chat with 143.

Output stays line-oriented (no cursor control): the stream and the transcript go to stdout,
a one-line status after each step, tool and turn change goes to stderr.

The status line is `StatusLine` (in `_status.py`), an observer like the live renderer;
the commands' output is `_chat_commands`.
"""

from __future__ import annotations

import os
import signal
import sys

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from rich.console import Console

from ..errors import ApprovalError, UsageError
from ..log.vocabulary import REASON_BLOCKED
from ..loop import AgentLoop
from ..store import SessionStore
from ..tools import kill_running_commands
from . import _chat_commands as commands
from ._approval_text import ContinueWith, print_pending
from ._chat_approvals import InlineApprover
from ._chat_input import read_stdin_lines
from ._live import LiveRenderer
from ._render import ident, styled
from ._runner import EXIT_PAUSED, close_model, utf8_text
from ._status import StatusLine

EXIT_AT_ONCE = 130
EXIT_TERMINATED = 143
PROMPT = "you> "

# An item from the reader or the signal watcher: a line, or None to end the chat.
_Item = str | None


class Chat:
    """One interactive chat over an open loop (the caller closes the loop).

    Args:
        loop: the session's loop.
        store: the store the session lives in (for `/fork`).
        console: the conversation (stdout).
        errors: status and diagnostics (stderr).
        interactive: whether stdin is a terminal; otherwise (a pipe, a file) each line is its
            own turn, queued as a follow-up while a turn runs, and a `/` command or the end
            of input waits for the queued turns.
        approver: the loop's approver, which the chat hands answer lines to; None when no
            call asks.
        how: the options of the printed commands that run a paused turn on.
    """

    def __init__(
        self,
        loop: AgentLoop,
        store: SessionStore,
        *,
        console: Console,
        errors: Console,
        interactive: bool,
        approver: InlineApprover | None = None,
        how: ContinueWith | None = None,
    ) -> None:
        self.loop = loop
        self.approver = approver
        self.how = how
        self._quit = False  # a `/quit` taken at an approval question ends the chat
        if approver is not None:
            approver.run_command = self._command_at_question
        self.store = store
        self.console = console
        self.errors = errors
        self.interactive = interactive
        self.status = StatusLine(errors, loop.session.events)
        self.exit_code = 0
        self.turn_failed = False  # a turn ended `error` or `blocked`: the chat exits 1
        self.input_refused = False  # a line was not UTF-8: it was not sent; the chat exits 1
        self._turn_done: anyio.Event | None = None  # set while a turn runs
        self._cancelling = False
        self._send: MemoryObjectSendStream[_Item]
        self._receive: MemoryObjectReceiveStream[_Item]
        self._send, self._receive = anyio.create_memory_object_stream[_Item](max_buffer_size=1000)

    @property
    def running(self) -> bool:
        """Whether a turn is running."""
        return self._turn_done is not None

    async def run(self) -> int:
        """Run the chat until `/quit`, EOF or Ctrl-C while idle.

        Returns:
            The exit code: 143 after SIGTERM, else 1 if a turn ended `error` or `blocked` or
            an input line was refused (not UTF-8), else 3 if the session is paused, else 0.
        """
        live = LiveRenderer(self.console, self.loop.config.prices).seed(self.loop.session.events)
        renderer = self.loop.session.observe(live)
        status = self.loop.session.observe(self.status)
        try:
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(self._read_stdin)
                task_group.start_soon(self._watch_signals)
                if self.loop.paused is not None and self.approver is not None:
                    self._turn_done = anyio.Event()  # ask about the paused call first
                    self.status.state, self.status.step = "running", self.loop.paused.step
                    task_group.start_soon(self._turn, None, True)
                else:
                    self._prompt()
                await self._dispatch(task_group)
                await self._finish()
                task_group.cancel_scope.cancel()
        finally:
            status()
            renderer()
        if self.exit_code or self.turn_failed or self.input_refused:
            return self.exit_code or 1
        return EXIT_PAUSED if self.loop.paused is not None else 0

    def _prompt(self) -> None:
        self.console.file.write(PROMPT)
        self.console.file.flush()

    async def _dispatch(self, task_group: TaskGroup) -> None:
        approver = self.approver
        async for item in self._receive:
            if self._quit:
                return
            line = None if item is None else item.strip()
            if line is not None and approver is not None and approver.asking:
                if not line.startswith("/"):
                    approver.offer(line)  # the answer to the open approval question
                elif not self._command(line):
                    return
                else:
                    approver.ask_again()  # a command at the question runs; it is asked again
                continue
            if line is not None and line.startswith("/") and self._holds(line):
                continue  # in a pipe, a command after an asking turn's prompt keeps its place
            if line is None or (line.startswith("/") and not self.interactive):
                # EOF mid-turn lets the turn finish first; in a pipe, a command waits too
                # (meanwhile an approval question gets no answer: its turn pauses).
                if approver is not None:
                    approver.end_of_input() if line is None else approver.waiting_idle(True)
                await self._wait_idle()
                if approver is not None:
                    approver.waiting_idle(False)
            if line is None:
                return
            if line.split()[:1] == ["/compact"]:
                await commands.compact(self.console, self.errors, self.loop, self.running)
                self._prompt() if not self.running else None
            elif line.startswith("/"):
                if not self._command(line):
                    return
            elif not line:
                if not self.running:
                    self._prompt()
            elif not self.running:
                self._turn_done = anyio.Event()
                paused = self.loop.paused is not None and approver is not None
                if paused:  # its call is asked about again first
                    self.errors.print(styled(("the turn is paused; not sent: ", "yellow"), line))
                task_group.start_soon(self._turn, None if paused else line, paused)
            elif self._cancelling:
                self.errors.print(
                    styled(("cancelling the turn; wait for the prompt to type again", "yellow"))
                )
            elif self.interactive:
                self.loop.steer(line)
                self.console.print(styled(("steering:", "yellow"), " ", line))
            elif approver is not None and approver.backlog:
                approver.hold(line)  # an answer to the next question, or the next turn
            else:
                self.loop.followup(line)  # logged; the running turn's task runs it next
                self.console.print(styled(("queued:", "dim"), " ", line))

    def _holds(self, line: str) -> bool:
        """In a pipe, hold a command read while a turn that may ask runs (for its question)."""
        approver = self.approver
        if self.interactive or not self.running or approver is None or not approver.backlog:
            return False
        approver.hold(line)
        return True

    def _command_at_question(self, line: str) -> bool:
        """Run a `/` command an approval question took from the pipe; False: `/quit`."""
        if self._command(line):
            return True
        self._quit = True  # the question gets no answer; the turn is cancelled
        if not self._cancelling:
            self._cancel()
        self._send.send_nowait(None)  # the dispatcher ends the chat
        return False

    async def _wait_idle(self) -> None:
        """Wait until no turn runs and no queued follow-up is left."""
        while self._turn_done is not None:
            await self._turn_done.wait()

    def _command(self, line: str) -> bool:
        """Run a `/` command; return False to end the chat."""
        name = line.split()[0]
        if name == "/quit":
            return False
        if name == "/show":
            commands.show(self.console, self.loop, running=self.running)
        elif name == "/fork":
            commands.fork(self.console, self.errors, self.store, self.loop, self.how)
        else:
            self.console.print(styled(commands.HELP))
        if not self.running:
            self._prompt()
        return True

    async def _turn(self, prompt: str | None, paused: bool = False) -> None:
        """Run a turn for `prompt` (or the paused one), then each line queued or held meanwhile."""
        next_prompt: str | None = prompt
        try:
            # A turn that raised (a failure, or a spent session budget refusing to start one)
            # ends the drain: its follow-ups stay queued, each later line tries again.
            while await self._one_turn(next_prompt, paused) and self.loop.paused is None:
                paused = False
                held = self._next_held_prompt()
                if self._quit:
                    break
                if held is not None:
                    self.loop.followup(held)  # logged as queued, as without approvals
                elif not self.loop.inbox.next_turn:
                    break
                next_prompt = None  # run_turn() takes the oldest queued follow-up
        finally:
            if self.approver is not None:
                self.approver.release_held(self.loop, self.errors, drop=self._quit)
            done, self._turn_done = self._turn_done, None
            self._cancelling = False
            if self.loop.inbox.next_step:
                self.console.print(
                    styled(("(steering arrived as the turn ended; it enters the next turn)", "dim"))
                )
            if done is not None:
                done.set()
            self._prompt()

    def _next_held_prompt(self) -> str | None:
        """Return the next held line to run as a turn; held commands on the way run first."""
        while self.approver is not None and not self._quit:
            held = self.approver.next_held()
            if held is None or not held.startswith("/"):
                return held
            if not self._command(held):
                self._quit = True
                self._send.send_nowait(None)  # the dispatcher ends the chat
        return None

    async def _one_turn(self, prompt: str | None, paused: bool = False) -> bool:
        """Run one turn (or the paused one); False if it raised (printed; the chat goes on)."""
        try:
            if paused:
                result = await self.loop.continue_turn()  # the approver asks about its call
            else:
                result = await self.loop.run_turn(prompt)
        except Exception as exc:  # noqa: BLE001 - the log is closed (`error`); the chat goes on
            self.turn_failed = True
            text = str(exc)
            if isinstance(exc, ApprovalError) and self.loop.paused is not None:
                from ._approval_flow import paused_prompt_error  # CLI advice, not the library's

                text = str(paused_prompt_error(self.loop.session.id, self.loop.paused, self.how))
            self.errors.print(styled((type(exc).__name__, "red"), ": ", text))
            return False
        if self.loop.paused is not None:  # no answer came: decide it later, from anywhere
            print_pending(self.console, self.loop.session.id, self.loop.paused, how=self.how)
        blocked = result is not None and result.kind == REASON_BLOCKED
        self.turn_failed = self.turn_failed or blocked
        return True

    async def _finish(self) -> None:
        """Cancel a running turn durably and wait until its log is closed."""
        if self._turn_done is not None:
            done = self._turn_done
            if not self._cancelling:
                self._cancel()
            await done.wait()
        self.console.print(styled("session: ", ident(self.loop.session.id)))

    def _cancel(self) -> None:
        self._cancelling = True
        self.status.state = "cancelling"
        self.loop.cancel({"kind": "user"})
        if self.approver is not None:
            self.approver.interrupt()  # an inline question about a paused call closes too

    async def _watch_signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                if signum == signal.SIGTERM:
                    self.exit_code = EXIT_TERMINATED
                    self._send.send_nowait(None)
                    if self.running and not self._cancelling:
                        self._cancel()
                elif not self.running:
                    self.console.print()
                    self._send.send_nowait(None)
                elif not self._cancelling:
                    self.errors.print(
                        styled(
                            (
                                "SIGINT: cancelling the turn (running tools drain, the log is "
                                "closed); press Ctrl-C again to exit at once",
                                "yellow",
                            )
                        )
                    )
                    self._cancel()
                else:
                    kill_running_commands()  # nothing outlives the process, even mid-drain
                    sys.stdout.flush()
                    os._exit(EXIT_AT_ONCE)

    async def _read_stdin(self) -> None:
        """Feed stdin lines into the queue; None at EOF."""
        await read_stdin_lines(self._send_line)
        self._send.send_nowait(None)

    def _send_line(self, data: bytes) -> None:
        """Queue one input line; a line that is not UTF-8 is refused (as `run` refuses it)."""
        try:
            line = utf8_text(
                data, source="the input line", fix="type UTF-8 text; the line was not sent"
            )
        except UsageError as exc:
            self.input_refused = True
            self.errors.print(styled(("UsageError", "red"), ": ", str(exc)))
            return
        self._send.send_nowait(line)


async def run_chat(
    loop: AgentLoop,
    store: SessionStore,
    *,
    console: Console,
    errors: Console,
    resumed: bool,
    approver: InlineApprover | None = None,
    asks: bool = False,
    how: ContinueWith | None = None,
) -> int:
    """Run an interactive chat on `loop`; a resumed session shows its recent history first.

    `approver` is the loop's inline approver; in a pipe, when a call may ask (`asks`) or
    the session is paused, its backlog holds the lines read while a turn runs.

    Returns:
        The exit code (see `Chat.run`).
    """
    interactive = os.isatty(sys.stdin.fileno())
    if approver is not None:
        approver.backlog = not interactive and (asks or loop.paused is not None)
    chat = Chat(
        loop,
        store,
        console=console,
        errors=errors,
        interactive=interactive,
        approver=approver,
        how=how,
    )
    if resumed:
        commands.show_history(console, loop)
    try:
        return await chat.run()
    finally:
        await close_model(loop.model)
