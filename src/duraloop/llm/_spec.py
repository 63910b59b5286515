"""Model specs: the `PROVIDER:NAME` strings the CLI accepts, turned into models.

Environment values are read only here, from the mapping the caller passes (STYLE D23).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ..errors import ConfigError
from ._model import Model
from ._openai import OpenAIChatModel
from ._scripted import ScriptedModel

DEEPSEEK_BASE_URL: Final = "https://api.deepseek.com"

_FORMS: Final = (
    "scripted:PATH (a JSON list of scripted responses, no key needed), "
    "openai:MODEL (needs OPENAI_API_KEY; optional OPENAI_BASE_URL), "
    "deepseek:MODEL (needs DEEPSEEK_API_KEY; optional DEEPSEEK_BASE_URL)"
)
_KEYLESS_HINT: Final = (
    "To try duraloop without a key, run `duraloop demo` or use `--model scripted:PATH`."
)


def parse_model_spec(spec: str, *, env: Mapping[str, str]) -> Model:
    """Build the model a CLI spec names.

    Forms: `scripted:PATH`, `openai:MODEL` (`OPENAI_API_KEY`, optional `OPENAI_BASE_URL`),
    `deepseek:MODEL` (`DEEPSEEK_API_KEY`, optional `DEEPSEEK_BASE_URL`, default
    `https://api.deepseek.com`).

    Args:
        spec: the spec string, e.g. `deepseek:deepseek-chat`.
        env: the environment to read keys and base URLs from (usually `os.environ`).

    Returns:
        A `ScriptedModel` or an `OpenAIChatModel`.

    Raises:
        ConfigError: if the prefix is unknown, the part after the colon is empty, the API
            key variable is unset or empty (the message names it), or the script is malformed.
    """
    prefix, sep, rest = spec.partition(":")
    if not sep or prefix not in ("scripted", "openai", "deepseek"):
        raise ConfigError(f"unknown model spec {spec!r}; valid forms are {_FORMS}")
    if not rest.strip():
        raise ConfigError(
            f"model spec {spec!r} names no {'path' if prefix == 'scripted' else 'model'}; "
            f"valid forms are {_FORMS}"
        )
    if prefix == "scripted":
        return ScriptedModel.from_file(rest)
    if prefix == "openai":
        key = _key(env, "OPENAI_API_KEY", spec)
        return OpenAIChatModel(rest, api_key=key, base_url=env.get("OPENAI_BASE_URL") or None)
    key = _key(env, "DEEPSEEK_API_KEY", spec)
    return OpenAIChatModel(
        rest,
        api_key=key,
        base_url=env.get("DEEPSEEK_BASE_URL") or DEEPSEEK_BASE_URL,
        provider="deepseek",
    )


def _key(env: Mapping[str, str], name: str, spec: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise ConfigError(f"model {spec!r} needs an API key: set `{name}`. {_KEYLESS_HINT}")
    return value
