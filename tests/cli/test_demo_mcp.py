"""`duraloop demo --mcp`: a bundled stdio MCP server's tools in a real, offline session.

Pins what the demo shows (content, never times): the server starts and its read-only tools
are parallel-safe and `publish` exclusive; the three read-only calls were all running at
once; `publish` ran alone after them; the server stops; the log checks valid and its
`show` command works.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ._support import Cli, ok

pytest.importorskip("mcp")


def test_demo_mcp_runs_the_read_only_tools_in_parallel_and_publish_alone(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    base = tmp_path / "demo"
    out = ok(cli("demo", "--mcp", "--dir", str(base))).stdout
    assert "MCP server 'notes' started (stdio)" in out
    for name in ("lookup_note", "count_words", "list_topics"):
        assert f"mcp__notes__{name} (parallel-safe)" in out
    assert "mcp__notes__publish (exclusive)" in out
    assert out.count("✓ mcp__notes__lookup_note") == 2
    assert "✓ mcp__notes__count_words" in out
    assert "published 47 characters (publication #1)" in out
    assert "turn 1: completed in 2 steps" in out
    assert "MCP server 'notes' stopped" in out
    assert re.search(r"MCP: 3 read-only calls took [\d.]+ s together .*: all running at once", out)
    assert "MCP: publish (destructive, exclusive) ran alone, after the reads had ended" in out
    assert "check: valid" in out
    show = re.search(r"Read it with:  (duraloop show \S+ --store \S+)", out)
    assert show is not None, out
    shown = ok(cli(*show.group(1).split()[1:], store=False)).stdout
    assert "mcp__notes__publish" in shown


def test_demo_mcp_and_approvals_together_is_a_usage_error(tmp_path: Path) -> None:
    result = Cli(tmp_path)("demo", "--mcp", "--approvals")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "UsageError: --approvals and --mcp are two demos; pass one of them"
    )
