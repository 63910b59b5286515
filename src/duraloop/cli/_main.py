"""The `duraloop` entry point: run the CLI app and turn a failure into one line and a status."""

from __future__ import annotations

import logging
import sys

from .. import log as _log
from ..errors import ApprovalError, DuraloopError, UnpairedHistoryError
from . import _app  # noqa: F401 - registers every command
from ._console import app, err
from ._render import ShowFlagsError, VisibleFormatter, styled
from ._runner import os_error_text
from ._stores import name_the_store, opened_store_text


def main() -> None:
    """Run the CLI; a DuraloopError or OSError prints one line `Type: message` and exits 1.

    A usage error of the command line itself exits 2, as click's own do: two views given
    to `show`, or an approval command that finds no call waiting (`ApprovalError`).
    """
    # A plain handler: one unpadded line per warning (rich's log handler pads each line to
    # the console width).
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(VisibleFormatter("%(levelname)s %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    try:
        app(prog_name="duraloop")  # `python -m duraloop` reads as the command it is
    except DuraloopError as exc:
        if isinstance(exc, UnpairedHistoryError):  # name the store, so the rescue runs as printed
            exc = exc.with_rescue(
                _log.rescue_command(exc.session_id, exc.rescue_seq, store=opened_store_text())
            )
        err.print(styled((type(exc).__name__, "red"), ": ", name_the_store(str(exc))))
        sys.exit(2 if isinstance(exc, ShowFlagsError | ApprovalError) else 1)
    except OSError as exc:
        # A file system failure no library call translated (an unreadable --store root such
        # as /proc/1): still one line, never a traceback.
        err.print(styled((type(exc).__name__, "red"), ": ", os_error_text(exc)))
        sys.exit(1)
