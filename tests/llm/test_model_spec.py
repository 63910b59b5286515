"""parse_model_spec: the model strings, settings precedence, and errors that say how to fix them.

Issue 5 fixes the precedence (flags > environment > config file > defaults) and style rule D13/D23
the error shape (name the variable or origin and the fix). The resolution is observed by
replacing the adapter constructor with a recorder, so these tests pin the merge itself and
do not depend on adapter internals; a few tests build the real adapters (no network: a
constructor makes no request).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from duraloop.errors import ConfigError
from duraloop.llm import Model, ScriptedModel, _model_spec, parse_model_spec
from duraloop.llm._model_spec import ProviderSettings, setting_problem, spec_problem
from duraloop.llm._replay import ReplayModel
from duraloop.log import Event, Session, assistant_message, user_message

FORMS = ("scripted:PATH", "replay:PATH", "openai:MODEL", "deepseek:MODEL", "anthropic:MODEL")
KEYS = {
    "openai": "OPENAI_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}


class _Built:
    provider = "recorded"
    model = "recorded"

    def __init__(self, provider: str, model: str, api_key: str, options: dict[str, Any]) -> None:
        self.args = (provider, model, api_key, options)


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[_Built]]:
    """Replace the adapter constructors with a recorder of what they would get."""
    calls: list[_Built] = []

    def construct(provider: str, model: str, *, api_key: str, options: dict[str, Any]) -> Any:
        calls.append(_Built(provider, model, api_key, options))
        return calls[-1]

    monkeypatch.setattr(_model_spec, "_construct", construct)
    yield calls


def test_parse_scripted_spec_loads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps([{"text": "hi"}]))
    model = parse_model_spec(f"scripted:{path}", env={})
    assert isinstance(model, ScriptedModel)
    assert (model.provider, model.model) == ("scripted", "script")


def _log() -> list[Event]:
    session = Session("s")
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user_message("go"), surface_op="append")
    session.append("step/start", {"turn": 1, "step": 1})
    answer = assistant_message([{"type": "text", "text": "hi"}], provider="p", model="m")
    session.append(
        "assistant/message", {"turn": 1, "step": 1, "message": answer}, surface_op="append"
    )
    return list(session.events)


def test_parse_replay_spec_reads_the_log_through_the_given_reader() -> None:
    asked: list[str] = []

    def read_log(path: str) -> list[Event]:
        asked.append(path)
        return _log()

    model = parse_model_spec("replay:logs/s.jsonl", env={}, read_log=read_log)
    assert isinstance(model, ReplayModel)
    assert asked == ["logs/s.jsonl"]
    assert (model.provider, model.model, model.recorded_count) == ("replay", "logs/s.jsonl", 1)


def test_parse_replay_spec_without_a_reader_says_how_to_get_one() -> None:
    with pytest.raises(ConfigError, match="needs a log reader: pass `read_log=`"):
        parse_model_spec("replay:x.jsonl", env={})


@pytest.mark.parametrize("provider", sorted(KEYS))
def test_parse_spec_without_key_names_the_variable_and_the_keyless_path(provider: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_model_spec(f"{provider}:m", env={KEYS[provider]: "  "})
    text = str(caught.value)
    assert f"set `{KEYS[provider]}`" in text
    assert "duraloop demo" in text
    assert "scripted:PATH" in text


def test_parse_spec_with_configured_key_variable_reads_only_that_variable(
    built: list[_Built],
) -> None:
    settings = ProviderSettings(
        api_key_env="MY_KEY", origins={"api_key_env": "config file c.toml, line 3"}
    )
    with pytest.raises(ConfigError) as caught:
        parse_model_spec(
            "deepseek:m", env={"DEEPSEEK_API_KEY": "sk-default"}, providers={"deepseek": settings}
        )
    assert "set `MY_KEY` (the variable named by api_key_env, config file c.toml, line 3)" in str(
        caught.value
    )
    parse_model_spec("deepseek:m", env={"MY_KEY": " sk-mine "}, providers={"deepseek": settings})
    assert built[0].args[2] == "sk-mine"


@pytest.mark.parametrize("spec", ["claude:opus", "gpt-4o", "openai:", "replay: ", "scripted:"])
def test_parse_unknown_or_empty_spec_lists_the_valid_forms(spec: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_model_spec(spec, env={"OPENAI_API_KEY": "sk-x"})
    for form in FORMS:
        assert form in str(caught.value)
    assert spec_problem(spec) == str(caught.value)


def test_spec_problem_accepts_every_form() -> None:
    for spec in (
        "scripted:a.json",
        "replay:a.jsonl",
        "openai:gpt-4o",
        "deepseek:deepseek-chat",
        "anthropic:claude-x",
    ):
        assert spec_problem(spec) is None


def test_flags_beat_environment_beat_config_beat_defaults(built: list[_Built]) -> None:
    config = ProviderSettings(
        base_url="https://config.example/v1",
        max_tokens=32000,
        reasoning_effort="low",
        timeout_seconds=30,
        origins={"base_url": "config", "max_tokens": "config"},
    )
    flags = ProviderSettings(max_tokens=100, origins={"max_tokens": "--max-tokens"})
    env = {"DEEPSEEK_API_KEY": "sk-x", "DEEPSEEK_BASE_URL": "http://127.0.0.1:9/env"}
    parse_model_spec(
        "deepseek:deepseek-chat", env=env, providers={"deepseek": config}, overrides=flags
    )
    assert built[-1].args == (
        "deepseek",
        "deepseek-chat",
        "sk-x",
        {
            "base_url": "http://127.0.0.1:9/env",
            "max_tokens": 100,
            "reasoning_effort": "low",
            "timeout_seconds": 30,
        },
    )
    # Without the environment's base URL the config file's applies; a flag beats both.
    parse_model_spec(
        "deepseek:deepseek-chat", env={"DEEPSEEK_API_KEY": "sk-x"}, providers={"deepseek": config}
    )
    from_config = built[-1].args[3]["base_url"]
    flag_url = ProviderSettings(base_url="https://flag.example")
    parse_model_spec(
        "deepseek:deepseek-chat", env=env, providers={"deepseek": config}, overrides=flag_url
    )
    from_flag = built[-1].args[3]["base_url"]
    assert (from_config, from_flag) == ("https://config.example/v1", "https://flag.example")
    # Settings of another provider never leak in; defaults are left to the adapter.
    parse_model_spec(
        "openai:gpt-4o", env={"OPENAI_API_KEY": "sk-o"}, providers={"deepseek": config}
    )
    assert built[-1].args == ("openai", "gpt-4o", "sk-o", {})


def test_adapter_refusal_says_where_each_setting_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(provider: str, model: str, *, api_key: str, options: dict[str, Any]) -> Model:
        raise ConfigError(f"unknown reasoning effort {options['reasoning_effort']!r}")

    monkeypatch.setattr(_model_spec, "_construct", refuse)
    config = ProviderSettings(
        reasoning_effort="huge", origins={"reasoning_effort": "config file c.toml, line 9"}
    )
    with pytest.raises(ConfigError) as caught:
        parse_model_spec(
            "deepseek:m", env={"DEEPSEEK_API_KEY": "k"}, providers={"deepseek": config}
        )
    assert str(caught.value) == (
        "model 'deepseek:m': unknown reasoning effort 'huge' (settings used: the API key from "
        "`DEEPSEEK_API_KEY`; reasoning_effort 'huge' from config file c.toml, line 9)"
    )


@pytest.mark.parametrize("spec", ["scripted:s.json", "replay:s.jsonl"])
def test_provider_flags_on_keyless_models_are_refused_naming_the_flag(spec: str) -> None:
    flags = ProviderSettings(
        max_tokens=5,
        base_url="https://x.example",
        origins={"max_tokens": "--max-tokens", "base_url": "--base-url"},
    )
    with pytest.raises(ConfigError) as caught:
        parse_model_spec(spec, env={}, overrides=flags, read_log=lambda path: _log())
    assert str(caught.value).startswith(f"--base-url, --max-tokens cannot apply to model {spec!r}")


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("max_tokens", 0, "must be an integer >= 1, got 0"),
        ("max_tokens", True, "must be an integer >= 1, got True"),
        ("max_tokens", "8", "must be an integer >= 1, got '8'"),
        ("timeout_seconds", 0, "must be a number of seconds > 0, got 0"),
        ("timeout_seconds", float("nan"), "must be a number of seconds > 0, got nan"),
        (
            "base_url",
            "api.deepseek.com",
            "must be an http:// or https:// URL, got 'api.deepseek.com'",
        ),
        ("base_url", " ", "must be a non-empty string, got ' '"),
        (
            "api_key_env",
            "MY-KEY",
            "must name an environment variable (letters, digits, _), got 'MY-KEY'",
        ),
        ("reasoning_effort", 3, "must be a non-empty string, got 3"),
    ],
)
def test_setting_problem_names_the_bad_value(name: str, value: object, problem: str) -> None:
    assert setting_problem(name, value) == problem
    with pytest.raises(ConfigError) as caught:
        ProviderSettings(**{name: value})  # type: ignore[arg-type]
    assert str(caught.value) == f"{name} {problem} (ProviderSettings.{name})"


def test_setting_problem_accepts_valid_values() -> None:
    for name, value in [
        ("max_tokens", 1),
        ("timeout_seconds", 0.5),
        ("base_url", "http://127.0.0.1:8080/v1"),
        ("api_key_env", "MY_KEY_2"),
        ("reasoning_effort", "high"),
        ("max_tokens", None),
    ]:
        assert setting_problem(name, value) is None


@pytest.mark.anyio
async def test_parse_openai_spec_builds_the_sdk_adapter_with_the_env_base_url() -> None:
    from duraloop.llm import OpenAIChatModel

    model = parse_model_spec(
        "openai:gpt-4o", env={"OPENAI_API_KEY": "sk-x", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}
    )
    assert isinstance(model, OpenAIChatModel)
    try:
        assert (model.provider, model.model) == ("openai", "gpt-4o")
        assert str(model._client.base_url).rstrip("/") == "http://127.0.0.1:1/v1"
    finally:
        await model.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("provider", "module", "cls"),
    [
        ("deepseek", "duraloop.llm._chat_completions", "DeepSeekChatModel"),
        ("anthropic", "duraloop.llm._anthropic", "AnthropicMessagesModel"),
    ],
)
async def test_parse_provider_spec_builds_its_adapter(provider: str, module: str, cls: str) -> None:
    adapter = getattr(pytest.importorskip(module), cls)
    model = parse_model_spec(
        f"{provider}:m-1", env={KEYS[provider]: "sk-x"}, overrides=ProviderSettings(max_tokens=64)
    )
    assert isinstance(model, adapter)
    try:
        assert (model.provider, model.model) == (provider, "m-1")
    finally:
        await model.aclose()


@pytest.mark.parametrize("provider", sorted(KEYS))
def test_real_adapter_refusing_a_configured_effort_names_the_config_line(provider: str) -> None:
    config = ProviderSettings(
        reasoning_effort="huge", origins={"reasoning_effort": "config file c.toml, line 9"}
    )
    with pytest.raises(ConfigError) as caught:
        parse_model_spec(
            f"{provider}:m", env={KEYS[provider]: "sk-x"}, providers={provider: config}
        )
    text = str(caught.value)
    assert text.startswith(f"model '{provider}:m': unknown ")
    assert "'huge'" in text
    assert text.endswith(
        f"(settings used: the API key from `{KEYS[provider]}`; reasoning_effort 'huge' from config "
        "file c.toml, line 9)"
    )


def test_malformed_base_url_from_the_environment_names_the_variable(built: list[_Built]) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_model_spec(
            "anthropic:m", env={"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "api.example"}
        )
    assert (
        str(caught.value)
        == "base_url must be an http:// or https:// URL, got 'api.example' (`ANTHROPIC_BASE_URL`)"
    )
    assert built == []
