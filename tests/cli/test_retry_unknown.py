"""`duraloop resume ID --retry-unknown` through the real command line.

See docs/recovery.md#re-running-outcome-unknown-calls. A session whose process died with a
`read_file` (idempotent) and a `bash` (not) call recorded and unanswered: the resume re-runs
only `read_file`, says why `bash` is skipped, records the link, and a second resume finds
nothing to re-run. Real `python -m duraloop` subprocesses, a scripted model, no network.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from duraloop.log import idempotency_key

from ._support import Cli, ok, session_id_of

READ_AND_RUN: list[dict[str, Any]] = [
    {
        "text": "Working.",
        "tool_calls": [
            {"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}},
            {"id": "b1", "name": "bash", "arguments": {"command": "echo hi"}},
        ],
    },
    {"text": "Done."},
]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    c = Cli(tmp_path)
    (c.cwd / "a.txt").write_text("alpha\n", encoding="utf-8")
    return c


def _crashed_session(cli: Cli, script: list[dict[str, Any]] = READ_AND_RUN) -> str:
    """Run a turn, then cut its log after the last `tool/call`, dropping every result.

    The log a crash inside both bodies would leave if they had run together (the loop runs
    `bash` after `read_file`'s result, so the cut also drops that result and renumbers).
    """
    session_id = session_id_of(ok(cli("run", "Work.", "--model", cli.script(script))))
    events = cli.events(session_id)
    last_call = max(e["seq"] for e in events if e["type"] == "tool/call")
    kept = [e for e in events if e["seq"] <= last_call and e["type"] != "tool/result"]
    renumber = {event["seq"]: seq for seq, event in enumerate(kept)}
    for event in kept:
        event["seq"] = renumber[event["seq"]]
        if "sourceEventSeqs" in event:
            event["sourceEventSeqs"] = [renumber[s] for s in event["sourceEventSeqs"]]
    path = cli.log_path(session_id)
    header = path.read_bytes().splitlines(keepends=True)[0]
    path.write_bytes(header + b"".join(json.dumps(e).encode() + b"\n" for e in kept))
    (path.parent / "session.snapshot").unlink(missing_ok=True)
    return session_id


def test_retry_unknown_reruns_only_idempotent_calls_and_records_the_link(cli: Cli) -> None:
    session_id = _crashed_session(cli)
    result = ok(cli("resume", session_id, "--retry-unknown"))
    lines = result.stdout.splitlines()
    key = idempotency_key(session_id, "r1")
    assert any(
        line.startswith("skipped bash call b1") and 'tool "bash" is not declared idempotent' in line
        for line in lines
    ), result.stdout
    assert any(
        line.startswith("re-run read_file call r1") and key in line and "succeeded" in line
        for line in lines
    ), result.stdout
    assert lines[-1] == f"session: {session_id}"
    events = cli.events(session_id)
    first = next(e for e in events if e["type"] == "tool/call" and e["data"]["callId"] == "r1")
    (again,) = [e for e in events if e["type"] == "tool/call" and "retryOf" in e["data"]]
    assert (again["data"]["retryOf"], again["data"]["callId"]) == (first["seq"], "r1-rerun-1")
    replaced = [
        e for e in events if e["type"] == "tool/result" and isinstance(e["surfaceOp"], dict)
    ]
    (replacement,) = replaced
    assert again["seq"] in replacement["sourceEventSeqs"]
    assert "alpha" in json.dumps(replacement["data"]["message"]["content"])
    ok(cli("check", session_id))

    second = ok(cli("resume", session_id, "--retry-unknown"))
    assert "skipped read_file call r1" in second.stdout and "already re-run" in second.stdout
    assert "none of the 2 call(s) with an unknown outcome can be re-run" in second.stdout
    later = cli.events(session_id)[len(events) :]
    assert [e["type"] for e in later] in ([], ["session/end-seed"])  # no turn, no call


def test_retry_unknown_with_no_unknown_call_says_so(cli: Cli) -> None:
    session_id = session_id_of(ok(cli("run", "Hi.", "--model", cli.script([{"text": "Hi."}]))))
    result = ok(cli("resume", session_id, "--retry-unknown"))
    assert "no call has an unknown outcome: nothing to re-run" in result.stdout


def test_retry_unknown_with_a_prompt_lets_the_model_see_the_rerun_then_the_prompt(
    cli: Cli,
) -> None:
    session_id = _crashed_session(cli)
    script = cli.script([{"text": "Read it: alpha."}])
    result = ok(cli("resume", session_id, "And now?", "--retry-unknown", "--model", script))
    assert "re-run read_file call r1" in result.stdout, result.stdout
    assert "Read it: alpha." in result.stdout
    events = cli.events(session_id)
    start = max(e["seq"] for e in events if e["type"] == "turn/start")
    turn = [e for e in events if e["seq"] >= start]
    steps = [e["data"]["step"] for e in turn if e["type"] == "step/start"]
    assert steps == [1, 2]  # the re-run step, then the model's step with the prompt
    kinds = [e["type"] for e in turn if e["type"] in ("tool/call", "user/message", "turn/end")]
    assert kinds == ["tool/call", "user/message", "turn/end"]
    assert turn[-1]["data"]["reason"] == {"kind": "completed"}
    ok(cli("check", session_id))
