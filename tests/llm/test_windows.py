"""Context windows: `context_window_of` and the adapters' `context_window=` argument.

See docs/compaction.md#when (src/duraloop/llm/_windows.py). The lookup order is the
caller's table (`CompactionConfig.context_windows`, `[context_windows]` in config.toml),
then the model's own `context_window`, then a built-in table of well-known models, else
None (pressure compaction is then off: compaction-spec case C5).
"""

from __future__ import annotations

import pytest

from duraloop.errors import ConfigError
from duraloop.llm import ScriptedModel, context_window_of
from duraloop.llm._anthropic import AnthropicMessagesModel
from duraloop.llm._chat_completions import DeepSeekChatModel, OpenAIChatModel


class Named(ScriptedModel):
    """A scripted model answering as another route and model id (the lookup reads only those)."""

    def __init__(self, provider: str, model: str, window: int | None = None) -> None:
        super().__init__([], context_window=window)
        self.provider = provider
        self.model = model


def test_the_callers_table_wins_over_the_model_and_the_built_in_table() -> None:
    model = Named("deepseek", "deepseek-chat", window=5000)
    assert context_window_of(model, {"deepseek:deepseek-chat": 7000}) == 7000
    assert context_window_of(model, {"deepseek:other": 7000}) == 5000
    assert context_window_of(Named("deepseek", "deepseek-chat")) == 131072


@pytest.mark.parametrize(
    ("provider", "model", "window"),
    [
        ("deepseek", "deepseek-reasoner", 131072),
        ("openai", "gpt-4o-mini-2024-07-18", 128000),
        ("openai", "gpt-4.1-nano", 1047576),
        ("openai", "gpt-5-chat-latest", 128000),
        ("openai", "gpt-5.1", 400000),
        ("anthropic", "claude-sonnet-4-5", 200000),
        ("openai", "claude-sonnet-4-5", None),
        ("deepseek", "deepseek-chat-v9", None),
        ("scripted", "scripted", None),
    ],
)
def test_the_built_in_table_matches_route_and_id(
    provider: str, model: str, window: int | None
) -> None:
    assert context_window_of(Named(provider, model)) == window


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "8000"])
def test_a_table_entry_that_is_not_a_positive_integer_names_the_model(bad: object) -> None:
    with pytest.raises(ConfigError) as caught:
        context_window_of(Named("openai", "m"), {"openai:m": bad})  # type: ignore[dict-item]
    assert str(caught.value) == (
        "the context window of openai:m (context_windows) must be an integer number of "
        f"tokens >= 1, got {bad!r}"
    )


@pytest.mark.anyio
async def test_the_adapters_report_their_context_window_argument() -> None:
    openai = OpenAIChatModel("m", api_key="sk-test", context_window=1000)
    deepseek = DeepSeekChatModel("deepseek-chat", api_key="sk-test", context_window=2000)
    anthropic = AnthropicMessagesModel("claude-x", api_key="sk-ant-test", context_window=3000)
    try:
        assert [context_window_of(m) for m in (openai, deepseek, anthropic)] == [1000, 2000, 3000]
    finally:
        for model in (openai, deepseek, anthropic):
            await model.aclose()


@pytest.mark.parametrize("bad", [0, False, 2.0])
def test_an_adapter_refuses_a_context_window_that_is_not_a_positive_integer(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"context_window must be an integer number of tokens"):
        OpenAIChatModel("m", api_key="sk-test", context_window=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"context_window must be an integer number of tokens"):
        ScriptedModel([], context_window=bad)  # type: ignore[arg-type]
