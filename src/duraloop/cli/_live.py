"""The live stream of a running turn: text as it streams, tool calls, retries, the turn's end."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console

from ..log import result_call_id
from ..log.vocabulary import (
    APPROVAL_ASKED,
    APPROVAL_DECIDED,
    APPROVAL_POLICY,
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    BLOCK_TOOL_CALL,
    LLM_RETRY,
    REASON_COMPLETED,
    STEP_START,
    TEXT_DELTA,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
)
from ._approval_lines import ApprovalLines, NotRunCalls
from ._render import (
    MAX_NAME_CHARS,
    code_label,
    ident,
    reason_text,
    result_text,
    safe,
    short_text,
    styled,
    visible,
)
from ._rerun_lines import live_result_line, live_started_line
from ._usage_text import TurnUsageLines

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..log import Event, Price, RerunCall


class LiveRenderer:
    """Print a running turn as a session observer.

    Shows text as it streams, each tool call with its state and duration (milliseconds),
    each approval decision, and the turn's end with what it spent. A call answered without
    running (its ask rejected or cancelled) is shown as not run, never as started. A re-run
    of an outcome-unknown call is shown with its tool's name, as a re-run, and as succeeded
    or failed again (read from its replacement, whose `isError` stays the unknown result's).
    Untrusted text is shown through `visible`.

    Args:
        console: where the stream goes (stdout).
        prices: the price table, for the cost of each turn (empty: no cost shown).
    """

    def __init__(self, console: Console, prices: Mapping[str, Price] | None = None) -> None:
        self.console = console
        self._usage = TurnUsageLines(prices or {})
        self._mid_line = False
        self._call_started: dict[str, tuple[int, str]] = {}
        self._call_names: dict[str, str] = {}
        self._turn_started_ms = 0
        self._asks = ApprovalLines()
        self._not_run = NotRunCalls()
        self._unrun: dict[str, str] = {}  # call id -> outcome, for calls that never ran
        self._reruns: dict[int, RerunCall] = {}  # re-run tool/calls by seq
        self._rerun_started: dict[int, int] = {}  # re-run tool/call seq -> its time

    def seed(self, events: Sequence[Event]) -> LiveRenderer:
        """Take in the open final turn of `events` without printing it; return self.

        A continued turn (`approve --continue`, `resume`, a chat on a paused session) then
        names the calls its decisions are about, shows an unrun call as not run, and ends
        with what the whole turn spent.
        """
        from ..log import open_turn_start  # the log's readers load when a turn runs

        start = open_turn_start(events)
        if start is None:
            return self
        for event in events[start:]:
            self._usage.feed(event)
            self._not_run.feed(event)
            if event.type == APPROVAL_ASKED and isinstance(event.data, dict):
                self._asks.line(event.type, event.data)
        return self

    def finish(self) -> None:
        """End a line the stream left open (before what the command prints next)."""
        self._newline()

    def _newline(self) -> None:
        if self._mid_line:
            self.console.file.write("\n")
            self._mid_line = False

    def __call__(self, event: Event) -> None:
        """Render one committed event."""
        kind = event.type
        data = event.data if isinstance(event.data, dict) else {}
        spent = self._usage.feed(event)
        unrun = self._not_run.feed(event)
        if kind == ASSISTANT_CHUNK:
            chunk = data.get("chunk", {})
            if chunk.get("type") == TEXT_DELTA:
                self.console.file.write(visible(str(chunk.get("text", ""))))
                self.console.file.flush()
                self._mid_line = True
        elif kind == TURN_START:
            self._turn_started_ms = event.time
            self._newline()
            self.console.print(styled((f"── turn {data.get('turn')}", "bold")))
        elif kind == STEP_START and data.get("step", 1) > 1:
            self._newline()
        elif kind == TOOL_CALL:
            self._newline()
            if not self._turn_started_ms:  # a continued turn: its start was seen elsewhere
                self._turn_started_ms = event.time
            name = ident(data.get("name"), MAX_NAME_CHARS)
            at = (event.time - self._turn_started_ms) / 1000
            from ..log import rerun_call  # here: `duraloop --help` loads no codec

            rerun = rerun_call(event)
            if rerun is not None:
                self._reruns[event.seq] = rerun
                self._rerun_started[event.seq] = event.time
                self.console.print(live_started_line(rerun, at))
                return
            self._call_started[str(data.get("callId"))] = (event.time, name)
            if unrun is not None:  # answered without running: shown with its result
                self._unrun[str(data.get("callId"))] = unrun
                return
            arguments = short_text(str(data.get("arguments", "")))
            self.console.print(
                styled(("  ⏵ " + name, "cyan"), " ", arguments, (f"  started +{at:.2f}s", "dim"))
            )
        elif kind == TOOL_RESULT:
            self._render_result(event, data)
        elif kind == ASSISTANT_MESSAGE:
            for block in data.get("message", {}).get("content", []):
                if block.get("type") == BLOCK_TOOL_CALL:
                    self._call_names[str(block.get("id"))] = ident(
                        block.get("name"), MAX_NAME_CHARS
                    )
            if data.get("interrupted"):
                self._newline()
                self.console.print(
                    styled(("  (stream interrupted; the visible prefix is kept)", "yellow"))
                )
        elif kind == LLM_RETRY:
            self._newline()
            failure = data.get("failure") or {}
            budget = f"/{data['maxRetries']}" if "maxRetries" in data else ""
            text = (
                f"  ↻ model request failed [{ident(failure.get('code'), MAX_NAME_CHARS)}]: "
                f"{short_text(str(failure.get('message', '')), 120)}; retry "
                f"{data.get('retry')}{budget} in {int(data.get('delayMs', 0)) / 1000:g} s"
            )
            self.console.print(safe(text, "yellow"))
        elif kind in (APPROVAL_DECIDED, APPROVAL_POLICY):
            self._newline()
            self.console.print(self._asks.line(kind, data))
        elif kind == APPROVAL_ASKED:  # shown by what waits for the answer (run, chat)
            self._newline()
            self._asks.line(kind, data)
        elif kind == TURN_END:
            self._newline()
            reason = data.get("reason", {})
            style = "green" if reason.get("kind") == REASON_COMPLETED else "red"
            self.console.print(safe(f"── turn {data.get('turn')} {reason_text(reason)}", style))
            if spent is not None:
                self.console.print(safe(f"   {spent}", "dim"))

    def _render_result(self, event: Event, data: dict[str, Any]) -> None:
        self._newline()
        from ..log import rerun_result

        rerun = rerun_result(event, self._reruns)
        if rerun is not None:
            started = self._rerun_started.pop(rerun.call.seq, event.time)
            self.console.print(live_result_line(rerun, event.time - started))
            return
        call_id = str(result_call_id(data.get("message", {})))
        started, name = self._call_started.pop(
            call_id, (event.time, self._call_names.get(call_id, "tool"))
        )
        duration = event.time - started
        error = data.get("error") or {}
        is_error = bool(data.get("message", {}).get("content", [{}])[0].get("isError"))
        text = short_text(result_text(data))
        unrun = self._unrun.pop(call_id, None)
        if unrun is not None:
            outcome = ident(unrun, MAX_NAME_CHARS)
            label = code_label(error)
            self.console.print(styled((f"  ✗ {name} {outcome}, not run", "red"), "  ", label, text))
            return
        if not is_error:
            self.console.print(
                styled((f"  ✓ {name}", "green"), " ", (f"{duration} ms", "dim"), "  ", text)
            )
            return
        label = code_label(error)
        self.console.print(
            styled((f"  ✗ {name} {label}", "red"), (f"{duration} ms", "dim"), "  ", text)
        )
