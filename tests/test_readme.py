"""The README's examples run as written and print what their `#>` lines say (style rule D16).

The library example runs on a scripted model; the provider example runs its real
`AnthropicMessagesModel` against the wire-level Messages server of `tests/llm`, which checks
every request. The quick start is checked for what a new user on a PEP 668 system needs.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from llm._wire_anthropic import AnthropicWireServer, text_reply

README = Path(__file__).resolve().parents[1] / "README.md"
CI = Path(__file__).resolve().parents[1] / ".ci" / "run"


def _section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    return text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def _library_examples() -> list[str]:
    blocks = re.findall(
        r"^```python\n(.*?)^```", _section("Library example"), re.DOTALL | re.MULTILINE
    )
    assert len(blocks) == 2, (
        "the Library example section holds the scripted and the provider example"
    )
    return [str(block) for block in blocks]


def _expected(code: str) -> list[str]:
    expected = [
        line.removeprefix("#>").strip() for line in code.splitlines() if line.startswith("#>")
    ]
    assert expected, "the example documents its output with #> lines"
    return expected


def _run(
    code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> list[str]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the example's mkdtemp() lands here
    exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})
    return [line.strip() for line in capsys.readouterr().out.splitlines()]


def test_library_example_prints_its_documented_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _library_examples()[0]
    assert _run(code, tmp_path, monkeypatch, capsys) == _expected(code)


def test_provider_example_runs_a_turn_on_the_wire_level_messages_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _library_examples()[1]
    with AnthropicWireServer.running() as server:
        server.queue_events(text_reply("Hello from Claude."))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        printed = _run(code, tmp_path, monkeypatch, capsys)
        assert server.take_violations() == []
        assert len(server.requests) == 1
    assert printed == _expected(code)
    assert list((tmp_path / ".sessions").glob("*/*/session.jsonl"))


def test_quick_start_installs_into_a_virtual_environment_in_two_commands() -> None:
    blocks = re.findall(r"^```bash\n(.*?)^```", _section("Quick start"), re.DOTALL | re.MULTILINE)
    assert len(blocks) == 1
    commands = str(blocks[0]).strip().splitlines()
    assert len(commands) == 2 and commands[1] == "pytest"
    steps = [step.strip() for step in commands[0].split("&&")]
    assert steps[:2] == ["python3 -m venv .venv", ". .venv/bin/activate"]  # never the system Python
    assert steps[2:] == ['pip install -e ".[dev]"', "duraloop demo"]
    ci = CI.read_text(encoding="utf-8")  # CI does the same in its own fresh virtualenv
    assert 'python3 -m venv "$venv"' in ci and 'pip install --quiet -e ".[dev]"' in ci
    assert "duraloop demo" in ci and ci.rstrip().endswith("pytest")


def test_the_budgets_example_builds_the_config_it_describes() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("### Budgets", 1)[1].split("\n### ", 1)[0]
    (block,) = re.findall(r"^```python\n(.*?)^```", section, re.DOTALL | re.MULTILINE)
    namespace: dict[str, object] = {}
    exec(compile(block, "README.md#budgets", "exec"), namespace)
    from duraloop.loop import Budget, LoopConfig

    config = namespace["config"]
    assert isinstance(config, LoopConfig)
    assert config.turn_budget == Budget(tokens=200_000, tool_calls=50)
    assert config.session_budget is not None and config.session_budget.cost == 5.0
    assert set(config.prices) == {"deepseek:deepseek-chat"}


def _person_in_the_loop_examples() -> list[str]:
    blocks = re.findall(
        r"^```python\n(.*?)^```", _section("A person in the loop"), re.DOTALL | re.MULTILINE
    )
    assert len(blocks) == 2, "the section holds the pause/resume and the approver example"
    return [str(block) for block in blocks]


def test_the_person_in_the_loop_example_pauses_then_continues_from_a_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _person_in_the_loop_examples()[0]
    assert _run(code, tmp_path, monkeypatch, capsys) == _expected(code)


def test_the_approver_example_asks_by_the_validated_arguments_and_rejects_with_feedback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _person_in_the_loop_examples()[1]
    assert _run(code, tmp_path, monkeypatch, capsys) == _expected(code)
    assert "args.path.startswith" in code  # attribute access on the validated arguments


def test_the_long_sessions_example_compacts_a_session_past_its_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (code,) = re.findall(
        r"^```python\n(.*?)^```", _section("Long sessions"), re.DOTALL | re.MULTILINE
    )
    assert _run(str(code), tmp_path, monkeypatch, capsys) == _expected(str(code))


def test_the_ecosystem_example_keys_a_call_and_traces_its_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(
        r"^```python\n(.*?)^```", _section("Plugged into the ecosystem"), re.DOTALL | re.MULTILINE
    )
    (code,) = [str(block) for block in blocks if "instrument(" in block]
    assert _run(code, tmp_path, monkeypatch, capsys) == _expected(code)
