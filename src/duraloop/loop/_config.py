"""Loop configuration: frozen, validated at construction (STYLE D23)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ConfigError
from ..llm import RetryPolicy


@dataclass(frozen=True)
class LoopConfig:
    """Options of an `AgentLoop`.

    Args:
        max_parallel_tool_calls: the cap on tool bodies running at once (loop-spec 9);
            1 runs tools serially. Default 10.
        max_steps: the cap on steps per turn, enforced before a step starts; reaching it
            ends the turn `blocked`. Default 100.
        system_prompt: the system prompt; None uses the built-in one naming the workspace
            and the tools.
        max_tokens: the output token cap sent with each model request; None leaves the
            provider default.
        retry: how a failed model request is retried within its step (loop-spec 5.1);
            None never retries. Default `RetryPolicy()`: up to 5 retries of a transient
            failure with exponential backoff.
        stream_idle_timeout_seconds: how long the model stream may go without a chunk
            before the attempt fails with `TIMEOUT` (which the default policy retries);
            only the wait for the next chunk counts. None waits forever. Default 300.

    Raises:
        ConfigError: if a count is not a positive integer, `retry` is not a `RetryPolicy`,
            or the idle timeout is not a positive number.
    """

    max_parallel_tool_calls: int = 10
    max_steps: int = 100
    system_prompt: str | None = None
    max_tokens: int | None = None
    retry: RetryPolicy | None = RetryPolicy()
    stream_idle_timeout_seconds: float | None = 300.0

    def __post_init__(self) -> None:
        """Validate the counts (loop-spec B61)."""
        for name in ("max_parallel_tool_calls", "max_steps"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ConfigError(f"loop.{name} must be an integer >= 1, got {value!r}")
        if self.max_tokens is not None and (type(self.max_tokens) is not int or self.max_tokens < 1):
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
