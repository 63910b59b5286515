"""One output cap for every tool (issue 9 item 18) and the honest cancellation outcomes (item 5).

`capped` is pinned on its own (byte counts, characters never split, non-text blocks), then
through a real loop: a custom tool returning 10 MB is capped in the `tool/result` and so in
every later request, by the loop's default, by `LoopConfig.max_tool_output_bytes` and by
`@tool(max_output_bytes=...)`, with the same note `bash` writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from duraloop.errors import ConfigError, ToolDefinitionError
from duraloop.llm import ScriptedModel
from duraloop.log import Session
from duraloop.log.vocabulary import (
    ABORTED_AFTER_COMPLETION_TEXT,
    ABORTED_ERROR,
    INVALID_TOOL_OUTPUT_ERROR,
)
from duraloop.loop import AgentLoop, LoopConfig
from duraloop.tools import tool
from duraloop.tools._outcome import (
    DEFAULT_MAX_OUTPUT_BYTES,
    OUTPUT_NOTE_ROOM_BYTES,
    ToolOutcome,
    capped,
    checked_outcome,
    truncation_note,
)

TEN_MB = 10 * 1024 * 1024


def test_capped_leaves_output_within_the_cap_and_its_note_room_alone() -> None:
    outcome = ToolOutcome.ok("a" * (1000 + OUTPUT_NOTE_ROOM_BYTES))
    assert capped(outcome, 1000) is outcome


def test_capped_keeps_max_bytes_then_the_truncation_note() -> None:
    outcome = capped(ToolOutcome.ok("a" * 5000), 1000)
    assert outcome.text == "a" * 1000 + "\n" + truncation_note(4000)
    assert truncation_note(4000) == "[truncated: 4000 more bytes of output]"


def test_capped_never_splits_a_character() -> None:
    outcome = capped(ToolOutcome.ok("é" * 3000), 1001)  # 2 bytes each
    kept, note = outcome.text.split("\n")
    assert kept == "é" * 500
    assert note == truncation_note(6000 - 1000)


def test_capped_drops_later_blocks_past_the_cap_and_counts_them() -> None:
    image = {"type": "image", "data": "x" * 3000, "mimeType": "image/png"}
    outcome = capped(ToolOutcome.ok([{"type": "text", "text": "b" * 1500}, image]), 1000)
    assert outcome.content == [
        {
            "type": "text",
            "text": "b" * 1000
            + "\n"
            + truncation_note(
                1500
                + len('{"type":"image","data":"' + "x" * 3000 + '","mimeType":"image/png"}')
                - 1000
            ),
        }
    ]


def test_capped_keeps_an_error_and_its_info() -> None:
    failure = ToolOutcome.failure("x" * 5000, error={"name": "ToolError", "code": "X"})
    outcome = capped(failure, 1000)
    assert outcome.is_error and outcome.error == {"name": "ToolError", "code": "X"}
    assert len(outcome.text.encode()) <= 1000 + OUTPUT_NOTE_ROOM_BYTES


def test_aborted_after_completion_keeps_code_meta_and_blocks() -> None:
    done = ToolOutcome.ok([{"type": "image", "data": "AA", "mimeType": "image/png"}], meta={"n": 1})
    outcome = ToolOutcome.aborted_after_completion(done)
    assert outcome.error == ABORTED_ERROR and outcome.meta == {"n": 1}
    assert outcome.content == [
        {"type": "text", "text": ABORTED_AFTER_COMPLETION_TEXT},
        *done.content,
    ]


@tool
async def flood() -> str:
    """Return ten megabytes."""
    return "z" * TEN_MB


@tool(max_output_bytes=4096)
async def small_flood() -> str:
    """Return ten megabytes, capped at 4 KB by the tool itself."""
    return "z" * TEN_MB


def _tool_result_text(event: Any) -> str:
    (block,) = event.data["message"]["content"]
    return "".join(part["text"] for part in block["content"])


async def _run_calls(
    tmp_path: Path, name: str, config: LoopConfig | None = None
) -> tuple[str, ScriptedModel]:
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"id": "f1", "name": name, "arguments": {}}]},
        {"text": "seen"},
    ]
    model = ScriptedModel(script)
    session = Session("s")
    loop = AgentLoop(session, model=model, tools=[flood, small_flood], cwd=tmp_path, config=config)
    await loop.run_turn("go")
    (result,) = [e for e in session.events if e.type == "tool/result"]
    return _tool_result_text(result), model


def _request_tool_text(model: ScriptedModel) -> str:
    last = model.requests[-1].messages[-1]
    (block,) = last["content"]
    return "".join(part["text"] for part in block["content"])


@pytest.mark.anyio
async def test_custom_tool_returning_10_mb_is_capped_in_the_log_and_the_request(
    tmp_path: Path,
) -> None:
    text, model = await _run_calls(tmp_path, "flood")
    assert text == "z" * DEFAULT_MAX_OUTPUT_BYTES + "\n" + truncation_note(
        TEN_MB - DEFAULT_MAX_OUTPUT_BYTES
    )
    assert _request_tool_text(model) == text


@pytest.mark.anyio
async def test_loop_config_sets_the_cap_for_every_tool(tmp_path: Path) -> None:
    text, _model = await _run_calls(tmp_path, "flood", LoopConfig(max_tool_output_bytes=2048))
    assert text == "z" * 2048 + "\n" + truncation_note(TEN_MB - 2048)


@pytest.mark.anyio
async def test_tool_max_output_bytes_wins_over_the_loop_cap(tmp_path: Path) -> None:
    text, _model = await _run_calls(tmp_path, "small_flood", LoopConfig(max_tool_output_bytes=2048))
    assert text == "z" * 4096 + "\n" + truncation_note(TEN_MB - 4096)


@pytest.mark.parametrize("bad", [0, 255, 1.5, "1024", True])
def test_tool_refuses_an_output_cap_below_256_or_not_an_int(bad: Any) -> None:
    with pytest.raises(ToolDefinitionError, match="max_output_bytes must be an integer >= 256"):
        tool(max_output_bytes=bad)(flood_body)


@pytest.mark.parametrize("bad", [0, 255, 1.5, None])
def test_loop_config_refuses_an_output_cap_below_256(bad: Any) -> None:
    with pytest.raises(ConfigError, match="loop.max_tool_output_bytes must be an integer >= 256"):
        LoopConfig(max_tool_output_bytes=bad)


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), "5"])
def test_loop_config_refuses_a_cancel_grace_that_is_not_positive(bad: Any) -> None:
    with pytest.raises(ConfigError, match="loop.tool_cancel_grace_seconds must be a number > 0"):
        LoopConfig(tool_cancel_grace_seconds=bad)


def flood_body() -> str:
    """Return nothing much."""
    return ""


def test_checked_outcome_of_text_blocks_copies_them_and_repairs_surrogates() -> None:
    # The fast path for text-only content (the common result) must do what the general
    # check does: a copy the tool can no longer change, and lone surrogates made U+FFFD.
    blocks: list[Any] = [{"type": "text", "text": "a\ud800b"}, {"type": "text", "text": "ok"}]
    outcome = ToolOutcome(is_error=False, content=blocks, concludes_turn=True)
    checked = checked_outcome(outcome)
    assert checked.content == [
        {"type": "text", "text": "a\ufffdb"},
        {"type": "text", "text": "ok"},
    ]
    blocks[1]["text"] = "changed"
    assert checked.content[1]["text"] == "ok"
    assert checked.concludes_turn and not checked.is_error


@pytest.mark.parametrize(
    "content",
    [
        [{"type": "text", "text": "a", "x": float("inf")}],
        [{"type": "text", "text": float("nan")}],
        [{"type": "image", "text": "no"}, "not a block"],
    ],
)
def test_checked_outcome_outside_the_fast_path_still_rejects_what_is_not_storable(
    content: list[Any],
) -> None:
    checked = checked_outcome(ToolOutcome(is_error=False, content=content))
    assert checked.is_error and checked.error is not None
    assert checked.error == INVALID_TOOL_OUTPUT_ERROR
