"""Loop configuration: frozen, validated at construction (STYLE D23)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError


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

    Raises:
        ConfigError: if a count is not a positive integer.
    """

    max_parallel_tool_calls: int = 10
    max_steps: int = 100
    system_prompt: str | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        """Validate the counts (loop-spec B61)."""
        for name in ("max_parallel_tool_calls", "max_steps"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ConfigError(f"loop.{name} must be an integer >= 1, got {value!r}")
        if self.max_tokens is not None and (type(self.max_tokens) is not int or self.max_tokens < 1):
            raise ConfigError(f"loop.max_tokens must be an integer >= 1, got {self.max_tokens!r}")
