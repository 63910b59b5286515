"""`[compaction]` and `[context_windows]` in config.toml (src/duraloop/cli/_compaction_file.py).

See docs/compaction.md#when. Each key becomes a field of `CompactionConfig` (or of its
`PrunerConfig`); a bad value is refused with the file, the line and the dotted key, so a
user finds it at once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from duraloop.cli._config import load_config
from duraloop.errors import ConfigError
from duraloop.log import PrunerConfig
from duraloop.loop import CompactionConfig

FULL = """\
[compaction]
auto = false
threshold_ratio = 0.7
retain_tokens = 4000
keep_turns = 2
max_tokens = 1024
compaction_retries = 2
max_overflow_retries = 0

[compaction.pruner]
threshold_chars = 2000
head_chars = 500
tail_chars = 100

[context_windows]
"deepseek:deepseek-chat" = 65536
"openai:my-finetune" = 16000
"""


def _load(tmp_path: Path, text: str) -> CompactionConfig | None:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path).compaction


def test_every_key_becomes_a_field_of_compaction_config(tmp_path: Path) -> None:
    config = _load(tmp_path, FULL)
    assert config is not None
    assert (config.auto, config.threshold_ratio, config.retain_tokens) == (False, 0.7, 4000)
    assert (config.keep_turns, config.max_tokens) == (2, 1024)
    assert (config.compaction_retries, config.max_overflow_retries) == (2, 0)
    assert config.pruner == PrunerConfig(threshold_chars=2000, head_chars=500, tail_chars=100)
    assert dict(config.context_windows) == {
        "deepseek:deepseek-chat": 65536,
        "openai:my-finetune": 16000,
    }


def test_without_the_tables_the_loop_default_applies(tmp_path: Path) -> None:
    assert _load(tmp_path, 'default_model = "deepseek:deepseek-chat"\n') is None


def test_context_windows_alone_keep_the_default_compaction(tmp_path: Path) -> None:
    config = _load(tmp_path, '[context_windows]\n"anthropic:claude-x" = 1000\n')
    assert config == CompactionConfig(context_windows={"anthropic:claude-x": 1000})


def test_pruner_false_turns_the_pruner_off(tmp_path: Path) -> None:
    config = _load(tmp_path, "[compaction]\npruner = false\n")
    assert config is not None and config.pruner is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[compaction]\nthreshold_rato = 0.5\n", "line 2: `compaction.threshold_rato`"),
        (
            "\n[compaction]\nthreshold_ratio = 1.5\n",
            "line 3: compaction.threshold_ratio must be a number in (0, 1], got 1.5",
        ),
        (
            "[compaction]\nretain_ratio = 0.1\nretain_tokens = 10\n",
            "line 2: compaction.retain_ratio and compaction.retain_tokens are alternatives",
        ),
        ("[compaction]\npruner = 3\n", "line 2: `compaction.pruner` must be a [compaction.pruner]"),
        (
            "[compaction.pruner]\nhead = 3\n",
            "line 2: `compaction.pruner.head` is not a known key",
        ),
        ("compaction = 1\n", "line 1: `compaction` must be a table, got 1"),
        (
            '[context_windows]\n"deepseek-chat" = 1000\n',
            '`context_windows.deepseek-chat` must name a model as "provider:model"',
        ),
        (
            '[context_windows]\n"openai:m" = 0\n',
            "`context_windows.openai:m` must be an integer number of tokens >= 1, got 0",
        ),
    ],
)
def test_a_bad_compaction_value_names_the_file_line_and_key(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, text)
    assert message in str(caught.value)
    assert str(tmp_path / "config.toml") in str(caught.value)
