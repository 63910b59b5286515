"""OpenTelemetry GenAI spans for duraloop's turns, built from committed events.

`instrument(loop)` observes the loop's session; no core package imports this one, and
nothing here imports OpenTelemetry until `instrument` runs (docs/telemetry.md).
"""

from .. import _lazy

if _lazy.TYPE_CHECKING:
    from ._instrument import CAPTURE_CONTENT_ENV as CAPTURE_CONTENT_ENV
    from ._instrument import instrument as instrument

__all__ = ["CAPTURE_CONTENT_ENV", "instrument"]

if not _lazy.TYPE_CHECKING:  # PEP 562: each name's module loads on first use
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "CAPTURE_CONTENT_ENV": "._instrument",
            "instrument": "._instrument",
        },
    )
