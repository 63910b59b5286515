"""The tool-result pruner: a model-free compaction of old, large tool outputs.

See docs/compaction.md#the-pruner (compaction-spec 6).

A pruned `tool/result` keeps its place, call id and error; only its content's text loses its
middle, replaced by `PRUNE_MARKER`. Each replacement is a `compaction/prune` event followed
by the content-only `tool/result` replace of one current result.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from .vocabulary import PRUNE_MARKER


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
