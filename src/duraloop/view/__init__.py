"""`duraloop view`: a local web viewer of a store's sessions (docs/view.md).

Starlette and uvicorn are the `view` extra; nothing here is imported by the core packages.
"""

from .. import _lazy

if _lazy.TYPE_CHECKING:
    from ._app import Decide as Decide
    from ._app import create_app as create_app
    from ._guard import CSP as CSP
    from ._guard import TOKEN_HEADER as TOKEN_HEADER

__all__ = ["CSP", "Decide", "TOKEN_HEADER", "create_app"]

if not _lazy.TYPE_CHECKING:  # PEP 562: each name's module loads on first use
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "Decide": "._app",
            "create_app": "._app",
            "CSP": "._guard",
            "TOKEN_HEADER": "._guard",
        },
    )
