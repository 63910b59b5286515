"""`duraloop run|resume --otel` exports the turn's spans over OTLP/HTTP (docs/telemetry.md#cli).

A real local HTTP server receives the exporter's OTLP/protobuf POSTs on `/v1/traces`; the
command runs offline (a scripted model) in a subprocess, configured only by the standard
`OTEL_EXPORTER_OTLP_*` variables; the requests are decoded with `opentelemetry.proto`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from cli._support import Cli, clean_env, ok, session_id_of
from telemetry._collector import Collector, collector

__all__ = ["collector"]  # the fixture, used by name

PROMPT = "Read a.txt please, secret-prompt-31337"
SCRIPT: list[dict[str, Any]] = [
    {
        "text": "Reading.",
        "tool_calls": [
            {"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}},
            {"id": "r2", "name": "read_file", "arguments": {"path": "b.txt"}},
        ],
    },
    {"text": "Done."},
]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    c = Cli(tmp_path)
    (c.cwd / "a.txt").write_text("alpha\n", encoding="utf-8")
    (c.cwd / "b.txt").write_text("beta\n", encoding="utf-8")
    return c


def _otel_env(cli: Cli, collector: Collector, **extra: str) -> dict[str, str]:
    env = clean_env(cli.tmp, OTEL_EXPORTER_OTLP_ENDPOINT=collector.url)
    for name in list(env):
        if name.startswith("OTEL_") and name != "OTEL_EXPORTER_OTLP_ENDPOINT":
            del env[name]  # a developer's OpenTelemetry settings never leak in
    env.update(extra)
    return env


def test_run_otel_exports_the_turns_span_tree_to_the_otlp_endpoint(
    cli: Cli, collector: Collector
) -> None:
    env = _otel_env(cli, collector, OTEL_EXPORTER_OTLP_HEADERS="x-collector-token=t0k3n")
    result = ok(cli("run", PROMPT, "--model", cli.script(SCRIPT), "--otel", env=env))
    session_id = session_id_of(result)
    assert collector.posts, result.stderr
    assert {path for path, _h, _r in collector.posts} == {"/v1/traces"}
    assert all(h.get("x-collector-token") == "t0k3n" for _p, h, _r in collector.posts)
    assert all(h.get("content-type") == "application/x-protobuf" for _p, h, _r in collector.posts)
    spans = collector.spans()
    assert sorted(name for name, _a in spans) == [
        "chat script-1",
        "chat script-1",
        "execute_tool read_file",
        "execute_tool read_file",
        "invoke_agent",
    ]
    assert {a["service.name"] for _n, a in spans} == {"duraloop"}
    assert {a["gen_ai.conversation.id"] for _n, a in spans} == {session_id}
    tools = {a["gen_ai.tool.call.id"]: a for n, a in spans if n.startswith("execute_tool")}
    assert {call_id: t["duraloop.tool.outcome"] for call_id, t in tools.items()} == {
        "r1": "ok",
        "r2": "ok",
    }
    everything = repr(spans)
    assert "secret-prompt-31337" not in everything and "alpha" not in everything


def test_resume_otel_names_the_service_from_otel_service_name(
    cli: Cli, collector: Collector
) -> None:
    first = ok(cli("run", "hello", "--model", cli.script([{"text": "hi"}])))
    session_id = session_id_of(first)
    env = _otel_env(cli, collector, OTEL_SERVICE_NAME="my-agent")
    ok(
        cli(
            "resume",
            session_id,
            "again",
            "--model",
            cli.script([{"text": "hi"}]),
            "--otel",
            env=env,
        )
    )
    spans = collector.spans()
    assert sorted(name for name, _a in spans) == ["chat script-2", "invoke_agent"]
    ((_name, turn),) = [(n, a) for n, a in spans if n == "invoke_agent"]
    assert (turn["service.name"], turn["duraloop.turn"]) == ("my-agent", 2)


def test_chat_otel_exports_one_turn_span_per_piped_line(cli: Cli, collector: Collector) -> None:
    script = cli.script([{"text": "one"}, {"text": "two"}])
    result = subprocess.run(
        cli.argv("chat", "--model", script, "--otel"),
        input="first\nsecond\n",
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=_otel_env(cli, collector),
        cwd=cli.tmp,
        timeout=90,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    turns = sorted(a["duraloop.turn"] for n, a in collector.spans() if n == "invoke_agent")
    assert turns == [1, 2]
    assert all("left_open" not in repr(a) for _n, a in collector.spans())


def test_run_without_otel_exports_nothing(cli: Cli, collector: Collector) -> None:
    ok(cli("run", PROMPT, "--model", cli.script(SCRIPT), env=_otel_env(cli, collector)))
    assert collector.posts == []


def test_otel_without_the_extra_installed_is_a_config_error_naming_the_extra(
    cli: Cli, collector: Collector, tmp_path: Path
) -> None:
    blocked = tmp_path / "blocked" / "opentelemetry"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text(
        "raise ImportError(\"No module named 'opentelemetry'\")\n", encoding="utf-8"
    )
    env = _otel_env(cli, collector)
    env["PYTHONPATH"] = f"{blocked.parent}:{env.get('PYTHONPATH', '')}"
    result = cli("run", PROMPT, "--model", cli.script(SCRIPT), "--otel", env=env)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("ConfigError: --otel needs the OpenTelemetry SDK")
    assert "pip install 'duraloop[otel]'" in result.stderr
    assert cli.session_ids() == set(), "nothing is written"
    assert collector.posts == []
