"""The approval commands: `pending` lists paused sessions, `approve` and `deny` decide one.

The work is in `_approval_flow` (loaded when a command runs: `--help` loads no log); these
are the command lines. `approve` and `deny` take the
options of `resume` (the model, the loop, the budgets, the approval flags), used only with
`--continue`, when the turn runs on.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ._approval_options import ApprovalPolicyOption, AskBeforeOption, AutoApproveOption
from ._console import app
from ._mcp_run import McpOption
from ._options import (
    BaseUrlOption,
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
    json_option,
)
from ._stores import open_store

SessionArgument = Annotated[str, typer.Argument(help="The paused session.")]
CallIdArgument = Annotated[
    str | None,
    typer.Argument(help="The waiting call's id [default: the call the session waits on]."),
]
ContinueOption = Annotated[
    bool,
    typer.Option(
        "--continue",
        help="Then run the turn on, live, with the model options (as resume does); exit as "
        "run does: 0 completed, 3 paused again, 1 otherwise [default: only record it].",
    ),
]


@app.command()
def pending(
    as_json: Annotated[
        bool,
        json_option(
            "Print one JSON array of the asks, every field whole (session, turn, step, askId, "
            "callId, toolName, arguments, reason, outcome, feedback)."
        ),
    ] = False,
    store: StoreOption = None,
) -> None:
    """List every paused session: the call it waits on and the commands that decide it.

    Read-only (no writer lock): it works while the sessions' writers run.
    """
    from ._pending_list import list_paused, print_paused  # the log loads when a command runs

    print_paused(store, list_paused(open_store(store)), as_json=as_json)


@app.command(
    help="Approve the call a paused session waits on, from any process (recorded durably); "
    "it runs once when the turn goes on (--continue, or `duraloop resume ID` later). "
    "Exit 2 if the call is not waiting or another process writes the session."
)
def approve(
    session_id: SessionArgument,
    call_id: CallIdArgument = None,
    keep_going: ContinueOption = False,
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
    mcp: McpOption = None,
) -> None:
    """Approve the waiting call of a paused session (see the `help=` above)."""
    from ._approval_flow import decide

    turn = TurnOptions.of_command(locals())
    code = decide(
        session_id,
        call_id,
        allow=True,
        feedback=None,
        keep_going=keep_going,
        turn=turn,
        store=store,
        cwd=cwd,
    )
    raise typer.Exit(code)


@app.command(
    help="Reject the call a paused session waits on, from any process (recorded durably); "
    "the model gets an error result carrying --reason when the turn goes on (--continue, "
    "or `duraloop resume ID` later). Exit 2 if the call is not waiting or another process "
    "writes the session."
)
def deny(
    session_id: SessionArgument,
    call_id: CallIdArgument = None,
    reason: Annotated[
        str | None,
        typer.Option(
            "--reason",
            metavar="TEXT",
            help="Why, for the model: its error result for the call carries this text "
            "[default: none, the call is only said to be rejected].",
        ),
    ] = None,
    keep_going: ContinueOption = False,
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
    mcp: McpOption = None,
) -> None:
    """Reject the waiting call of a paused session (see the `help=` above)."""
    from ._approval_flow import decide, feedback_of

    turn = TurnOptions.of_command(locals())
    code = decide(
        session_id,
        call_id,
        allow=False,
        feedback=feedback_of(reason),
        keep_going=keep_going,
        turn=turn,
        store=store,
        cwd=cwd,
    )
    raise typer.Exit(code)
