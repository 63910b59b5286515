"""The config file on disk: where it is, reading it, and naming the line of a key.

tomllib gives no positions, so `TomlFile.where` finds the line of a dotted key by a scan of
the text (best effort), for the `ConfigError`s that name the file, the line and the key.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..errors import ConfigError

CONFIG_FILE_NAME: Final = "config.toml"
_HEADER: Final = re.compile(r"\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?")
_KEY: Final = re.compile(
    r"\s*((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"|"
    r"'[^']*'))*)\s*="
)


def config_path(env: Mapping[str, str]) -> Path:
    """Return the config file's path: `$DURALOOP_HOME/config.toml` (`~/.duraloop/config.toml`).

    Args:
        env: the environment (usually `os.environ`).

    Returns:
        The path; it need not exist.
    """
    home = env.get("DURALOOP_HOME") or str(Path.home() / ".duraloop")
    return Path(home).expanduser() / CONFIG_FILE_NAME


@dataclass(frozen=True)
class TomlFile:
    """A config file read and parsed.

    Args:
        path: the file.
        data: its top-level table.
        lines: each dotted key path -> the line defining it.
    """

    path: Path
    data: dict[str, Any]
    lines: dict[tuple[str, ...], int]

    def where(self, *key: str) -> str:
        """Return `config file PATH, line N` for a dotted key (without the line if unknown)."""
        line = self.lines.get(key)
        return f"config file {self.path}, line {line}" if line else f"config file {self.path}"

    def fail(self, key: tuple[str, ...], problem: str) -> ConfigError:
        """Return the `ConfigError` saying what is wrong with `key`, where."""
        return ConfigError(f"{self.where(*key)}: `{'.'.join(key)}` {problem}")


def read_toml(path: Path) -> TomlFile | None:
    """Read and parse a config file; None if it does not exist.

    Raises:
        ConfigError: if it cannot be read, is not UTF-8, or is not valid TOML (the message
            carries tomllib's line and column).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text: {exc.reason}") from exc
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    return TomlFile(path, raw, _key_lines(text))


def refuse_unknown(
    table: Mapping[str, Any],
    allowed: Sequence[str],
    prefix: tuple[str, ...],
    fail: Callable[[tuple[str, ...], str], ConfigError],
) -> None:
    for key in table:
        if key not in allowed:
            raise fail((*prefix, key), f"is not a known key; allowed: {', '.join(allowed)}")


def _key_lines(text: str) -> dict[tuple[str, ...], int]:
    """Map each dotted key path to the line defining it (best effort; tomllib has no positions)."""
    lines: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.fullmatch(line)
        if header is not None:
            table = _dotted(header.group(1))
            for end in range(1, len(table) + 1):  # `[a.b.c]` defines `a` and `a.b` too
                lines.setdefault(table[:end], number)
            continue
        key = _KEY.match(line)
        if key is not None:
            path = (*table, *_dotted(key.group(1)))
            for end in range(len(table) + 1, len(path) + 1):
                lines.setdefault(path[:end], number)
    return lines


def _dotted(text: str) -> tuple[str, ...]:
    return tuple(part.strip().strip("\"'") for part in text.split("."))
