"""`duraloop submit` and `duraloop worker`: turns run on many machines (docs/workers.md).

`submit ID PROMPT --store postgresql://...` queues a turn durably and prints its submission
id; `worker --store postgresql://... --concurrency N` runs queued turns until SIGTERM or
Ctrl-C (then drains), with the model and loop options of `run`, printing one progress line
(drives running here, submissions queued in the store, finished and taken over here)
whenever the counts change. A second SIGINT or SIGTERM exits at once (status 130): the
running turns are then taken over by another worker, as after a crash.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from ..errors import UsageError
from ._approval_options import ApprovalPolicyOption, AskBeforeOption, AutoApproveOption
from ._console import app, err, out
from ._options import (
    BaseUrlOption,
    CwdOption,
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
    StoreOption,
    SystemOption,
    TurnOptions,
)
from ._otel import OtelOption, otel_export
from ._render import safe
from ._runner import system_prompt

if TYPE_CHECKING:
    from ..loop import SessionSetup
    from ..store import PostgresStore
    from ._stores import StoreSpec


def _postgres(store: StoreSpec | None, command: str) -> tuple[str, str]:
    """The libpq URL and schema of `--store`, which must be PostgreSQL."""
    if store is None or store.kind != "postgresql":
        raise UsageError(
            f"{command} needs a PostgreSQL store shared by the workers: pass --store "
            "postgresql://HOST/DB (or set DURALOOP_STORE)"
        )
    from ._postgres_url import split_schema

    return split_schema(store.url)


@app.command(
    help="Queue a turn of a session for the workers (`duraloop worker`): the prompt is "
    "stored durably before this returns; prints the submission id. The session is created "
    "by its first turn if it does not exist."
)
def submit(
    session_id: Annotated[str, typer.Argument(help="The session the turn belongs to.")],
    prompt: Annotated[str, typer.Argument(help="The user's prompt for the turn.")],
    store: StoreOption = None,
) -> None:
    """Queue one turn (see the `help=` above)."""
    from ..worker import submit as submit_turn

    url, schema = _postgres(store, "submit")
    out.print(safe(submit_turn(url, session_id, prompt, schema=schema)))


@app.command(
    help="Run queued turns (from `duraloop submit`) until SIGTERM or Ctrl-C, at most one "
    "per session at a time across every worker, taking over the sessions of a worker that "
    "died; then drain. Needs a PostgreSQL --store."
)
def worker(
    store: StoreOption = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Sessions this worker drives at once.")
    ] = 4,
    takeover_seconds: Annotated[
        float,
        typer.Option(
            "--takeover-seconds",
            min=1.0,
            help="A worker silent this long is dead to the others, which take its sessions "
            "over (also the lease period).",
        ),
    ] = 30.0,
    drain_seconds: Annotated[
        float,
        typer.Option("--drain-seconds", min=0.0, help="On stop, how long running turns get."),
    ] = 30.0,
    on_takeover: Annotated[
        str,
        typer.Option(
            "--on-takeover",
            help="After a takeover: `continue` tells the model the turn was interrupted by a "
            "worker failure and continues; `stop` only closes the turn.",
        ),
    ] = "continue",
    model: ModelOption = None,
    cwd: CwdOption = None,
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
) -> None:
    """Run a worker (see the `help=` above)."""
    from ..worker import WorkerConfig, run_worker

    if on_takeover not in ("continue", "stop"):
        raise UsageError(f"--on-takeover must be continue or stop, got {on_takeover!r}")
    policy: Literal["continue", "stop"] = "continue" if on_takeover == "continue" else "stop"
    url, schema = _postgres(store, "worker")
    turn = TurnOptions.of_command(locals())
    if cwd is not None and not cwd.is_dir():  # checked now: each drive would fail on it
        raise UsageError(f"workspace {cwd} is not a directory; create it or pass another --cwd")
    system_prompt(turn.system)  # reads a `--system @FILE` now, for the same reason

    from ._config import build_model

    # Built now, so a bad spec fails at start. An offline model (scripted:, replay:) is one
    # for the whole worker, its script going on from drive to drive; a provider's is built
    # per drive, its HTTP client living on that drive's event loop.
    first = build_model(
        turn.model,
        env=os.environ,
        base_url=turn.base_url,
        max_tokens=turn.max_tokens,
        reasoning_effort=turn.reasoning_effort,
    )
    shared = first if first.provider in ("scripted", "replay") else None

    def setup(opened: PostgresStore, session_id: str) -> SessionSetup:
        known = session_id if opened.backend.exists(session_id) else None
        return turn.session_setup(opened, cwd=cwd, session_id=known, model=shared)

    shown: list[tuple[int, int, int, int]] = []

    def progress(state: object) -> None:
        counts = tuple(
            int(getattr(state, name)) for name in ("running", "queued", "finished", "taken_over")
        )
        if shown and shown[-1] == counts:
            return
        shown[:] = [counts]  # type: ignore[list-item]
        running, queued, finished, taken = counts
        err.print(
            safe(
                f"{time.strftime('%H:%M:%S')} running {running}, unfinished in the store "
                f"{queued}, finished {finished}, taken over {taken}"
            )
        )

    with otel_export(otel) as tracing:  # flushed when the worker stops
        err.print(safe(f"worker on {store} (schema {schema!r}), concurrency {concurrency}"))
        run_worker(
            WorkerConfig(
                url=url,
                setup=setup,
                schema=schema,
                concurrency=concurrency,
                takeover_seconds=takeover_seconds,
                drain_seconds=drain_seconds,
                on_takeover=policy,
                progress=progress,
                observe=tracing.observer(),
            )
        )
    err.print("worker stopped")
