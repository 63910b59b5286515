"""Model specs: the `PROVIDER:MODEL` strings the CLI accepts, turned into models.

Forms: `scripted:PATH`, `replay:PATH`, `openai:MODEL`, `deepseek:MODEL`, `anthropic:MODEL`.
A provider's settings are resolved field by field, first found wins (issue 5):

1. `overrides` (the CLI's `--base-url`, `--max-tokens`, `--reasoning-effort`);
2. the environment: the API key from `OPENAI_API_KEY` / `DEEPSEEK_API_KEY` /
   `ANTHROPIC_API_KEY` (or the variable the settings name in `api_key_env`), the base URL
   from `OPENAI_BASE_URL` / `DEEPSEEK_BASE_URL` / `ANTHROPIC_BASE_URL`;
3. `providers[name]` (the `[providers.NAME]` tables of `$DURALOOP_HOME/config.toml`);
4. the adapter's own defaults.

Environment values are read only here, from the mapping the caller passes, never from
`os.environ` (style rule D23). Adapter modules are imported when a spec names them, so the SDKs
are not imported by `import duraloop`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final

from ..errors import ConfigError
from ..log import Event
from ._model import Model
from ._options import SETTING_OPTIONS
from ._replay import ReplayModel
from ._scripted import ScriptedModel

PROVIDERS: Final = ("openai", "deepseek", "anthropic")
"""The provider routes a spec may name besides `scripted` and `replay`."""

SPEC_FORMS: Final = "scripted:PATH, replay:PATH, openai:MODEL, deepseek:MODEL or anthropic:MODEL"
"""The spec forms, for help texts."""

_FORMS: Final = (
    "scripted:PATH (a JSON list of scripted responses, no key needed), "
    "replay:PATH (a session log, ours or dsh's, whose assistant messages answer in order), "
    "openai:MODEL (needs OPENAI_API_KEY; optional OPENAI_BASE_URL), "
    "deepseek:MODEL (needs DEEPSEEK_API_KEY; optional DEEPSEEK_BASE_URL), "
    "anthropic:MODEL (needs ANTHROPIC_API_KEY; optional ANTHROPIC_BASE_URL)"
)
_KEYLESS_HINT: Final = (
    "To try duraloop without a key, run `duraloop demo` or use `--model scripted:PATH`."
)
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_URL: Final = re.compile(r"https?://[^\s/]+\S*")


@dataclass(frozen=True, slots=True)
class _Route:
    key_env: str
    base_url_env: str


_ROUTES: Final = {
    "openai": _Route("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "deepseek": _Route("DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL"),
    "anthropic": _Route("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
}


def setting_problem(name: str, value: object) -> str | None:
    """Say what is wrong with one provider setting value, or return None when it is valid.

    Args:
        name: a `ProviderSettings` field: `base_url`, `api_key_env`, `max_tokens`,
            `reasoning_effort` or `timeout_seconds`.
        value: the value to check (None is always valid: "not set").

    Returns:
        A phrase such as `must be an integer >= 1, got 0`, or None.
    """
    if value is None:
        return None
    if name == "max_tokens":
        if type(value) is not int or value < 1:
            return f"must be an integer >= 1, got {value!r}"
    elif name == "timeout_seconds":
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 < value < math.inf
        ):
            return f"must be a number of seconds > 0, got {value!r}"
    elif not isinstance(value, str) or not value.strip():
        return f"must be a non-empty string, got {value!r}"
    elif name == "base_url" and not _URL.fullmatch(value):
        return f"must be an http:// or https:// URL, got {value!r}"
    elif name == "api_key_env" and not _ENV_NAME.fullmatch(value):
        return f"must name an environment variable (letters, digits, _), got {value!r}"
    return None


def spec_problem(spec: str) -> str | None:
    """Say what is wrong with the form of a model spec, or return None when it is valid.

    Only the form is checked (a known prefix, something after the colon); files, keys and
    adapters are checked when the model is built.

    Args:
        spec: the spec text, e.g. `deepseek:deepseek-chat`.

    Returns:
        A sentence naming the spec and listing the valid forms, or None.
    """
    prefix, sep, rest = spec.partition(":")
    if not sep or prefix not in ("scripted", "replay", *PROVIDERS):
        return f"unknown model spec {spec!r}; valid forms are {_FORMS}"
    if not rest.strip():
        what = "path" if prefix in ("scripted", "replay") else "model"
        return f"model spec {spec!r} names no {what}; valid forms are {_FORMS}"
    return None


@dataclass(frozen=True)
class ProviderSettings:
    """How to reach one provider; every field is optional (None: not set here).

    Args:
        base_url: the API root, e.g. `https://api.deepseek.com`.
        api_key_env: the environment variable holding the API key, instead of the
            provider's own (`DEEPSEEK_API_KEY`, ...).
        max_tokens: the default output token cap (a request's own `max_tokens` wins).
        reasoning_effort: the adapter's effort name (e.g. DeepSeek `off|low|high|max`,
            docs/providers.md#chat-completions-wire); the adapter refuses names it does not know.
        timeout_seconds: the per-request HTTP timeout, in seconds.
        origins: where each set field came from (field name -> e.g. `--max-tokens` or
            `config file /x/config.toml, line 7`), quoted in error messages.

    Raises:
        ConfigError: if a value has the wrong type or range (see `setting_problem`).
    """

    base_url: str | None = None
    api_key_env: str | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    timeout_seconds: float | None = None
    origins: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for name in _SETTING_NAMES:
            problem = setting_problem(name, getattr(self, name))
            if problem is not None:
                raise ConfigError(f"{name} {problem} ({self.origin(name)})")

    def origin(self, name: str) -> str:
        """Return where field `name` was set, for messages.

        Args:
            name: a field name.

        Returns:
            The recorded origin, or `ProviderSettings.<name>` when none was recorded.
        """
        return self.origins.get(name) or f"ProviderSettings.{name}"


_SETTING_NAMES: Final = tuple(f.name for f in fields(ProviderSettings) if f.name != "origins")


def parse_model_spec(
    spec: str,
    *,
    env: Mapping[str, str],
    providers: Mapping[str, ProviderSettings] | None = None,
    overrides: ProviderSettings | None = None,
    read_log: Callable[[str], Sequence[Event]] | None = None,
) -> Model:
    """Build the model a spec names, resolving its settings (precedence in the module doc).

    Args:
        spec: `scripted:PATH`, `replay:PATH`, `openai:MODEL`, `deepseek:MODEL` or
            `anthropic:MODEL`, e.g. `deepseek:deepseek-chat`.
        env: the environment to read API keys and base URLs from (usually `os.environ`).
        providers: per-provider settings by provider name (usually from the config file).
        overrides: settings that win over everything else (usually CLI flags); they only
            apply to the three provider routes.
        read_log: reads a session log file into its events, for `replay:PATH` (the CLI
            passes the store's reader; `llm/` does not read logs itself).

    Returns:
        A `ScriptedModel`, `ReplayModel`, `OpenAIChatModel`, `DeepSeekChatModel` or
        `AnthropicMessagesModel`.

    Raises:
        ConfigError: if the prefix is unknown or the part after the colon is empty; the API
            key variable is unset or empty (the message names it and, when the config file
            chose it, where); a base URL is malformed; `overrides` are given for
            `scripted:`/`replay:`; `replay:` comes without `read_log`; a script or recording
            is malformed; or the adapter refuses a setting (the message says where each
            setting came from).
        Exception: whatever `read_log` raises for `replay:PATH` (the CLI's reader raises
            `ConfigError` for an unreadable path and `CorruptLogError` for a damaged log).
    """
    problem = spec_problem(spec)
    if problem is not None:
        raise ConfigError(problem)
    prefix, _, rest = spec.partition(":")
    if prefix in ("scripted", "replay"):
        _refuse_overrides(spec, overrides)
        if prefix == "scripted":
            return ScriptedModel.from_file(rest)
        if read_log is None:
            raise ConfigError(
                f"model spec {spec!r} needs a log reader: pass `read_log=` (for example "
                "`lambda path: duraloop.store.read_log_file(path)[1]`), or build "
                "`ReplayModel.from_events(...)` yourself"
            )
        return ReplayModel.from_events(read_log(rest), name=rest, path=rest)
    settings = _resolve(prefix, env, (providers or {}).get(prefix), overrides)
    key = _api_key(spec, prefix, env, settings)
    # The adapter options that were set (the adapters' defaults apply to the rest).
    options: dict[str, Any] = {
        name: getattr(settings, name)
        for name in SETTING_OPTIONS
        if getattr(settings, name) is not None
    }
    try:
        return _construct(prefix, rest, api_key=key, options=options)
    except ConfigError as exc:
        used = [f"the API key from `{settings.api_key_env}`"] + [
            f"{name} {value!r} from {settings.origin(name)}" for name, value in options.items()
        ]
        raise ConfigError(f"model {spec!r}: {exc} (settings used: {'; '.join(used)})") from exc


def _construct(provider: str, model: str, *, api_key: str, options: Mapping[str, Any]) -> Model:
    """Import the provider's adapter (deferred: the SDKs are slow to import) and build it."""
    if provider == "openai":
        from ._chat_completions._openai import OpenAIChatModel

        return OpenAIChatModel(model, api_key=api_key, **options)
    if provider == "deepseek":
        from ._chat_completions._deepseek import DeepSeekChatModel

        return DeepSeekChatModel(model, api_key=api_key, **options)
    from ._anthropic._model import AnthropicMessagesModel

    return AnthropicMessagesModel(model, api_key=api_key, **options)


def _resolve(
    provider: str,
    env: Mapping[str, str],
    configured: ProviderSettings | None,
    overrides: ProviderSettings | None,
) -> ProviderSettings:
    """Merge overrides > environment > configured settings, field by field."""
    route = _ROUTES[provider]
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    env_base_url = env.get(route.base_url_env, "").strip()
    for name in _SETTING_NAMES:
        if overrides is not None and getattr(overrides, name) is not None:
            values[name], origins[name] = getattr(overrides, name), overrides.origin(name)
        elif name == "base_url" and env_base_url:
            values[name], origins[name] = env_base_url, f"`{route.base_url_env}`"
        elif configured is not None and getattr(configured, name) is not None:
            values[name], origins[name] = getattr(configured, name), configured.origin(name)
    values.setdefault("api_key_env", route.key_env)
    origins.setdefault("api_key_env", "the default")
    return ProviderSettings(**values, origins=origins)


def _api_key(spec: str, provider: str, env: Mapping[str, str], settings: ProviderSettings) -> str:
    name = settings.api_key_env or _ROUTES[provider].key_env
    value = env.get(name, "").strip()
    if not value:
        chosen = (
            ""
            if name == _ROUTES[provider].key_env
            else (f" (the variable named by api_key_env, {settings.origin('api_key_env')})")
        )
        raise ConfigError(f"model {spec!r} needs an API key: set `{name}`{chosen}. {_KEYLESS_HINT}")
    return value


def _refuse_overrides(spec: str, overrides: ProviderSettings | None) -> None:
    if overrides is None:
        return
    given = [
        overrides.origin(name) for name in _SETTING_NAMES if getattr(overrides, name) is not None
    ]
    if given:
        raise ConfigError(
            f"{', '.join(given)} cannot apply to model {spec!r}: these settings are for "
            f"{', '.join(f'{p}:MODEL' for p in PROVIDERS)} only; drop them"
        )
