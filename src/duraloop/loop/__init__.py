"""The AgentLoop driver: turns, steps, cancellation, live step recovery."""

from ._agent import AgentLoop as AgentLoop
from ._agent import Durability as Durability
from ._agent import TurnResult as TurnResult
from ._config import LoopConfig as LoopConfig
from ._prompt import default_system_prompt as default_system_prompt
from ._recovery import StepRecovery as StepRecovery

__all__ = [
    "AgentLoop",
    "Durability",
    "LoopConfig",
    "StepRecovery",
    "TurnResult",
    "default_system_prompt",
]
