"""`$DURALOOP_HOME/config.toml` and the CLI's choice of model (issue 5).

Pins the strict validation (an unknown key or provider or a wrong type names the file, the
line and the dotted key; a missing file is fine), the precedence flags > environment >
config file > defaults, and the model fallback `--model` > `DURALOOP_MODEL` >
`default_model`. The line numbers asserted below were counted by hand in the TOML texts.
Library-level tests call `load_config`/`build_model` with explicit env mappings; a few run
the real command line in a subprocess to pin exit codes and stderr (style rule D21).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from duraloop.cli._config import build_model, load_config, read_replay_log
from duraloop.cli._config_file import config_path
from duraloop.errors import ConfigError, UsageError
from duraloop.llm import ScriptedModel, _model_spec
from duraloop.llm._model_spec import ProviderSettings
from duraloop.log import Price

from ._support import Cli, clean_env, ok, session_id_of

EXAMPLE = """\
default_model = "deepseek:deepseek-chat"

[providers.deepseek]
base_url = "https://api.deepseek.com"
api_key_env = "MY_DEEPSEEK_KEY"
max_tokens = 32000
reasoning_effort = "high"

[providers.anthropic]
max_tokens = 8192
timeout_seconds = 30.5
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_config_path_is_under_duraloop_home() -> None:
    assert config_path({"DURALOOP_HOME": "/srv/dl"}) == Path("/srv/dl/config.toml")
    assert config_path({}) == Path.home() / ".duraloop" / "config.toml"


def test_missing_config_file_is_an_empty_config(tmp_path: Path) -> None:
    config = load_config(tmp_path / "absent.toml")
    assert (config.default_model, dict(config.providers)) == (None, {})


def test_example_config_parses_with_origins_naming_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, EXAMPLE)
    config = load_config(path)
    assert config.default_model == "deepseek:deepseek-chat"
    assert config.providers == {
        "deepseek": ProviderSettings(
            base_url="https://api.deepseek.com",
            api_key_env="MY_DEEPSEEK_KEY",
            max_tokens=32000,
            reasoning_effort="high",
        ),
        "anthropic": ProviderSettings(max_tokens=8192, timeout_seconds=30.5),
    }
    deepseek = config.providers["deepseek"]
    assert deepseek.origin("base_url") == f"config file {path}, line 4"
    assert deepseek.origin("reasoning_effort") == f"config file {path}, line 7"
    assert config.providers["anthropic"].origin("timeout_seconds") == f"config file {path}, line 11"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'model = "x:y"\n',
            "line 1: `model` is not a known key; allowed: default_model, providers",
        ),
        (
            "[providers.mistral]\nmax_tokens = 1\n",
            "line 1: `providers.mistral` is not a provider; known: openai, deepseek, anthropic",
        ),
        (
            '\n[providers.openai]\napi_key = "sk-..."\n',
            "line 3: `providers.openai.api_key` is not a known key; allowed: api_key_env, base_url,"
            " max_tokens, reasoning_effort, timeout_seconds",
        ),
        (
            '[providers.deepseek]\nbase_url = "x"\nmax_tokens = "lots"\n',
            "line 2: `providers.deepseek.base_url` must be an http:// or https:// URL, got 'x'",
        ),
        (
            '[providers.deepseek]\nmax_tokens = "lots"\n',
            "line 2: `providers.deepseek.max_tokens` must be an integer >= 1, got 'lots'",
        ),
        (
            "providers.anthropic.timeout_seconds = -1\n",
            "line 1: `providers.anthropic.timeout_seconds` must be a number of seconds > 0, got -1",
        ),
        (
            'providers = "deepseek"\n',
            "line 1: `providers` must be a table of [providers.NAME] tables, got 'deepseek'",
        ),
        ("providers.openai = 3\n", "line 1: `providers.openai` must be a table, got 3"),
        ("default_model = 7\n", "line 1: `default_model` must be a string, got 7"),
        (
            '\n\ndefault_model = "gpt-4o"\n',
            "line 3: `default_model`: unknown model spec 'gpt-4o'; valid forms are scripted:PATH",
        ),
    ],
)
def test_invalid_config_names_file_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"config file {path}, {message}")


def test_config_that_is_not_toml_reports_tomllib_position(tmp_path: Path) -> None:
    path = _write(tmp_path, "[providers.deepseek]\nmax_tokens = = 3\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"config file {path} is not valid TOML: ")
    assert "line 2" in str(caught.value)


def test_config_that_is_a_directory_cannot_be_read(tmp_path: Path) -> None:
    (tmp_path / "config.toml").mkdir()
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "config.toml")


def _home(tmp_path: Path, text: str) -> dict[str, str]:
    _write(tmp_path, text)
    return {"DURALOOP_HOME": str(tmp_path)}


def test_build_model_without_any_model_lists_where_to_set_one(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        build_model(None, env={"DURALOOP_HOME": str(tmp_path)})
    text = str(caught.value)
    for where in (
        "--model SPEC",
        "replay:PATH",
        "anthropic:MODEL",
        "DURALOOP_MODEL",
        f"default_model in {tmp_path / 'config.toml'}",
        "duraloop demo",
    ):
        assert where in text


def test_build_model_falls_back_to_default_model_and_model_wins(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps([{"text": "hi"}]))
    other = tmp_path / "other.json"
    other.write_text(json.dumps([{"text": "yo"}]))
    env = _home(tmp_path, f'default_model = "scripted:{script}"\n')
    chosen = build_model(None, env=env)
    assert isinstance(chosen, ScriptedModel) and chosen.model == "s"
    assert build_model(f"scripted:{other}", env=env).model == "other"


def test_build_model_merges_flags_environment_and_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, str, str, dict[str, Any]]] = []

    def construct(provider: str, model: str, *, api_key: str, options: dict[str, Any]) -> Any:
        seen.append((provider, model, api_key, options))
        return ScriptedModel([])

    monkeypatch.setattr(_model_spec, "_construct", construct)
    env = _home(tmp_path, EXAMPLE) | {
        "MY_DEEPSEEK_KEY": "sk-mine",
        "DEEPSEEK_API_KEY": "sk-not-this",
    }
    build_model(None, env=env)
    assert seen[-1] == (
        "deepseek",
        "deepseek-chat",
        "sk-mine",
        {"base_url": "https://api.deepseek.com", "max_tokens": 32000, "reasoning_effort": "high"},
    )
    build_model(
        None,
        env=env | {"DEEPSEEK_BASE_URL": "http://127.0.0.1:1"},
        max_tokens=50,
        reasoning_effort="off",
    )
    assert seen[-1][3] == {
        "base_url": "http://127.0.0.1:1",
        "max_tokens": 50,
        "reasoning_effort": "off",
    }
    build_model(
        "anthropic:claude-x",
        env=env | {"ANTHROPIC_API_KEY": "sk-a"},
        base_url="https://flag.example",
    )
    assert seen[-1] == (
        "anthropic",
        "claude-x",
        "sk-a",
        {"base_url": "https://flag.example", "max_tokens": 8192, "timeout_seconds": 30.5},
    )


def test_build_model_refuses_provider_flags_for_a_scripted_model(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text("[]")
    with pytest.raises(
        ConfigError, match=r"^--max-tokens, --reasoning-effort cannot apply to model 'scripted:"
    ):
        build_model(
            f"scripted:{script}",
            env={"DURALOOP_HOME": str(tmp_path)},
            max_tokens=5,
            reasoning_effort="low",
        )


def test_build_model_names_the_bad_flag(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError,
        match=r"^base_url must be an http:// or https:// URL, got 'localhost:8080' \(--base-url\)$",
    ):
        build_model(
            "openai:gpt-4o", env={"DURALOOP_HOME": str(tmp_path)}, base_url="localhost:8080"
        )


def test_read_replay_log_accepts_a_session_folder_and_explains_a_missing_path(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError) as caught:
        read_replay_log(str(tmp_path / "nope.jsonl"))
    assert "cannot read the session log" in str(caught.value)
    assert "No such file or directory" in str(caught.value)
    with pytest.raises(
        ConfigError, match="the folder holds no session.jsonl or session.jsonl.zstd"
    ):
        read_replay_log(str(tmp_path))


# The real command line: exit codes and the one-line error on stderr.


def _env(cli: Cli) -> dict[str, str]:
    env = clean_env(cli.tmp)
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "DEEPSEEK_BASE_URL", "MY_DEEPSEEK_KEY"):
        env.pop(name, None)
    return env


def test_cli_run_uses_default_model_from_config(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    spec = cli.script([{"text": "configured model speaking"}])
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'default_model = "{spec}"\n', encoding="utf-8")
    result = ok(cli("run", "hello", env=_env(cli)))
    assert "configured model speaking" in result.stdout
    assert session_id_of(result)


def test_cli_run_with_missing_key_from_config_exits_1_naming_the_variable(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(EXAMPLE, encoding="utf-8")
    result = cli("run", "hello", env=_env(cli))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(
        "ConfigError: model 'deepseek:deepseek-chat' needs an API key: set `MY_DEEPSEEK_KEY`"
    )
    assert f"config file {home / 'config.toml'}, line 5" in result.stderr


def test_cli_bad_config_file_exits_1_naming_file_and_line(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[providers.deepseek]\nmax_token = 5\n", encoding="utf-8")
    result = cli("chat", "--model", "deepseek:deepseek-chat", env=_env(cli))
    assert result.returncode == 1
    assert result.stdout == ""
    assert "ConfigError: config file" in result.stderr
    assert "line 2: `providers.deepseek.max_token` is not a known key" in result.stderr


def test_cli_max_tokens_below_one_is_a_usage_error(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    result = cli(
        "run", "hello", "--model", "deepseek:deepseek-chat", "--max-tokens", "0", env=_env(cli)
    )
    assert result.returncode == 2
    assert "--max-tokens" in result.stderr


def test_cli_resume_with_a_provider_flag_on_a_scripted_model_exits_1(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    session = session_id_of(
        ok(cli("run", "hi", "--model", cli.script([{"text": "one"}]), env=_env(cli)))
    )
    result = cli(
        "resume",
        session,
        "again",
        "--model",
        cli.script([{"text": "two"}]),
        "--reasoning-effort",
        "high",
        env=_env(cli),
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert "ConfigError: --reasoning-effort cannot apply to model 'scripted:" in result.stderr


def test_readme_config_example_is_valid(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    blocks = [block.split("```", 1)[0] for block in readme.split("```toml\n")[1:]]
    assert len(blocks) == 3, "the README holds three toml examples: prices, providers, MCP"
    prices = load_config(_write(tmp_path, blocks[0])).prices
    assert prices == {
        "deepseek:deepseek-chat": Price(
            input_per_mtok=0.27, output_per_mtok=1.10, cache_read_per_mtok=0.07
        )
    }
    config = load_config(_write(tmp_path, blocks[1]))
    assert config.default_model == "deepseek:deepseek-chat"
    assert config.providers["deepseek"] == ProviderSettings(
        base_url="https://api.deepseek.com",
        api_key_env="MY_DEEPSEEK_KEY",
        max_tokens=32000,
        reasoning_effort="high",
        timeout_seconds=600,
    )
    assert config.providers["anthropic"] == ProviderSettings(max_tokens=8192)
    notes = load_config(_write(tmp_path, blocks[2])).mcp_servers["notes"]
    assert notes.command == ("python", "notes_server.py")
    assert dict(notes.env) == {"NOTES_DIR": "/srv/notes"}
    assert notes.timeout == 60
    assert dict(notes.parallel) == {"search": True}
