"""The `[prices."provider:model"]` tables of the config file (docs/loop.md#budgets).

Read on their own by `duraloop show`, which needs the prices and nothing of the models.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ._config_file import TomlFile, read_toml, refuse_unknown

if TYPE_CHECKING:
    from ..log import Price

PRICE_KEYS: Final = (
    "input_per_mtok",
    "output_per_mtok",
    "cache_read_per_mtok",
    "cache_write_per_mtok",
)


def load_prices(path: Path) -> dict[str, Price]:
    """Return the price table of the config file at `path` (empty if it has none).

    Raises:
        ConfigError: if the file cannot be read or parsed, or a price table is invalid.
    """
    file = read_toml(path)
    return {} if file is None else prices_of(file)


def prices_of(file: TomlFile) -> dict[str, Price]:
    """Validate the `[prices."provider:model"]` tables of a parsed config file.

    Raises:
        ConfigError: naming the file, the line and the key, if a table is not a table, its
            key is not `provider:model`, a key is unknown, a price is missing or invalid.
    """
    from ..log import Price

    tables = file.data.get("prices", {})
    fail = file.fail
    if not isinstance(tables, dict):
        raise fail(
            ("prices",), f'must be a table of [prices."provider:model"] tables, got {tables!r}'
        )
    prices: dict[str, Price] = {}
    for key, table in tables.items():
        where = ("prices", key)
        if ":" not in key:
            raise fail(
                where, 'must name a model as "provider:model", e.g. "deepseek:deepseek-chat"'
            )
        if not isinstance(table, dict):
            raise fail(where, f"must be a table, got {table!r}")
        refuse_unknown(table, PRICE_KEYS, where, fail)
        missing = [name for name in PRICE_KEYS[:2] if name not in table]
        if missing:
            raise fail(where, f"needs {' and '.join(missing)}")
        for name, value in table.items():  # each value at its own line
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise fail((*where, name), f"must be a number >= 0, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise fail((*where, name), f"must be a finite number >= 0, got {value!r}")
        prices[key] = Price(**table)
    return prices
