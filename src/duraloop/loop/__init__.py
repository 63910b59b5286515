"""The AgentLoop driver: turns, steps, inbox, hooks, cancellation, live step recovery."""

from .. import _lazy

if _lazy.TYPE_CHECKING:
    from ._agent import AgentLoop as AgentLoop
    from ._budget import Budget as Budget
    from ._compaction import Compactor as Compactor
    from ._compaction_config import CompactionConfig as CompactionConfig
    from ._compaction_run import CompactionResult as CompactionResult
    from ._config import LoopConfig as LoopConfig
    from ._durability import Durability as Durability
    from ._hooks import LoopHooks as LoopHooks
    from ._hooks import Reject as Reject
    from ._hooks import RequestConfig as RequestConfig
    from ._hooks import Steering as Steering
    from ._hooks import StepContext as StepContext
    from ._inbox import Inbox as Inbox
    from ._open import SessionSetup as SessionSetup
    from ._open import fork_session as fork_session
    from ._open import new_session_id as new_session_id
    from ._open import open_session as open_session
    from ._open import resume_session as resume_session
    from ._open import start_session as start_session
    from ._prompt import default_system_prompt as default_system_prompt
    from ._recovery import StepRecovery as StepRecovery
    from ._rerun import Rerun as Rerun
    from ._rerun import RerunDecision as RerunDecision
    from ._rerun_methods import RerunReport as RerunReport
    from ._result import TurnResult as TurnResult
    from ._summarizer import ModelSummarizer as ModelSummarizer
    from ._summarizer import Summarizer as Summarizer
    from ._summarizer import Summary as Summary
    from ._summarizer import SummaryRequest as SummaryRequest

__all__ = [
    "AgentLoop",
    "Budget",
    "CompactionConfig",
    "Compactor",
    "CompactionResult",
    "ModelSummarizer",
    "Summarizer",
    "Summary",
    "SummaryRequest",
    "Durability",
    "Inbox",
    "LoopConfig",
    "LoopHooks",
    "Reject",
    "RequestConfig",
    "SessionSetup",
    "Steering",
    "StepContext",
    "StepRecovery",
    "TurnResult",
    "Rerun",
    "RerunDecision",
    "RerunReport",
    "default_system_prompt",
    "fork_session",
    "new_session_id",
    "open_session",
    "resume_session",
    "start_session",
]

if not _lazy.TYPE_CHECKING:  # PEP 562: each name's module loads on first use
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "AgentLoop": "._agent",
            "Budget": "._budget",
            "CompactionConfig": "._compaction_config",
            "Compactor": "._compaction",
            "CompactionResult": "._compaction_run",
            "ModelSummarizer": "._summarizer",
            "Summarizer": "._summarizer",
            "Summary": "._summarizer",
            "SummaryRequest": "._summarizer",
            "LoopConfig": "._config",
            "Durability": "._durability",
            "LoopHooks": "._hooks",
            "Reject": "._hooks",
            "RequestConfig": "._hooks",
            "Steering": "._hooks",
            "StepContext": "._hooks",
            "Inbox": "._inbox",
            "SessionSetup": "._open",
            "fork_session": "._open",
            "new_session_id": "._open",
            "open_session": "._open",
            "resume_session": "._open",
            "start_session": "._open",
            "default_system_prompt": "._prompt",
            "StepRecovery": "._recovery",
            "TurnResult": "._result",
            "Rerun": "._rerun",
            "RerunDecision": "._rerun",
            "RerunReport": "._rerun_methods",
        },
    )
