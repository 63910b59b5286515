"""Loop configuration: frozen, validated at construction (style rule D23)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import ConfigError
from ..llm import RetryPolicy
from ..log import Price
from ..log.vocabulary import APPROVAL_POLICIES
from ..tools import DEFAULT_CANCEL_GRACE_SECONDS, DEFAULT_MAX_OUTPUT_BYTES, MIN_MAX_OUTPUT_BYTES
from ._budget import Budget
from ._compaction_config import CompactionConfig

DEFAULT_SNAPSHOT_EVERY = 1000
"""Events appended since the last snapshot after which a closed turn writes one."""


@dataclass(frozen=True)
class LoopConfig:
    """Options of an `AgentLoop`.

    Args:
        max_parallel_tool_calls: the cap on tool bodies running at once
            (docs/loop.md#configuration); 1 runs tools serially. Default 10.
        max_steps: the cap on steps per turn, enforced before a step starts; reaching it
            ends the turn `blocked`. Default 100.
        system_prompt: the system prompt; None uses the built-in one naming the workspace
            and the tools.
        max_tokens: the output token cap sent with each model request; None leaves the
            provider default.
        retry: how a failed model request is retried within its step (docs/loop.md#request-retries);
            None never retries. Default `RetryPolicy()`: up to 5 retries of a transient
            failure with exponential backoff.
        stream_idle_timeout_seconds: how long the model stream may go without a chunk
            before the attempt fails with `TIMEOUT` (which the default policy retries);
            only the wait for the next chunk counts. None waits forever. Default 300.
        max_tool_output_bytes: the cap on one tool result's content, in bytes, for every
            tool that sets no `max_output_bytes` of its own (built-ins included). Longer
            output is cut and ends with `[truncated: <n> more bytes of output]`, in the log
            and so in every request. Default 262144 (256 KB); at least 256.
        tool_cancel_grace_seconds: how long a tool body that cannot be interrupted (a sync
            function in its thread, or a body that watches the signal) gets to settle after
            the turn is cancelled. A sync body still running then is answered
            `TOOL_OUTCOME_UNKNOWN` (saying it could not be interrupted) and left running
            in its daemon thread, so the turn closes and the process can exit. Default 5.
        snapshot_every: write a snapshot of the derived state after a turn once this many
            events were appended since the last one, and on `close()` between turns with
            anything new (docs/store.md#snapshots); a resume then reads the snapshot and
            only the events after it. None writes none. Default 1000.
        turn_budget: limits on each turn's model requests, tokens, tool calls and cost,
            checked before each step (docs/loop.md#budgets); reaching one ends the turn
            `blocked`. None: no limit.
        session_budget: the same limits on the whole session, counted from its log (so
            across resumes); reaching one ends the turn `blocked`, and no later turn starts
            (`BudgetExceededError`). None: no limit.
        prices: `provider:model` (e.g. `deepseek:deepseek-chat`) -> `log.Price`, for the
            cost in usage figures and cost budgets; a cost budget needs the loop model's.
        approval_policy: `"ask"` (a person answers each ask) or `"never"` (every ask is
            rejected: unattended runs); recorded as an `approval/policy` event at the next
            turn when it differs from the session's (docs/approvals.md#policy). None keeps
            the session's (the last `approval/policy` event, else `"ask"`).
        auto_approve: names of tools whose asks are approved without a person (each
            recorded as decided `allowed-once`, like any other answer).
        compaction: how the session is compacted when it outgrows the model's context
            window (`CompactionConfig`: thresholds, retention, the summary request, the
            pruner, context windows per model). None disables compaction entirely
            (automatic and manual). Default `CompactionConfig()`.

    Raises:
        ConfigError: if a count is not a positive integer, `retry` is not a `RetryPolicy`,
            a budget is not a `Budget`, `prices` does not map strings to `Price`s,
            the idle timeout or the grace period is not a positive number, or the output cap
            is not an integer >= 256, the approval policy is neither "ask" nor "never", or
            `compaction` is not a `CompactionConfig`.
    """

    max_parallel_tool_calls: int = 10
    max_steps: int = 100
    system_prompt: str | None = None
    max_tokens: int | None = None
    retry: RetryPolicy | None = RetryPolicy()
    stream_idle_timeout_seconds: float | None = 300.0
    max_tool_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    tool_cancel_grace_seconds: float = DEFAULT_CANCEL_GRACE_SECONDS
    snapshot_every: int | None = DEFAULT_SNAPSHOT_EVERY
    turn_budget: Budget | None = None
    session_budget: Budget | None = None
    prices: Mapping[str, Price] = field(default_factory=dict)
    approval_policy: str | None = None
    auto_approve: frozenset[str] = frozenset()
    compaction: CompactionConfig | None = CompactionConfig()

    def __post_init__(self) -> None:
        """Validate the counts (docs/cases.md#resume-fork-and-config B61)."""
        if self.approval_policy is not None and self.approval_policy not in APPROVAL_POLICIES:
            raise ConfigError(
                f'loop.approval_policy must be "ask", "never" or None, got {self.approval_policy!r}'
            )
        names = self.auto_approve
        if isinstance(names, str) or not all(isinstance(name, str) for name in names):
            raise ConfigError("loop.auto_approve must be a set of tool names (strings)")
        object.__setattr__(self, "auto_approve", frozenset(names))
        if self.compaction is not None and not isinstance(self.compaction, CompactionConfig):
            raise ConfigError(
                "loop.compaction must be a CompactionConfig or None, got "
                f"{type(self.compaction).__name__}"
            )
        for name in ("turn_budget", "session_budget"):
            budget = getattr(self, name)
            if budget is not None and not isinstance(budget, Budget):
                raise ConfigError(
                    f"loop.{name} must be a Budget or None, got {type(budget).__name__}"
                )
        for key, price in self.prices.items():
            if not isinstance(key, str) or not isinstance(price, Price):
                raise ConfigError(
                    "loop.prices maps `provider:model` strings to Price objects, got "
                    f"{key!r}: {type(price).__name__}"
                )
        every = self.snapshot_every
        if every is not None and (type(every) is not int or every < 1):
            raise ConfigError(f"loop.snapshot_every must be an integer >= 1 or None, got {every!r}")
        for name in ("max_parallel_tool_calls", "max_steps"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ConfigError(f"loop.{name} must be an integer >= 1, got {value!r}")
        if self.max_tokens is not None and (
            type(self.max_tokens) is not int or self.max_tokens < 1
        ):
            raise ConfigError(f"loop.max_tokens must be an integer >= 1, got {self.max_tokens!r}")
        if self.retry is not None and not isinstance(self.retry, RetryPolicy):
            raise ConfigError(
                f"loop.retry must be a RetryPolicy or None, got {type(self.retry).__name__}"
            )
        idle = self.stream_idle_timeout_seconds
        if idle is not None and (
            type(idle) not in (int, float) or not math.isfinite(idle) or idle <= 0
        ):
            raise ConfigError(
                f"loop.stream_idle_timeout_seconds must be a number > 0 or None, got {idle!r}"
            )
        cap = self.max_tool_output_bytes
        if type(cap) is not int or cap < MIN_MAX_OUTPUT_BYTES:
            raise ConfigError(
                f"loop.max_tool_output_bytes must be an integer >= {MIN_MAX_OUTPUT_BYTES}, "
                f"got {cap!r}"
            )
        grace = self.tool_cancel_grace_seconds
        if type(grace) not in (int, float) or not math.isfinite(grace) or grace <= 0:
            raise ConfigError(f"loop.tool_cancel_grace_seconds must be a number > 0, got {grace!r}")
