"""The text of a message's content blocks, as the request encoders send it.

Both adapters send text only: text blocks are joined, reasoning and unknown blocks are
left out, and an image is refused with the adapter's own error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..log import Message
from ..log.vocabulary import BLOCK_IMAGE, BLOCK_TEXT


def joined_text(
    blocks: Sequence[Any], message: Message, *, sep: str, image: Callable[[Message], Exception]
) -> str:
    """Return the text blocks of `blocks` joined by `sep`.

    Args:
        blocks: content blocks, as stored.
        message: the message they belong to (for the image error).
        sep: what goes between two text blocks.
        image: builds the error an image block raises (the adapter's `UNSUPPORTED_CONTENT`).

    Raises:
        Exception: `image(message)`, for the first image block.
    """
    if len(blocks) == 1:  # the common case: one text block, returned as it is
        block = blocks[0]
        if block.get("type") == BLOCK_TEXT and type(text := block["text"]) is str:
            return text
    parts: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == BLOCK_TEXT:
            parts.append(block["text"])
        elif kind == BLOCK_IMAGE:
            raise image(message)
    return sep.join(parts)
