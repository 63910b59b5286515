"""Public test doubles: gates that release tool bodies by key, and whole-log checks."""

from .. import _lazy

if _lazy.TYPE_CHECKING:
    from ._gates import Gates as Gates
    from ._gates import gated_tool as gated_tool
    from ._logcheck import assert_log_valid as assert_log_valid
    from ._logcheck import describe_log as describe_log

__all__ = ["Gates", "assert_log_valid", "describe_log", "gated_tool"]

if not _lazy.TYPE_CHECKING:  # PEP 562: each name's module loads on first use
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "Gates": "._gates",
            "gated_tool": "._gates",
            "assert_log_valid": "._logcheck",
            "describe_log": "._logcheck",
        },
    )
