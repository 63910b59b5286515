"""`duraloop chat` asks inline when a call waits for approval (an `Approver` for the loop).

The chat's stdin reader is the only reader of stdin: while an ask is open, the chat hands
the next input line to `InlineApprover.offer` instead of steering the turn with it. The
answer: `y` (or `yes`) approves, `n` (or `no`) rejects, any other text rejects with that
text as the feedback the model is told; an empty line asks again, and a `/` command is
still a command: it runs, then the question is asked again (`/quit` cancels the turn, and
so the ask). The end of input (EOF) answers None: the turn pauses, and the chat prints how
to decide it later. In a pipe, lines read while a turn runs (commands too) wait in a
backlog, in order, so the line after a prompt answers its ask.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from rich.console import Console

from ..log import MAX_FEEDBACK_CHARS
from ._approval_lines import MAX_REASON_CHARS
from ._approval_text import arguments_text
from ._render import MAX_NAME_CHARS, ident, short_text, styled

if TYPE_CHECKING:
    from ..loop import AgentLoop
    from ..tools import ApprovalRequest, Decision

QUESTION: Final = "allow? [y]es / [n]o / or type feedback to reject with it: "
HINT: Final = (
    "(answer the question: y, n, or feedback text to reject with it; /quit cancels the turn)"
)
_YES: Final = frozenset({"y", "yes"})
_NO: Final = frozenset({"n", "no"})


class InlineApprover:
    """Ask the person at the chat about each call that waits (see the module).

    Args:
        console: where the question goes (the conversation, stdout).
        backlog: whether lines read while no ask is open wait for the next ask (a pipe);
            else only a line read while the question is shown answers it (a terminal).
    """

    def __init__(self, console: Console, *, backlog: bool = False) -> None:
        self.console = console
        self.backlog = backlog
        self._held: deque[str] = deque()
        self._answers: MemoryObjectSendStream[str | None] | None = None
        self._eof = False  # the end of input: no answer will ever come
        self._waiting_idle = False  # a pipe's command waits for the turns before it
        self.run_command: Callable[[str], bool] | None = None
        """Runs a `/` command a question took from the backlog; False ends the chat."""

    @property
    def asking(self) -> bool:
        """Whether a question is open (the next line answers it)."""
        return self._answers is not None

    def offer(self, line: str) -> bool:
        """Hand an input line to the open question.

        Returns:
            True if the line answered it; False if no question is open (steer the turn
            with the line, or queue it, as without approvals).
        """
        if self._answers is None:
            return False
        self._answers.send_nowait(line)
        return True

    def ask_again(self) -> None:
        """Show the open question again (after a `/` command typed at it ran)."""
        self.console.print(styled((HINT, "dim")))
        self.console.file.write(QUESTION)
        self.console.file.flush()

    def end_of_input(self) -> None:
        """Say no line will come: a question is answered None once the held lines are used."""
        self._eof = True
        self.interrupt()

    def waiting_idle(self, value: bool) -> None:
        """Say whether a pipe's command waits for the turns before it.

        Meanwhile a question without a held line is answered None (its turn pauses): no
        line after the command may answer it.
        """
        self._waiting_idle = value
        if value:
            self.interrupt()

    def interrupt(self) -> None:
        """Answer an open question None (a cancel, or no answer will come)."""
        if self._answers is not None:
            self._answers.send_nowait(None)

    def hold(self, line: str) -> None:
        """Keep a line read while a turn runs for the next question (a pipe's backlog)."""
        self._held.append(line)

    def next_held(self) -> str | None:
        """Return the oldest held line no question took (the pipe's next turn), or None."""
        return self._held.popleft() if self._held else None

    def release_held(self, loop: AgentLoop, errors: Console, *, drop: bool = False) -> None:
        """Queue the held lines no turn ran as `loop`'s follow-ups; drop them if it paused.

        With `drop` (the chat ends: `/quit`) they are dropped without a word.
        """
        lines = [line for line in self._held if not drop]
        self._held.clear()
        if lines and loop.paused is not None:
            errors.print(styled((f"{len(lines)} line(s) not run: the turn is paused", "yellow")))
            return
        for line in lines:
            loop.followup(line)

    async def __call__(self, request: ApprovalRequest) -> Decision | None:
        """Ask about `request` until answered; None (pause the turn) at the end of input."""
        from ..tools import Decision

        self.console.print(
            styled(
                ("approval needed: ", "bold yellow"),
                (ident(request.tool_name, MAX_NAME_CHARS), "bold"),
                f" (call {ident(request.call_id, MAX_NAME_CHARS)})",
            )
        )
        self.console.print(styled("  arguments: ", arguments_text(request.arguments)))
        self.console.print(
            styled("  reason: ", short_text(request.reason or "-", MAX_REASON_CHARS))
        )
        while True:
            answer = await self._next_line()
            if answer is None:
                return None
            if self.backlog:
                self.console.print(styled(answer))  # a piped answer is shown where it is used
            text = answer.strip()
            if text.startswith("/"):  # a command from the backlog: it runs, then ask again
                if self.run_command is None or not self.run_command(text):
                    return None  # `/quit`: the chat cancels the turn
                self.console.print(styled((HINT, "dim")))
                continue
            if text.lower() in _YES:
                return Decision(allow=True)
            if text.lower() in _NO:
                return Decision(allow=False)
            if len(text) > MAX_FEEDBACK_CHARS:
                self.console.print(
                    styled(
                        (f"(feedback cut to its first {MAX_FEEDBACK_CHARS:,} characters)", "dim")
                    )
                )
            if text:
                return Decision(allow=False, feedback=text)

    async def _next_line(self) -> str | None:
        """Show the question and return the next answer line (None: no answer will come)."""
        self.console.file.write(QUESTION)
        self.console.file.flush()
        if self._held:
            return self._held.popleft()
        if self._eof or self._waiting_idle:
            self.console.print()
            return None
        send, receive = anyio.create_memory_object_stream[str | None](max_buffer_size=1)
        self._answers = send
        try:
            answer = await receive.receive()
        finally:
            self._answers = None
            send.close()
            receive.close()
        if answer is None:  # no line came (the end of input, a cancel): end the question's line
            self.console.print()
        return answer
