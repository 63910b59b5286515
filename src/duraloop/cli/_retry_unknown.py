"""`duraloop resume ID --retry-unknown`: re-run the idempotent outcome-unknown calls.

See docs/recovery.md#re-running-outcome-unknown-calls. The command prints one line per
`TOOL_OUTCOME_UNKNOWN` call: re-run (and how it ended) or skipped (and why). Without a PROMPT
the re-run step is the whole turn and no model is needed; with one the model sees the re-run
output and the prompt in the turn's next step, rendered live as `run` renders a turn.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rich.text import Text

from .. import loop as _loop
from ..errors import UsageError
from ..log import UnknownCall
from ..loop import AgentLoop, Rerun, RerunDecision, RerunReport, TurnResult
from ..store import RepairReport, SessionStore
from ._console import err, out
from ._mcp_run import mcp_configs, run_with_mcp
from ._options import TurnOptions
from ._otel import Tracing
from ._render import MAX_NAME_CHARS, ident, repair_text, safe, styled
from ._runner import require_prompt, run_live, run_turn_live

_MAX_REASON_CHARS = 300
"""A skip reason holds a tool name and a hook's text: bounded on its line."""


def resume_retrying(
    session_id: str,
    prompt: str | None,
    *,
    turn: TurnOptions,
    sessions: SessionStore,
    cwd: Path | None,
    tracing: Tracing | None = None,
) -> int:
    """Resume `session_id`, re-run its idempotent outcome-unknown calls, run `prompt` if given.

    Args:
        session_id: the session.
        prompt: the prompt of the step after the re-runs, or None (no model request).
        turn: the command's turn options (refused without a prompt, as `resume` refuses them).
        sessions: the store.
        cwd: the tools' workspace (default: the session's recorded one).
        tracing: the command's `--otel` tracing, attached to the resumed loop.

    Returns:
        The exit status: 0 when nothing was to be re-run or the turn completed; otherwise
        `run`'s (1 for a turn that did not complete, 3 for a pause).

    Raises:
        UsageError: if model or turn options are given without a prompt, or the session
            is paused on an approval.
    """
    from ._approval_flow import continue_with, finish_turn, refuse_prompt_while_paused
    from ._decision import NoModel

    servers = mcp_configs(turn.mcp)  # checked before anything is written
    if prompt is None:
        dataclasses.replace(turn, mcp=None).refuse_model_flags()  # --mcp brings tools, not a model
        from ..tools import ToolRegistry, builtin_tools

        setup = _loop.SessionSetup(
            store=sessions, model=NoModel(), tools=ToolRegistry(builtin_tools()), cwd=cwd
        )
        how = continue_with(turn, None)
    else:
        require_prompt(prompt)
        setup = turn.session_setup(sessions, cwd=cwd, session_id=session_id)
        how = continue_with(turn, setup)

    async def body() -> int:  # the session opens once the MCP servers run
        loop, repair = _loop.resume_session(session_id, setup)
        if tracing is not None:
            tracing.attach(loop)
        with loop:
            refuse_prompt_while_paused(loop, how)
            _print_repair(session_id, repair)
            decisions = loop.unknown_calls()
            for decision in decisions:
                if not decision.rerun:
                    out.print(_skipped_line(decision))
            if not any(decision.rerun for decision in decisions):
                out.print(safe(f"{ident(session_id)}: {_nothing_text(decisions)}"))
                if prompt is None:
                    return 0
                result = await run_turn_live(loop, prompt, console=out, errors=err)
            else:
                result, report = await _run_reruns(loop, prompt)
                for rerun in report.reruns:
                    out.print(_rerun_line(rerun))
            code = finish_turn(loop, result, how)
            out.print(styled("session: ", ident(session_id)))
        return code

    return run_with_mcp(servers, setup.tools, body)


def _print_repair(session_id: str, repair: RepairReport) -> None:
    err.print(safe(f"{ident(session_id)}: {repair_text(repair)}"))


async def _run_reruns(loop: AgentLoop, prompt: str | None) -> tuple[TurnResult, RerunReport]:
    reports: list[RerunReport] = []

    async def turn() -> TurnResult:
        report = await loop.retry_unknown_calls(prompt, continue_with_model=prompt is not None)
        reports.append(report)
        if report.turn is None:  # chosen a moment ago under this process's writer lock
            raise UsageError(f"session {ident(loop.session.id)} has no call left to re-run")
        return report.turn

    if prompt is None:  # no model request: nothing streams, so nothing to render live
        result = await turn()
    else:
        result = await run_live(loop, turn, console=out, errors=err)
    return result, reports[0]


def _nothing_text(decisions: list[RerunDecision]) -> str:
    if not decisions:
        return "no call has an unknown outcome: nothing to re-run"
    return f"none of the {len(decisions)} call(s) with an unknown outcome can be re-run"


def _call_label(call: UnknownCall) -> str:
    return f"{ident(call.name)} call {ident(call.call_id)}"


def _skip_reason(decision: RerunDecision) -> str:
    """The loop's reason, or for an unregistered tool what registers it in the CLI."""
    if decision.cause != "not-registered":
        return decision.reason
    parts = decision.call.name.split("__")
    if len(parts) > 2 and parts[0] == "mcp" and parts[1]:
        return f"its MCP server is not connected: pass --mcp {ident(parts[1], MAX_NAME_CHARS)}"
    name = ident(decision.call.name, MAX_NAME_CHARS)
    return (
        f'tool "{name}" is not registered in the CLI (only the built-in and --mcp tools are): '
        "re-run it from the program that defines it with AgentLoop.retry_unknown_calls()"
    )


def _skipped_line(decision: RerunDecision) -> Text:
    reason = safe(_skip_reason(decision), limit=_MAX_REASON_CHARS).plain
    return styled(
        ("skipped ", "yellow"),
        f"{_call_label(decision.call)} (seq {decision.call.call_seq}): {reason}",
    )


def _rerun_line(rerun: Rerun) -> Text:
    label = f"{_call_label(rerun.call)} (seq {rerun.call.call_seq})"
    if rerun.result_seq is None:
        reason = safe(rerun.reason, limit=_MAX_REASON_CHARS).plain
        return styled(("not re-run ", "yellow"), f"{label}: {reason}")
    how = "it failed again" if rerun.failed else "it succeeded"
    return styled(
        ("re-run ", "green"),
        f"{label} as seq {rerun.call_seq} with key {rerun.call.idempotency_key}: {how}",
    )
