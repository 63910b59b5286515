"""The root of duraloop's exceptions; the public home of every one is `duraloop.errors`."""

from __future__ import annotations


class DuraloopError(Exception):
    """Raised for every failure duraloop reports; the root of the tree above."""

    __module__ = "duraloop.errors"
