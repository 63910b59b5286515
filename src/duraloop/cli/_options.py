"""The options several commands share, defined once: typer `Annotated` aliases and helpers.

A command declares a shared option by its alias (`store: StoreOption = None`), so its flag,
help text, environment variable and parser are the same in every command. The options of a
command that runs turns (`run`, `chat`, `resume`) are gathered in `TurnOptions`, which builds
the command's `SessionSetup` in one place.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from ._approval_options import ApprovalFlags
from ._runner import refuse_model_flags_without_prompt, system_prompt
from ._stores import StoreSpec, open_store, store_option

if TYPE_CHECKING:
    from ..llm import Model
    from ..loop import Budget, SessionSetup
    from ..store import SessionStore
    from ..tools import Approver


def json_option(help_text: str = "Print machine-readable JSON.") -> Any:
    """Return the `--json` flag of `show`, `check` and `ls` (one definition, its own help).

    Args:
        help_text: the flag's help, when a command says what its JSON holds.

    Returns:
        The typer option, for an `Annotated[bool, ...]` parameter.
    """
    return typer.Option("--json", help=help_text)


def max_steps_option(scope: str) -> Any:
    """Return the `--max-steps` option, its help naming the steps' `scope` (`the turn`).

    Returns:
        The typer option, for an `Annotated[int, ...]` parameter.
    """
    return typer.Option(
        "--max-steps", min=1, help=f"Most steps (model requests) in {scope} (at least 1)."
    )


StoreOption = Annotated[
    StoreSpec | None,
    typer.Option(
        "--store",
        envvar="DURALOOP_STORE",
        parser=store_option,
        metavar="STORE",
        help="Session store: jsonl:DIR (or DIR; an existing root keeps its encoding, a new one "
        "is raw), jsonl+zstd:DIR, sqlite:PATH or postgresql://HOST/DB[?schema=NAME] "
        "[default: $DURALOOP_HOME/sessions, ~/.duraloop/sessions].",
    ),
]
CwdOption = Annotated[
    Path | None,
    typer.Option(
        "--cwd",
        help="Workspace directory the tools are confined to [default: an existing session's "
        "recorded workspace, else the current directory].",
    ),
]
SessionCwdOption = Annotated[
    Path | None,
    typer.Option(
        "--cwd",
        help="Workspace directory the tools are confined to [default: the session's recorded "
        "workspace].",
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        envvar="DURALOOP_MODEL",
        help="Model spec: scripted:PATH, replay:PATH (a session log, ours or dsh's), "
        "openai:MODEL, deepseek:MODEL or anthropic:MODEL "
        "[default: default_model in $DURALOOP_HOME/config.toml].",
    ),
]
BaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        help=(
            "The provider's API root, over *_BASE_URL and the config file (openai:, deepseek:, "
            "anthropic: only)."
        ),
    ),
]
MaxTokensOption = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        min=1,
        help=(
            "Output token cap per model request, over the config file (openai:, deepseek:, "
            "anthropic: only)."
        ),
    ),
]
ReasoningEffortOption = Annotated[
    str | None,
    typer.Option(
        "--reasoning-effort",
        help=(
            "The provider's reasoning effort, e.g. deepseek: off|low|high|max, over the config "
            "file (openai:, deepseek:, anthropic: only)."
        ),
    ),
]
SystemOption = Annotated[
    str | None, typer.Option("--system", help="System prompt text, or @FILE to read it.")
]
MaxParallelOption = Annotated[
    int, typer.Option("--max-parallel", min=1, help="Most tool calls running at once (at least 1).")
]
MaxStepsOption = Annotated[int, max_steps_option("the turn")]
"""`--max-steps` of a command that runs one turn (`run`, `resume`)."""
EachTurnMaxStepsOption = Annotated[int, max_steps_option("each turn")]
"""`--max-steps` of `chat`, which runs many turns."""
JsonOption = Annotated[bool, json_option()]


def _budget_option(limit: str, scope: str, what: str, *, cost: bool = False) -> Any:
    """Return one `--max-LIMIT-per-SCOPE` option (docs/loop.md#budgets)."""
    stop = "the turn stops before its next step" + (
        ", and no later turn of the session starts" if scope == "session" else ""
    )
    spent = (
        f"the {scope}'s {what} reach this" if cost else f"the {scope} has spent this many {what}"
    )
    if cost:
        return typer.Option(
            f"--max-{limit}-per-{scope}",
            callback=_positive_cost,
            help=f"Budget: once {spent}, {stop} (a number > 0).",
        )
    return typer.Option(f"--max-{limit}-per-{scope}", min=1, help=f"Budget: once {spent}, {stop}.")


def _positive_cost(value: float | None) -> float | None:
    """Refuse a cost budget that is not a finite number > 0 (a usage error, exit 2)."""
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise typer.BadParameter(f"{value!r} is not a cost budget: give a finite number > 0")
    return value


MaxRequestsPerTurn = Annotated[int | None, _budget_option("requests", "turn", "model requests")]
MaxTokensPerTurn = Annotated[int | None, _budget_option("tokens", "turn", "tokens (in + out)")]
MaxToolCallsPerTurn = Annotated[int | None, _budget_option("tool-calls", "turn", "tool calls")]
MaxCostPerTurn = Annotated[
    float | None, _budget_option("cost", "turn", "costs ([prices] in config.toml)", cost=True)
]
MaxRequestsPerSession = Annotated[
    int | None, _budget_option("requests", "session", "model requests")
]
MaxTokensPerSession = Annotated[
    int | None, _budget_option("tokens", "session", "tokens (in + out)")
]
MaxToolCallsPerSession = Annotated[
    int | None, _budget_option("tool-calls", "session", "tool calls")
]
MaxCostPerSession = Annotated[
    float | None,
    _budget_option("cost", "session", "costs ([prices] in config.toml)", cost=True),
]


@dataclass(frozen=True, kw_only=True)
class BudgetFlags:
    """The `--max-*-per-turn` and `--max-*-per-session` values of a command (None: unset)."""

    requests_per_turn: int | None = None
    tokens_per_turn: int | None = None
    tool_calls_per_turn: int | None = None
    cost_per_turn: float | None = None
    requests_per_session: int | None = None
    tokens_per_session: int | None = None
    tool_calls_per_session: int | None = None
    cost_per_session: float | None = None

    def budgets(self) -> tuple[Budget | None, Budget | None]:
        """Return the turn and session `Budget`s (None where no flag of the scope is set).

        Raises:
            ConfigError: if a cost is not a number > 0.
        """
        from ..loop import Budget

        turn = Budget(
            requests=self.requests_per_turn,
            tokens=self.tokens_per_turn,
            tool_calls=self.tool_calls_per_turn,
            cost=self.cost_per_turn,
        )
        session = Budget(
            requests=self.requests_per_session,
            tokens=self.tokens_per_session,
            tool_calls=self.tool_calls_per_session,
            cost=self.cost_per_session,
        )
        return (turn if turn.limited else None, session if session.limited else None)


_BUDGET_FIELDS: Final = tuple(
    f"{limit}_per_{scope}"
    for scope in ("turn", "session")
    for limit in ("requests", "tokens", "tool_calls", "cost")
)
"""`BudgetFlags`' fields; each is the command parameter `max_<field>`."""
_OPTION_FIELDS: Final = (
    "model",
    "system",
    "max_parallel",
    "max_steps",
    "base_url",
    "max_tokens",
    "reasoning_effort",
)
"""`TurnOptions`' fields that are command parameters of the same name."""
_APPROVAL_FIELDS: Final = ("ask_before", "approval_policy", "auto_approve")
"""`ApprovalFlags`' fields; each is the command parameter of the same name."""


def model_given(model: str | None) -> bool:
    """Whether a model spec is given anywhere: `model` (`--model`, `DURALOOP_MODEL`), the config.

    Raises:
        ConfigError: if the config file is invalid (as building the model would).
    """
    from ._config import load_config
    from ._config_file import config_path

    return bool(model or load_config(config_path(os.environ)).default_model)


@dataclass(frozen=True, kw_only=True)
class TurnOptions:
    """The model and loop options of a command that runs turns, as given on its command line.

    Args:
        model: `--model`, a model spec; None for the config file's default.
        system: `--system`, the text or `@FILE`.
        max_parallel: `--max-parallel`.
        max_steps: `--max-steps`.
        base_url: `--base-url`.
        max_tokens: `--max-tokens`.
        reasoning_effort: `--reasoning-effort`.
        budget: the `--max-*-per-turn` and `--max-*-per-session` flags.
        approval: the `--ask-before`, `--approval-policy` and `--auto-approve` flags.
        mcp: `--mcp`, the comma-separated MCP server names (docs/cli.md#mcp-servers).
    """

    model: str | None
    system: str | None
    max_parallel: int
    max_steps: int
    base_url: str | None
    max_tokens: int | None
    reasoning_effort: str | None
    budget: BudgetFlags = BudgetFlags()
    approval: ApprovalFlags = ApprovalFlags()
    mcp: str | None = None

    @classmethod
    def of_command(cls, params: Mapping[str, Any]) -> TurnOptions:
        """Gather a turn command's options from its parameters (the command's `locals()`).

        Args:
            params: the command function's parameters by name (`model`, `max_steps`,
                `max_tokens_per_turn`, `ask_before`, ...), as typer parsed them.

        Returns:
            The options, with `budget` built from the `max_*_per_turn` and `max_*_per_session`
            parameters and `approval` from the approval ones.
        """
        budget = BudgetFlags(**{name: params[f"max_{name}"] for name in _BUDGET_FIELDS})
        approval = ApprovalFlags(**{name: params[name] for name in _APPROVAL_FIELDS})
        fields = {name: params[name] for name in _OPTION_FIELDS}
        return cls(**fields, budget=budget, approval=approval, mcp=params.get("mcp"))

    def session_setup(
        self,
        store: StoreSpec | SessionStore | None,
        *,
        cwd: Path | None,
        approver: Approver | None = None,
        session_id: str | None = None,
        model: Model | None = None,
    ) -> SessionSetup:
        """Build the model, then the loop options, then open the store (in that order).

        Args:
            store: the `--store` value (None: the default store), or a store already open.
            cwd: `--cwd`; None means the session's recorded workspace, or the current
                directory for a new session.
            approver: answers approval asks in this process (`chat`'s inline prompt); None
                pauses the turn on each ask.
            session_id: the existing session the setup opens, if any: without `--ask-before`
                its log sets which tools ask (`session_default_asking`).
            model: a model to use instead of building one (a placeholder that runs no turn).

        Returns:
            The setup, its `tools` a `ToolRegistry` of the built-in tools (those that ask
            with `requires_approval`); `--mcp` servers' tools are added to it once they run.

        Raises:
            UsageError: if no model is given anywhere, the `--system` file cannot be read or
                is not UTF-8, or the store cannot be opened (`open_store`).
            ConfigError: if the config file, the spec or a flag is invalid (`build_model`), or
                a cost budget has no price for the model.
            CorruptLogError: if a `replay:` log is damaged inside its committed region.
        """
        # a command that runs no turn never loads them
        from ..loop import CompactionConfig, LoopConfig, SessionSetup
        from ..tools import ToolRegistry, builtin_tools
        from ._approval_options import session_default_asking
        from ._config import build_model, load_config
        from ._config_file import config_path

        if model is None:
            model = build_model(
                self.model,
                env=os.environ,
                base_url=self.base_url,
                max_tokens=self.max_tokens,
                reasoning_effort=self.reasoning_effort,
            )
        turn_budget, session_budget = self.budget.budgets()
        user = load_config(config_path(os.environ))
        config = LoopConfig(
            max_parallel_tool_calls=self.max_parallel,
            max_steps=self.max_steps,
            system_prompt=system_prompt(self.system),
            turn_budget=turn_budget,
            session_budget=session_budget,
            prices=user.prices,
            approval_policy=self.approval.approval_policy,
            auto_approve=self.approval.auto_approved(),
            compaction=CompactionConfig() if user.compaction is None else user.compaction,
        )
        sessions = open_store(store) if store is None or isinstance(store, StoreSpec) else store
        default = (
            frozenset()
            if self.approval.ask_before is not None
            else session_default_asking(sessions, session_id)
        )
        tools = ToolRegistry(self.approval.tools(builtin_tools(), default))
        return SessionSetup(
            store=sessions, model=model, tools=tools, cwd=cwd, config=config, approver=approver
        )

    def model_given(self) -> bool:
        """Whether a model spec is given anywhere (`model_given` of `--model`)."""
        return model_given(self.model)

    def refuse_model_flags(self, **message: str) -> None:
        """Refuse the model options when no turn runs (`resume ID` without a prompt).

        Args:
            message: `when` and `instead` of `refuse_model_flags_without_prompt`, for a
                command other than `resume`.

        Raises:
            UsageError: naming the options that were given on the command line.
        """
        budget = {f"max_{name}": value for name, value in vars(self.budget).items()}
        refuse_model_flags_without_prompt(
            model=self.model,
            system=self.system,
            base_url=self.base_url,
            max_tokens=self.max_tokens,
            reasoning_effort=self.reasoning_effort,
            mcp=self.mcp,
            **budget,
            **message,
        )
