"""The AgentLoop driver: turns, steps, cancellation, live step recovery."""

from ._agent import AgentLoop as AgentLoop
from ._agent import Durability as Durability
from ._agent import TurnResult as TurnResult
from ._config import LoopConfig as LoopConfig
from ._open import new_session_id as new_session_id
from ._open import open_session as open_session
from ._open import resume_session as resume_session
from ._open import start_session as start_session
from ._prompt import default_system_prompt as default_system_prompt
from ._recovery import StepRecovery as StepRecovery

__all__ = [
    "AgentLoop",
    "Durability",
    "LoopConfig",
    "StepRecovery",
    "TurnResult",
    "default_system_prompt",
    "new_session_id",
    "open_session",
    "resume_session",
    "start_session",
]
