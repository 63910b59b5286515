"""The user's config file, `$DURALOOP_HOME/config.toml`, and the CLI's choice of model.

The file is optional (a missing file is an empty config) and validated strictly: an
unknown key or provider, or a value of the wrong type, is a `ConfigError` naming the file,
the line (when it can be found) and the dotted key. Example:

```toml
default_model = "deepseek:deepseek-chat"

[providers.deepseek]
base_url = "https://api.deepseek.com"
api_key_env = "MY_DEEPSEEK_KEY"   # read the key from this variable instead
max_tokens = 32000
reasoning_effort = "high"
timeout_seconds = 600

[providers.anthropic]
max_tokens = 8192

[prices."deepseek:deepseek-chat"]   # per million tokens, in one currency of your choice
input_per_mtok = 0.27
output_per_mtok = 1.10
cache_read_per_mtok = 0.07          # optional, as cache_write_per_mtok: the input price

[compaction]                        # see _compaction_file.py for every key
threshold_ratio = 0.8

[context_windows]                   # tokens
"deepseek:deepseek-chat" = 131072

[mcp.servers.files]                 # see _mcp_config.py; started by `--mcp files`
command = ["python", "server.py"]
```

Precedence, highest first (issue 5): CLI flags (`--model`, `--base-url`, `--max-tokens`,
`--reasoning-effort`), the environment (`DURALOOP_MODEL`, the providers' `*_API_KEY` and
`*_BASE_URL`), this file, the built-in defaults. The model spec itself comes from
`--model`, else `DURALOOP_MODEL` (typer reads it), else `default_model`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ..errors import ConfigError, UsageError
from ..llm import (
    PROVIDERS,
    SPEC_FORMS,
    Model,
    ProviderSettings,
    parse_model_spec,
    setting_problem,
    spec_problem,
)
from ..log import Event, Price
from ..store import LOG_FILE_NAME, ZSTD_LOG_FILE_NAME, read_log_file
from ._compaction_file import compaction_of
from ._config_file import config_path, read_toml, refuse_unknown
from ._mcp_config import McpServerEntry, mcp_servers_of
from ._prices import prices_of
from ._stores import session_log_file

if TYPE_CHECKING:
    from ..loop import CompactionConfig

_TOP_KEYS: Final = (
    "default_model",
    "providers",
    "prices",
    "compaction",
    "context_windows",
    "mcp",
)
_PROVIDER_KEYS: Final = (
    "api_key_env",
    "base_url",
    "max_tokens",
    "reasoning_effort",
    "timeout_seconds",
)


@dataclass(frozen=True)
class UserConfig:
    """The parsed config file.

    Args:
        path: the file it was read from (it may not exist).
        default_model: the model spec used when neither `--model` nor `DURALOOP_MODEL` is set.
        providers: settings by provider name (`openai`, `deepseek`, `anthropic`); each
            field's origin names the file and line.
        prices: `provider:model` -> its price per million tokens (docs/loop.md#budgets).
        compaction: the `[compaction]` and `[context_windows]` tables as a
            `CompactionConfig`; None when the file has neither (the loop's default applies).
        mcp_servers: the `[mcp.servers.NAME]` tables by name, checked but not started
            (docs/cli.md#mcp-servers).
    """

    path: Path
    default_model: str | None = None
    providers: Mapping[str, ProviderSettings] = field(default_factory=dict)
    prices: Mapping[str, Price] = field(default_factory=dict)
    compaction: CompactionConfig | None = None
    mcp_servers: Mapping[str, McpServerEntry] = field(default_factory=dict)


def load_config(path: Path) -> UserConfig:
    """Read and validate a config file; a missing file is an empty config.

    Args:
        path: the TOML file.

    Returns:
        The validated config.

    Raises:
        ConfigError: if the file cannot be read, is not UTF-8 TOML (the message carries
            tomllib's line and column), has an unknown key or provider, or a value of the
            wrong type or range; the message names the file, the line and the dotted key.
    """
    file = read_toml(path)
    if file is None:
        return UserConfig(path)
    raw, where, fail = file.data, file.where, file.fail
    refuse_unknown(raw, _TOP_KEYS, (), fail)
    default_model = raw.get("default_model")
    if default_model is not None:
        if not isinstance(default_model, str):
            raise fail(("default_model",), f"must be a string, got {default_model!r}")
        problem = spec_problem(default_model)
        if problem is not None:
            raise ConfigError(f"{where('default_model')}: `default_model`: {problem}")
    tables = raw.get("providers", {})
    if not isinstance(tables, dict):
        raise fail(("providers",), f"must be a table of [providers.NAME] tables, got {tables!r}")
    providers: dict[str, ProviderSettings] = {}
    for name, table in tables.items():
        if name not in PROVIDERS:
            raise fail(("providers", name), f"is not a provider; known: {', '.join(PROVIDERS)}")
        if not isinstance(table, dict):
            raise fail(("providers", name), f"must be a table, got {table!r}")
        refuse_unknown(table, _PROVIDER_KEYS, ("providers", name), fail)
        for key, value in table.items():
            problem = setting_problem(key, value)
            if problem is not None:
                raise fail(("providers", name, key), problem)
        origins = {key: where("providers", name, key) for key in table}
        providers[name] = ProviderSettings(**table, origins=origins)
    return UserConfig(
        path,
        default_model=default_model,
        providers=providers,
        prices=prices_of(file),
        compaction=compaction_of(file),
        mcp_servers=mcp_servers_of(file),
    )


def build_model(
    model: str | None,
    *,
    env: Mapping[str, str],
    base_url: str | None = None,
    max_tokens: int | None = None,
    reasoning_effort: str | None = None,
) -> Model:
    """Choose and build the model of a `run`, `resume` or `chat` command.

    Args:
        model: the `--model` value (typer already fell back to `DURALOOP_MODEL`), or None.
        env: the environment (usually `os.environ`): `DURALOOP_HOME`, API keys, base URLs.
        base_url: `--base-url`, or None.
        max_tokens: `--max-tokens`, or None.
        reasoning_effort: `--reasoning-effort`, or None.

    Returns:
        The model, its settings resolved flags > environment > config file > defaults.

    Raises:
        UsageError: if no model is given anywhere (the message lists where one can be set).
        ConfigError: if the config file, the spec, a flag or a provider setting is invalid,
            or a `replay:` log cannot be read (see `load_config` and `parse_model_spec`).
        CorruptLogError: if a `replay:` log is damaged inside its committed region.
    """
    config = load_config(config_path(env))
    spec = model or config.default_model
    if not spec:
        raise UsageError(
            f"no model given: pass --model SPEC ({SPEC_FORMS}), set DURALOOP_MODEL, or set "
            f"default_model in {config.path}; to try duraloop offline, run `duraloop demo`"
        )
    flags = {"base_url": base_url, "max_tokens": max_tokens, "reasoning_effort": reasoning_effort}
    overrides = ProviderSettings(
        base_url=base_url,
        max_tokens=max_tokens,
        reasoning_effort=reasoning_effort,
        origins={
            name: "--" + name.replace("_", "-")
            for name, value in flags.items()
            if value is not None
        },
    )
    return parse_model_spec(
        spec, env=env, providers=config.providers, overrides=overrides, read_log=read_replay_log
    )


def read_replay_log(path: str) -> list[Event]:
    """Read the session log a `replay:PATH` spec names: ours (raw or zstd) or dsh's.

    Args:
        path: a `session.jsonl` / `session.jsonl.zstd` file (a dsh projected fixture too),
            or the session folder holding one (`~` expanded).

    Returns:
        The log's events in seq order, as `duraloop.store.read_log_file` reads them.

    Raises:
        ConfigError: if the path does not exist, is a folder without a session log, or
            cannot be read.
        CorruptLogError: if the log is damaged inside its committed region.
        SessionFormatUnsupportedError: if the log uses a format this build cannot read.
    """
    found = session_log_file(path)
    if found is None and Path(path).expanduser().is_dir():
        raise ConfigError(
            f"replay:{path}: the folder holds no {LOG_FILE_NAME} or {ZSTD_LOG_FILE_NAME}; "
            "pass a session log file or its session folder"
        )
    file = found if found is not None else Path(path).expanduser()
    try:
        return read_log_file(file)[1]
    except OSError as exc:
        raise ConfigError(
            f"replay:{path}: cannot read the session log {file}: {exc.strerror or exc}; pass a "
            f"session log file ({LOG_FILE_NAME} or {ZSTD_LOG_FILE_NAME}, ours or dsh's) or its "
            "session folder"
        ) from exc
