"""duraloop: a durable agent loop.

The common names are re-exported here; each layer's full API is in its package:
`duraloop.log`, `duraloop.store`, `duraloop.llm`, `duraloop.tools`, `duraloop.loop`.
"""

from . import _lazy

if _lazy.TYPE_CHECKING:
    from .errors import DuraloopError as DuraloopError
    from .errors import LlmError as LlmError
    from .errors import ToolError as ToolError
    from .llm import Model as Model
    from .llm import OpenAIChatModel as OpenAIChatModel
    from .llm import RetryPolicy as RetryPolicy
    from .llm import ScriptedModel as ScriptedModel
    from .log import Event as Event
    from .log import Session as Session
    from .log import check_log as check_log
    from .log import check_pairing as check_pairing
    from .log import interrupted_turn_closers as interrupted_turn_closers
    from .loop import AgentLoop as AgentLoop
    from .loop import CompactionConfig as CompactionConfig
    from .loop import LoopConfig as LoopConfig
    from .loop import LoopHooks as LoopHooks
    from .loop import SessionSetup as SessionSetup
    from .loop import TurnResult as TurnResult
    from .loop import fork_session as fork_session
    from .loop import open_session as open_session
    from .loop import resume_session as resume_session
    from .loop import start_session as start_session
    from .store import JsonlStore as JsonlStore
    from .store import MemoryStore as MemoryStore
    from .store import SessionStore as SessionStore
    from .tools import AskApproval as AskApproval
    from .tools import Decision as Decision
    from .tools import Tool as Tool
    from .tools import ToolContext as ToolContext
    from .tools import ToolHooks as ToolHooks
    from .tools import builtin_tools as builtin_tools
    from .tools import tool as tool

__all__ = [
    "AskApproval",
    "Decision",
    "AgentLoop",
    "CompactionConfig",
    "DuraloopError",
    "Event",
    "JsonlStore",
    "LlmError",
    "LoopConfig",
    "LoopHooks",
    "MemoryStore",
    "Model",
    "OpenAIChatModel",
    "RetryPolicy",
    "ScriptedModel",
    "Session",
    "SessionSetup",
    "SessionStore",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolHooks",
    "TurnResult",
    "builtin_tools",
    "check_log",
    "check_pairing",
    "interrupted_turn_closers",
    "open_session",
    "fork_session",
    "resume_session",
    "start_session",
    "tool",
]

if not _lazy.TYPE_CHECKING:  # PEP 562: each name's module loads on first use
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "DuraloopError": ".errors",
            "LlmError": ".errors",
            "ToolError": ".errors",
            "Model": ".llm",
            "OpenAIChatModel": ".llm",
            "RetryPolicy": ".llm",
            "ScriptedModel": ".llm",
            "Event": ".log",
            "Session": ".log",
            "check_log": ".log",
            "check_pairing": ".log",
            "interrupted_turn_closers": ".log",
            "AgentLoop": ".loop",
            "CompactionConfig": ".loop",
            "LoopConfig": ".loop",
            "LoopHooks": ".loop",
            "SessionSetup": ".loop",
            "TurnResult": ".loop",
            "fork_session": ".loop",
            "open_session": ".loop",
            "resume_session": ".loop",
            "start_session": ".loop",
            "JsonlStore": ".store",
            "MemoryStore": ".store",
            "SessionStore": ".store",
            "Tool": ".tools",
            "AskApproval": ".tools",
            "Decision": ".tools",
            "ToolContext": ".tools",
            "ToolHooks": ".tools",
            "builtin_tools": ".tools",
            "tool": ".tools",
        },
        submodules=("errors", "llm", "log", "loop", "store", "tools"),
    )
