"""Bulk conversion helpers shared by the request encoders.

A cold encoder cache (a resumed process, a replaced history, another provider's adapter)
converts a whole history at once: thousands of small, acyclic wire dicts that all stay
alive. Each 700 of them start a young-generation garbage collection that frees nothing and
whose cost grows with the objects it must traverse; `gc_paused` skips those collections for
the length of one bulk conversion (the next allocation after it collects as usual).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

BULK_MESSAGES: Final = 256
"""From how many history messages a conversion counts as bulk."""


@contextmanager
def gc_paused(messages: int) -> Iterator[None]:
    """Pause the cyclic garbage collector while `messages` history messages are converted.

    Only when `messages >= BULK_MESSAGES` and the collector is enabled; it is enabled again
    on exit, even when the conversion raises. Reference counting frees memory as always.

    Args:
        messages: how many history messages the block converts.

    Yields:
        None, while the collector is paused (or untouched).
    """
    pause = messages >= BULK_MESSAGES and gc.isenabled()
    if pause:
        gc.disable()
    try:
        yield
    finally:
        if pause:
            gc.enable()
