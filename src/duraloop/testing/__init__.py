"""Public test doubles: gates that release tool bodies by key, and whole-log checks."""

from ._gates import Gates as Gates
from ._gates import gated_tool as gated_tool
from ._logcheck import assert_log_valid as assert_log_valid
from ._logcheck import describe_log as describe_log

__all__ = ["Gates", "assert_log_valid", "describe_log", "gated_tool"]
