"""Tools: definition and registry, the execution pipeline, the scheduler, built-in tools."""

from .. import _lazy

if _lazy.TYPE_CHECKING:
    from ._approval import ApprovalGate as ApprovalGate
    from ._approval import ApprovalRequest as ApprovalRequest
    from ._approval import Approver as Approver
    from ._approval import Decision as Decision
    from ._approval import cancel_waiting as cancel_waiting
    from ._bash_tool import kill_running_commands as kill_running_commands
    from ._blocking import DEFAULT_CANCEL_GRACE_SECONDS as DEFAULT_CANCEL_GRACE_SECONDS
    from ._builtins import builtin_tools as builtin_tools
    from ._context import ToolContext as ToolContext
    from ._definition import Tool as Tool
    from ._definition import tool as tool
    from ._hooks import AskApproval as AskApproval
    from ._hooks import Deny as Deny
    from ._hooks import ToolHooks as ToolHooks
    from ._outcome import DEFAULT_MAX_OUTPUT_BYTES as DEFAULT_MAX_OUTPUT_BYTES
    from ._outcome import MIN_MAX_OUTPUT_BYTES as MIN_MAX_OUTPUT_BYTES
    from ._outcome import ToolOutcome as ToolOutcome
    from ._pipeline import Prepared as Prepared
    from ._pipeline import ToolPipeline as ToolPipeline
    from ._registry import ToolRegistry as ToolRegistry
    from ._request import ToolCallRequest as ToolCallRequest
    from ._scheduler import SchedulerOutcome as SchedulerOutcome
    from ._scheduler import execute_tool_calls as execute_tool_calls
    from ._signal import CancelSignal as CancelSignal
    from ._signal import TurnCancelled as TurnCancelled
    from ._workers import ToolWorkers as ToolWorkers
    from ._workers import tool_workers as tool_workers

__all__ = [
    "ApprovalGate",
    "ApprovalRequest",
    "Approver",
    "AskApproval",
    "Decision",
    "cancel_waiting",
    "CancelSignal",
    "DEFAULT_CANCEL_GRACE_SECONDS",
    "DEFAULT_MAX_OUTPUT_BYTES",
    "Deny",
    "MIN_MAX_OUTPUT_BYTES",
    "Prepared",
    "SchedulerOutcome",
    "Tool",
    "ToolCallRequest",
    "ToolContext",
    "ToolHooks",
    "ToolOutcome",
    "ToolPipeline",
    "ToolRegistry",
    "ToolWorkers",
    "TurnCancelled",
    "builtin_tools",
    "execute_tool_calls",
    "kill_running_commands",
    "tool",
    "tool_workers",
]

if not _lazy.TYPE_CHECKING:  # PEP 562: each name's module loads on first use
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "kill_running_commands": "._bash_tool",
            "DEFAULT_CANCEL_GRACE_SECONDS": "._blocking",
            "builtin_tools": "._builtins",
            "ToolContext": "._context",
            "Tool": "._definition",
            "tool": "._definition",
            "Deny": "._hooks",
            "AskApproval": "._hooks",
            "ApprovalGate": "._approval",
            "ApprovalRequest": "._approval",
            "Approver": "._approval",
            "Decision": "._approval",
            "cancel_waiting": "._approval",
            "ToolHooks": "._hooks",
            "DEFAULT_MAX_OUTPUT_BYTES": "._outcome",
            "MIN_MAX_OUTPUT_BYTES": "._outcome",
            "ToolOutcome": "._outcome",
            "Prepared": "._pipeline",
            "ToolPipeline": "._pipeline",
            "ToolRegistry": "._registry",
            "ToolCallRequest": "._request",
            "SchedulerOutcome": "._scheduler",
            "execute_tool_calls": "._scheduler",
            "CancelSignal": "._signal",
            "TurnCancelled": "._signal",
            "ToolWorkers": "._workers",
            "tool_workers": "._workers",
        },
    )
