"""A session's title: the text of its first prompt (what a sessions list shows)."""

from __future__ import annotations

from collections.abc import Iterable

from ._event import Event
from .vocabulary import BLOCK_TEXT, SURFACE_APPEND, USER_MESSAGE

MAX_TITLE_CHARS = 200
"""Most characters of a title (`session_title`); the rest is cut."""


def session_title(events: Iterable[Event], *, limit: int = MAX_TITLE_CHARS) -> str | None:
    """Return the text of a log's first user-sourced `user/message`, whitespace folded.

    See docs/view.md#sessions. The text is untrusted (as written in the log): bounded here,
    escaped by whoever renders it.

    Args:
        events: the log, in seq order (read until the first prompt).
        limit: the most characters returned.

    Returns:
        The prompt's text blocks joined, folded to one line and cut to `limit` characters,
        or None if the log has no user prompt with text.
    """
    for event in events:
        if event.type != USER_MESSAGE or event.surface_op != SURFACE_APPEND:
            continue
        data = event.data
        if not isinstance(data, dict):
            continue
        source = data.get("source")
        if isinstance(source, dict) and source.get("kind") != "user":
            continue
        content = data.get("content")
        blocks = content if isinstance(content, list) else []
        text = " ".join(
            str(block.get("text", ""))
            for block in blocks
            if isinstance(block, dict) and block.get("type") == BLOCK_TEXT
        )
        folded = " ".join(text.split()[: limit + 1])
        if folded:
            return folded[:limit]
    return None
