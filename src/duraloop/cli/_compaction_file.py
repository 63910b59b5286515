"""The `[compaction]` and `[context_windows]` tables of the config file.

```toml
[compaction]
auto = true                 # compact before a step near the window, and after an overflow
threshold_ratio = 0.8       # share of the context window a request may reach
retain_ratio = 0.16         # share of the window kept verbatim (or retain_tokens = N)
keep_turns = 0              # the last N turns are never compacted
max_tokens = 8192           # the summary request's output cap
compaction_retries = 1
max_overflow_retries = 1    # 0: no recovery from CONTEXT_WINDOW_EXCEEDED
# pruner = false            # no tool-result pruning

[compaction.pruner]         # tool results longer than threshold_chars lose their middle
threshold_chars = 8192
head_chars = 4096
tail_chars = 1024

[context_windows]           # tokens; overrides the adapters and the built-in table
"deepseek:deepseek-chat" = 131072
```

Each value becomes a field of `duraloop.loop.CompactionConfig`, which checks types and
ranges; its `ConfigError` is given the file and the line of the key it names. The loop's
types are imported only when the file has one of these tables (a command that runs no
turn never loads them otherwise).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from ..errors import ConfigError
from ._config_file import TomlFile, refuse_unknown

if TYPE_CHECKING:
    from ..loop import CompactionConfig

COMPACTION_KEYS: Final = (
    "auto",
    "threshold_ratio",
    "retain_ratio",
    "retain_tokens",
    "keep_turns",
    "max_tokens",
    "compaction_retries",
    "max_overflow_retries",
    "pruner",
)
PRUNER_KEYS: Final = ("threshold_chars", "head_chars", "tail_chars")
_NAMED: Final = re.compile(r"\b(compaction|pruner)\.(\w+)")
_T = TypeVar("_T")


def compaction_of(file: TomlFile) -> CompactionConfig | None:
    """Build the `CompactionConfig` of a parsed config file's tables.

    Args:
        file: the parsed config file.

    Returns:
        The config; None when the file has neither `[compaction]` nor `[context_windows]`
        (the loop's default `CompactionConfig()` then applies).

    Raises:
        ConfigError: naming the file, the line and the dotted key, if a table is not a
            table, a key is unknown, a context window is not an integer >= 1 under a
            `"provider:model"` key, or a value is refused by `CompactionConfig` or
            `PrunerConfig` (wrong type or range, both retain options, a retain ratio not
            below the threshold).
    """
    raw, fail = file.data, file.fail
    if "compaction" not in raw and "context_windows" not in raw:
        return None
    table = raw.get("compaction", {})
    if not isinstance(table, dict):
        raise fail(("compaction",), f"must be a table, got {table!r}")
    refuse_unknown(table, COMPACTION_KEYS, ("compaction",), fail)
    options: dict[str, Any] = {key: value for key, value in table.items() if key != "pruner"}
    from ..log import PrunerConfig
    from ..loop import CompactionConfig

    pruner = table.get("pruner", True)
    if pruner is False:
        options["pruner"] = None
    elif isinstance(pruner, dict):
        refuse_unknown(pruner, PRUNER_KEYS, ("compaction", "pruner"), fail)
        options["pruner"] = _built(file, ("compaction", "pruner"), PrunerConfig, pruner)
    elif pruner is not True:
        raise fail(
            ("compaction", "pruner"),
            f"must be a [compaction.pruner] table or false, got {pruner!r}",
        )
    options["context_windows"] = _windows(file)
    return _built(file, ("compaction",), CompactionConfig, options)


def _windows(file: TomlFile) -> dict[str, int]:
    windows = file.data.get("context_windows", {})
    if not isinstance(windows, dict):
        raise file.fail(
            ("context_windows",),
            f'must be a table of "provider:model" = tokens, got {windows!r}',
        )
    for key, tokens in windows.items():
        if ":" not in key:
            raise file.fail(
                ("context_windows", key),
                'must name a model as "provider:model", e.g. "deepseek:deepseek-chat"',
            )
        if type(tokens) is not int or tokens < 1:
            raise file.fail(
                ("context_windows", key),
                f"must be an integer number of tokens >= 1, got {tokens!r}",
            )
    return windows


def _built(
    file: TomlFile, table: tuple[str, ...], kind: Callable[..., _T], values: dict[str, Any]
) -> _T:
    """Build `kind(**values)`; its `ConfigError` is located at the first key it names."""
    try:
        return kind(**values)
    except ConfigError as exc:
        key = table
        for _, name in _NAMED.findall(str(exc)):
            if name in values:
                key = (*table, name)
                break
        raise ConfigError(f"{file.where(*key)}: {exc}") from exc
