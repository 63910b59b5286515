"""`duraloop compact ID`: compact a stored session's history now (docs/compaction.md#manual).

The session is opened as `resume` opens it (crash repair first), compacted between turns
with the model the options name (the summary is one request to it), and closed. Prints
`Compacted N history items (~T tokens).` or `No compactable history yet.`; a compaction that
cannot run (a paused turn, another writer) exits 1 with one line saying why.
"""

from __future__ import annotations

from typing import Annotated

import anyio
import typer

from ._approval_options import ApprovalPolicyOption, AskBeforeOption, AutoApproveOption
from ._console import app, err, out
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
)
from ._render import ident, repair_text, safe
from ._stores import open_store


def compaction_text(result: object | None) -> str:
    """Return what a manual compaction did, as dsh's `/compact` says it (compaction-spec 4.4).

    Args:
        result: a `loop.CompactionResult`, or None when nothing was compactable.
    """
    if result is None:
        return "No compactable history yet."
    shadowed = getattr(result, "shadowed", 0)
    tokens = getattr(result, "shadowed_tokens", 0)
    return f"Compacted {shadowed} history items (~{tokens} tokens)."


@app.command(
    help="Compact a session's history now: everything but the newest message (or tool call "
    "with its results) is summarized by the model into one checkpoint, recorded in the log "
    "(nothing is deleted). Needs the session idle (no paused turn). Exit 1 if it cannot run."
)
def compact(
    session_id: Annotated[str, typer.Argument(help="The session to compact.")],
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
) -> None:
    """Compact the session's history now (see the `help=` above)."""
    from .. import loop as _loop
    from ._runner import close_model

    turn = TurnOptions.of_command(locals())
    setup = turn.session_setup(open_store(store), cwd=cwd, session_id=session_id)
    loop, repair = _loop.resume_session(session_id, setup)

    async def run() -> object | None:
        try:
            return await loop.compact()
        finally:
            await close_model(setup.model)

    with loop:
        err.print(safe(f"{ident(session_id)}: {repair_text(repair)}"))
        result = anyio.run(run)
    out.print(safe(compaction_text(result)))
