"""The tool-result pruner: a model-free compaction of old, large tool outputs.

See docs/compaction.md#the-pruner (compaction-spec 6).

A pruned `tool/result` keeps its place, call id and error; only its content's text loses its
middle, replaced by `PRUNE_MARKER`. Each replacement is a `compaction/prune` event followed
by the content-only `tool/result` replace of one current result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, UsageError
from ._messages import Message
from .vocabulary import BLOCK_TEXT, COMPACTION_PRUNE, PRUNE_MARKER, SURFACE_REPLACE, TOOL_RESULT

if TYPE_CHECKING:
    from ._session import Session


@dataclass(frozen=True)
class PrunerConfig:
    """When and how much of a tool result the pruner keeps (sizes in Unicode code points).

    Args:
        threshold_chars: a result whose text is longer than this is pruned. Default 8192.
        head_chars: the text kept from the start. Default 4096.
        tail_chars: the text kept from the end. Default 1024.

    Raises:
        ConfigError: if `threshold_chars` is not an integer > 0, a kept size is not an
            integer >= 0, or `head_chars + len(PRUNE_MARKER) + tail_chars` exceeds the
            threshold (a pruned text would not be shorter).
    """

    threshold_chars: int = 8192
    head_chars: int = 4096
    tail_chars: int = 1024

    def __post_init__(self) -> None:
        """Validate the sizes (compaction-spec 6)."""
        if type(self.threshold_chars) is not int or self.threshold_chars < 1:
            raise ConfigError(
                f"pruner.threshold_chars must be an integer >= 1, got {self.threshold_chars!r}"
            )
        for name in ("head_chars", "tail_chars"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise ConfigError(f"pruner.{name} must be an integer >= 0, got {value!r}")
        kept = self.head_chars + len(PRUNE_MARKER) + self.tail_chars
        if kept > self.threshold_chars:
            raise ConfigError(
                f"pruner.head_chars + the marker ({len(PRUNE_MARKER)}) + pruner.tail_chars "
                f"= {kept} must not exceed pruner.threshold_chars ({self.threshold_chars})"
            )


def _text_of(block: Any) -> str | None:
    """Return a `text` block's text, or None for any other block (which costs 0)."""
    if isinstance(block, dict) and block.get("type") == BLOCK_TEXT:
        text = block.get("text")
        if isinstance(text, str):
            return text
    return None


def prune_content(blocks: list[Any], config: PrunerConfig) -> list[Any] | None:
    """Return `blocks` with the middle of their text cut out, or None if it is short enough.

    Sizes are Unicode code points of `text` blocks only (compaction-spec 6, case C44). When
    the text is longer than `config.threshold_chars`, the code-point span
    `[head_chars, total - tail_chars)` of the concatenated text is removed: each text block
    keeps its part before and after that span, `PRUNE_MARKER` is put once into the first
    text block that intersects it, text blocks left empty are dropped, and every other block
    keeps its place. Extra keys of a text block are kept.

    Args:
        blocks: a tool result's content blocks (not changed).
        config: the pruner's sizes.

    Returns:
        New blocks (the non-text ones shared with `blocks`) whose text is exactly
        `head_chars + len(PRUNE_MARKER) + tail_chars` code points, or None when the text has
        at most `threshold_chars` code points.
    """
    total = 0
    for block in blocks:
        text = _text_of(block)
        if text is not None:
            total += len(text)
    if total <= config.threshold_chars:
        return None
    removed_start = config.head_chars
    removed_end = total - config.tail_chars
    pruned: list[Any] = []
    consumed = 0
    marked = False
    for block in blocks:
        text = _text_of(block)
        if text is None:
            pruned.append(block)
            continue
        start, end = consumed, consumed + len(text)
        head_end = min(len(text), max(0, removed_start - start))
        tail_start = min(len(text), max(0, removed_end - start))
        marker = ""
        if not marked and start < removed_end and end > removed_start:
            marker, marked = PRUNE_MARKER, True
        kept = text[:head_end] + marker + text[tail_start:]
        if kept:
            pruned.append({**block, "text": kept})
        consumed = end
    return pruned


def prune_session(
    session: Session,
    config: PrunerConfig,
    *,
    protect: int = 0,
    estimate: Callable[[Message], int],
) -> int:
    """Prune every over-long `tool/result` of the current surface; return how many were.

    One pass over a snapshot of `session.surface.nodes`, in surface order (compaction-spec 6,
    case C45). For each `tool/result` node `s` whose first block's `content` prunes
    (`prune_content`) it appends `compaction/prune {shadowedRange: {start: s, end: s},
    shadowedSeqs: [s], shadowedTokenCount: estimate(original message)}`, then the
    replacing `tool/result`: the original data with only `message.content[0].content`
    replaced (turn, step, error, meta, ids and unknown fields kept), surfaceOp
    `{"op": "replace", "start": s, "end": s}`, `sourceEventSeqs [s]`. A pruned text is
    within the threshold, so a second pass prunes nothing.

    Args:
        session: the session to prune (appended to).
        config: the pruner's sizes.
        protect: the newest `protect` surface nodes are left as they are (0: none; dsh).
        estimate: the token price of a message (the `compaction/prune` shadow price).

    Returns:
        The number of results replaced.

    Raises:
        UsageError: if `protect` is not an integer >= 0.
        EventRejectedError: if the session refuses a replacement; with invariants checked,
            a replacement outside an open turn is refused ("... appended outside any open
            turn"). The `compaction/prune` before it and the replacements before that stay
            in the log, as in dsh.
    """
    if type(protect) is not int or protect < 0:
        raise UsageError(f"prune_session protect must be an integer >= 0, got {protect!r}")
    nodes = list(session.surface.nodes)
    candidates = nodes[: max(0, len(nodes) - protect)]
    events = session.events
    pruned = 0
    for seq in candidates:
        event = events[seq]
        if event.type != TOOL_RESULT:
            continue
        replacement = _pruned_data(event.data, config)
        if replacement is None:
            continue
        session.append(
            COMPACTION_PRUNE,
            {
                "shadowedRange": {"start": seq, "end": seq},
                "shadowedSeqs": [seq],
                "shadowedTokenCount": estimate(event.data["message"]),
            },
        )
        session.append(
            TOOL_RESULT,
            replacement,
            surface_op={"op": SURFACE_REPLACE, "start": seq, "end": seq},
            source_event_seqs=[seq],
        )
        pruned += 1
    return pruned


def _pruned_data(data: Any, config: PrunerConfig) -> dict[str, Any] | None:
    """Return a `tool/result`'s data with its first block's content pruned, or None."""
    message = data.get("message") if isinstance(data, dict) else None
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if not isinstance(content, list) or not content or not isinstance(content[0], dict):
        return None
    first = content[0]
    inner = first.get("content")
    blocks = prune_content(inner, config) if isinstance(inner, list) else None
    if blocks is None:
        return None
    rewritten = {**message, "content": [{**first, "content": blocks}, *content[1:]]}
    return {**data, "message": rewritten}
