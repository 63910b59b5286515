"""The commands that run turns: run, chat, resume (registered first: the help lists them first)."""

from __future__ import annotations

from typing import Annotated

import typer

from .. import loop as _loop
from ..errors import UsageError
from ._approval_options import ApprovalPolicyOption, AskBeforeOption, AutoApproveOption
from ._console import app, err, out
from ._mcp_run import McpOption, mcp_configs, run_with_mcp
from ._options import (
    BaseUrlOption,
    CwdOption,
    EachTurnMaxStepsOption,
    MaxCostPerSession,
    MaxCostPerTurn,
    MaxParallelOption,
    MaxRequestsPerSession,
    MaxRequestsPerTurn,
    MaxStepsOption,
    MaxTokensOption,
    MaxTokensPerSession,
    MaxTokensPerTurn,
    MaxToolCallsPerSession,
    MaxToolCallsPerTurn,
    ModelOption,
    ReasoningEffortOption,
    SessionCwdOption,
    StoreOption,
    SystemOption,
    TurnOptions,
)
from ._otel import OtelOption, otel_export
from ._render import ident, repair_text, safe, styled
from ._runner import require_prompt, run_turn_live
from ._stores import open_store


@app.command()
def run(
    prompt: Annotated[str, typer.Argument(help="The user's prompt for this turn.")],
    model: ModelOption = None,
    store: StoreOption = None,
    cwd: CwdOption = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help="Run in this session: continued if it exists, created with this id if not.",
        ),
    ] = None,
    max_parallel: MaxParallelOption = 10,
    max_steps: MaxStepsOption = 100,
    system: SystemOption = None,
    base_url: BaseUrlOption = None,
    max_tokens: MaxTokensOption = None,
    reasoning_effort: ReasoningEffortOption = None,
    max_requests_per_turn: MaxRequestsPerTurn = None,
    max_tokens_per_turn: MaxTokensPerTurn = None,
    max_tool_calls_per_turn: MaxToolCallsPerTurn = None,
    max_cost_per_turn: MaxCostPerTurn = None,
    max_requests_per_session: MaxRequestsPerSession = None,
    max_tokens_per_session: MaxTokensPerSession = None,
    max_tool_calls_per_session: MaxToolCallsPerSession = None,
    max_cost_per_session: MaxCostPerSession = None,
    ask_before: AskBeforeOption = None,
    approval_policy: ApprovalPolicyOption = None,
    auto_approve: AutoApproveOption = None,
    otel: OtelOption = False,
    mcp: McpOption = None,
) -> None:
    """Run one turn and print the session id; exit 0 when the turn completes.

    Exit 3 when the turn paused: a tool call waits for a person's approval (the call and
    the commands that decide it are printed), 1 when it ended otherwise, 2 for a usage error.
    """
    from ._approval_flow import continue_with, finish_turn, refuse_prompt_while_paused

    require_prompt(prompt)
    turn = TurnOptions.of_command(locals())
    servers = mcp_configs(turn.mcp)
    setup = turn.session_setup(store, cwd=cwd, session_id=session)
    how = continue_with(turn, setup)

    async def body() -> int:  # the session opens once the MCP servers run
        if session is None:
            loop = _loop.start_session(setup)
        else:
            # An existing session keeps its recorded workspace unless --cwd says otherwise.
            loop, repair = _loop.open_session(session, setup)
            if repair is not None and repair.closers:
                err.print(
                    safe(f"repaired {ident(loop.session.id)}: {repair_text(repair)}", "yellow")
                )
        tracing.attach(loop)
        with loop:
            refuse_prompt_while_paused(loop, how)
            try:
                result = await run_turn_live(loop, prompt, console=out, errors=err)
                return finish_turn(loop, result, how)
            finally:
                out.print(styled("session: ", ident(loop.session.id)))

    with otel_export(otel) as tracing:
        code = run_with_mcp(servers, setup.tools, body)
    raise typer.Exit(code)


@app.command(
    help="Chat interactively: a line starts a turn, typing during a turn steers it, Ctrl-C "
    "cancels it; a call that asks for approval is asked about inline (y, n, or feedback text). "
    "Exit 3 if the chat ends with the session paused."
)
def chat(
    model: ModelOption = None,
    store: StoreOption = None,
    cwd: CwdOption = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help=(
                "Chat in this session: resumed (with repair) if it exists, created with this id "
                "if not."
            ),
        ),
    ] = None,
    max_parallel: MaxParallelOption = 10,
    max_steps: EachTurnMaxStepsOption = 100,
    system: SystemOption = None,
    base_url: BaseUrlOption = None,
    max_tokens: MaxTokensOption = None,
    reasoning_effort: ReasoningEffortOption = None,
    max_requests_per_turn: MaxRequestsPerTurn = None,
    max_tokens_per_turn: MaxTokensPerTurn = None,
    max_tool_calls_per_turn: MaxToolCallsPerTurn = None,
    max_cost_per_turn: MaxCostPerTurn = None,
    max_requests_per_session: MaxRequestsPerSession = None,
    max_tokens_per_session: MaxTokensPerSession = None,
    max_tool_calls_per_session: MaxToolCallsPerSession = None,
    max_cost_per_session: MaxCostPerSession = None,
    ask_before: AskBeforeOption = None,
    approval_policy: ApprovalPolicyOption = None,
    auto_approve: AutoApproveOption = None,
    otel: OtelOption = False,
    mcp: McpOption = None,
) -> None:
    """Chat interactively: a line starts a turn, typing during a turn steers it.

    Ctrl-C cancels it. A call that asks for approval is asked about inline (y, n, or
    feedback text). (The `help=` above keeps the command's help one paragraph.)
    """
    from ._approval_flow import continue_with
    from ._chat import run_chat
    from ._chat_approvals import InlineApprover

    turn = TurnOptions.of_command(locals())
    servers = mcp_configs(turn.mcp)
    approver = InlineApprover(out)
    setup = turn.session_setup(store, cwd=cwd, approver=approver, session_id=session)
    how = continue_with(turn, setup)

    async def body() -> int:  # the session opens once the MCP servers run
        repair = None
        if session is None:
            loop = _loop.start_session(setup)
        else:
            loop, repair = _loop.open_session(session, setup)
        tracing.attach(loop)
        with loop:
            out.print(styled("session: ", ident(loop.session.id)))
            if repair is not None:
                err.print(safe(f"resumed {ident(loop.session.id)}: {repair_text(repair)}"))
            return await run_chat(
                loop,
                setup.store,
                console=out,
                errors=err,
                resumed=repair is not None,
                approver=approver,
                asks=turn.approval.asks_a_person(how.ask_before or frozenset()),
                how=how,
            )

    with otel_export(otel) as tracing:
        code = run_with_mcp(servers, setup.tools, body)
    raise typer.Exit(code)


@app.command()
def resume(
    session_id: Annotated[str, typer.Argument(help="The session to resume.")],
    prompt: Annotated[
        str | None, typer.Argument(help="A prompt for a new turn (optional).")
    ] = None,
    model: ModelOption = None,
    store: StoreOption = None,
    cwd: SessionCwdOption = None,
    max_parallel: MaxParallelOption = 10,
    max_steps: MaxStepsOption = 100,
    system: SystemOption = None,
    base_url: BaseUrlOption = None,
    max_tokens: MaxTokensOption = None,
    reasoning_effort: ReasoningEffortOption = None,
    max_requests_per_turn: MaxRequestsPerTurn = None,
    max_tokens_per_turn: MaxTokensPerTurn = None,
    max_tool_calls_per_turn: MaxToolCallsPerTurn = None,
    max_cost_per_turn: MaxCostPerTurn = None,
    max_requests_per_session: MaxRequestsPerSession = None,
    max_tokens_per_session: MaxTokensPerSession = None,
    max_tool_calls_per_session: MaxToolCallsPerSession = None,
    max_cost_per_session: MaxCostPerSession = None,
    ask_before: AskBeforeOption = None,
    approval_policy: ApprovalPolicyOption = None,
    auto_approve: AutoApproveOption = None,
    otel: OtelOption = False,
    retry_unknown: Annotated[
        bool,
        typer.Option(
            "--retry-unknown",
            help="Re-run the calls whose outcome is unknown (TOOL_OUTCOME_UNKNOWN) if their "
            "tool is idempotent (read_file, list_dir, grep), with the same idempotency key, as "
            "the first step of a new turn; prints each call re-run or skipped.",
        ),
    ] = False,
    mcp: McpOption = None,
) -> None:
    """Load a session with crash repair, say what repair did, optionally run a turn.

    A paused session (a tool call waits for approval) is not repaired: while a person
    must answer its call, the call and the commands that decide it are printed and resume
    exits 3; once decided (or answered by --approval-policy never or --auto-approve),
    resume runs the turn on (without a PROMPT) and exits as run does.
    """
    from ..log import pending_approval
    from ._approval_flow import (
        continue_with,
        finish_turn,
        refuse_prompt_while_paused,
        resume_paused,
    )

    turn = TurnOptions.of_command(locals())
    with otel_export(otel) as tracing:
        sessions = open_store(store)
        if retry_unknown:
            from ._retry_unknown import resume_retrying

            code = resume_retrying(
                session_id, prompt, turn=turn, sessions=sessions, cwd=cwd, tracing=tracing
            )
            raise typer.Exit(code)
        if prompt is None:
            try:
                turn.refuse_model_flags()
            except UsageError:  # refused before anything is written, unless a decided turn goes on
                if pending_approval(sessions.read(session_id)[1]) is None:
                    raise
            loaded = sessions.prepare(session_id)[0]  # repair only: the prefix stays on disk
            paused = pending_approval(loaded.events)
            if paused is not None:
                code = resume_paused(
                    session_id, turn=turn, sessions=sessions, cwd=cwd, tracing=tracing
                )
                raise typer.Exit(code)
            out.print(safe(f"{ident(session_id)}: {repair_text(loaded.repair)}"))
            return
        require_prompt(prompt)
        servers = mcp_configs(turn.mcp)
        setup = turn.session_setup(sessions, cwd=cwd, session_id=session_id)
        how = continue_with(turn, setup)

        async def body() -> int:  # the session opens once the MCP servers run
            loop, repair = _loop.resume_session(session_id, setup)
            tracing.attach(loop)
            with loop:
                refuse_prompt_while_paused(loop, how)
                err.print(safe(f"{ident(session_id)}: {repair_text(repair)}"))
                result = await run_turn_live(loop, prompt, console=out, errors=err)
                code = finish_turn(loop, result, how)
                out.print(styled("session: ", ident(session_id)))
            return code

        code = run_with_mcp(servers, setup.tools, body)
    raise typer.Exit(code)
