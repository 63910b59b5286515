"""The `duraloop` command line."""

from ._console import app as app
from ._main import main as main

__all__ = ["app", "main"]
