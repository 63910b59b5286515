"""parse_model_spec: the CLI's model strings, with errors that say how to fix them (D13)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from duraloop.errors import ConfigError
from duraloop.llm import OpenAIChatModel, ScriptedModel, parse_model_spec


def test_parse_scripted_spec_loads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps([{"text": "hi"}]))
    model = parse_model_spec(f"scripted:{path}", env={})
    assert isinstance(model, ScriptedModel)
    assert (model.provider, model.model) == ("scripted", "script")


@pytest.mark.parametrize(
    ("spec", "var"),
    [("openai:gpt-4o", "OPENAI_API_KEY"), ("deepseek:deepseek-chat", "DEEPSEEK_API_KEY")],
)
def test_parse_spec_without_key_names_the_variable_and_the_keyless_path(
    spec: str, var: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_model_spec(spec, env={var: "  "})
    assert var in str(caught.value)
    assert "duraloop demo" in str(caught.value)
    assert "scripted:PATH" in str(caught.value)


@pytest.mark.parametrize("spec", ["anthropic:claude", "gpt-4o", "openai:"])
def test_parse_unknown_or_empty_spec_lists_the_valid_forms(spec: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_model_spec(spec, env={"OPENAI_API_KEY": "sk-x"})
    for form in ("scripted:PATH", "openai:MODEL", "deepseek:MODEL"):
        assert form in str(caught.value)


@pytest.mark.anyio
async def test_parse_deepseek_spec_uses_deepseek_provider_and_default_base_url() -> None:
    model = parse_model_spec("deepseek:deepseek-chat", env={"DEEPSEEK_API_KEY": "sk-x"})
    assert isinstance(model, OpenAIChatModel)
    try:
        assert (model.provider, model.model) == ("deepseek", "deepseek-chat")
        assert str(model._client.base_url).rstrip("/") == "https://api.deepseek.com"
    finally:
        await model.aclose()
