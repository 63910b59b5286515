"""The README's library example runs as written and prints what its `#>` lines say."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _library_example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Library example", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```python\n(.*?)^```", section, re.DOTALL | re.MULTILINE)
    assert len(blocks) == 1, "the Library example section should hold exactly one python block"
    return str(blocks[0])


def test_library_example_prints_its_documented_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _library_example()
    expected = [line.removeprefix("#>").strip() for line in code.splitlines() if line.startswith("#>")]
    assert expected, "the example documents its output with #> lines"

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the example's mkdtemp() lands here
    exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})

    printed = [line.strip() for line in capsys.readouterr().out.splitlines()]
    assert printed == expected
