"""The context a tool body receives: workspace, cancellation signal and call identity."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ._signal import CancelSignal


@dataclass(frozen=True)
class ToolContext:
    """What one tool call knows about where and why it runs.

    A tool function receives it by declaring a parameter annotated `ToolContext`; that
    parameter is injected by the pipeline and never appears in the model-facing schema.

    Args:
        cwd: the session workspace, absolute and resolved; file tools are confined to it.
        signal: the turn's cancellation signal; long-running bodies watch it and settle
            themselves (cancellation is cooperative, loop-spec 10.2).
        call_id: the id of the tool-call block being answered.
        tool_name: the name the model called.
        session_id: the session the call belongs to.
    """

    cwd: Path
    signal: CancelSignal
    call_id: str
    tool_name: str
    session_id: str
