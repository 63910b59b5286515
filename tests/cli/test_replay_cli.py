"""`duraloop run --model replay:PATH`: a recorded session re-run against a new workspace (issue 5).

Technique: record a real session with the scripted model and the real `write_file` tool in
one workspace and store, then replay its log in a fresh workspace and store through the real
command line (subprocesses, no network). The replay must act the same (the same file
written) and log the same answers: the new log's assistant messages equal the recorded ones
except their message ids and sources (the replay route is `replay`). A dsh fixture is
replayed too, against tools it was not recorded with (dsh's `read` is not a duraloop tool),
and the resulting log must still be valid (`duraloop check`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ._support import Cli, ok, session_id_of

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "dsh-sessions"

RECORDED_SCRIPT: list[dict[str, Any]] = [
    {
        "reasoning": "The user wants a greeting file.",
        "text": "Writing the file.",
        "tool_calls": [
            {
                "id": "call_write_1",
                "name": "write_file",
                "arguments": {"path": "out/hello.txt", "content": "hello, replay\n"},
            },
        ],
    },
    {"text": "Wrote out/hello.txt."},
]


def _assistant_events(cli: Cli, session_id: str) -> list[dict[str, Any]]:
    return [e["data"] for e in cli.events(session_id) if e["type"] == "assistant/message"]


def test_replay_in_a_fresh_workspace_writes_the_same_file_and_logs_the_same_answers(
    tmp_path: Path,
) -> None:
    recorder = Cli(tmp_path / "record")
    recorded_id = session_id_of(
        ok(recorder("run", "Write a greeting.", "--model", recorder.script(RECORDED_SCRIPT)))
    )
    recorded_file = recorder.cwd / "out" / "hello.txt"
    assert recorded_file.read_text(encoding="utf-8") == "hello, replay\n"
    log = recorder.log_path(recorded_id)

    replayer = Cli(tmp_path / "replay")
    result = ok(replayer("run", "Write a greeting.", "--model", f"replay:{log}"))
    replayed_id = session_id_of(result)
    assert "Wrote out/hello.txt." in result.stdout
    assert (replayer.cwd / "out" / "hello.txt").read_bytes() == recorded_file.read_bytes()

    recorded = _assistant_events(recorder, recorded_id)
    replayed = _assistant_events(replayer, replayed_id)
    assert len(recorded) == len(replayed) == 2
    for old, new in zip(recorded, replayed, strict=True):
        assert new["message"]["content"] == old["message"]["content"]
        assert new["message"]["id"] != old["message"]["id"]
        assert new["message"]["source"] == {
            "kind": "model",
            "provider": "replay",
            "model": str(log),
        }
        assert new["usage"] == old["usage"]
    # The tool ran again for real in the new workspace, under the recorded call id.
    results = [e["data"] for e in replayer.events(replayed_id) if e["type"] == "tool/result"]
    assert [r["message"]["source"]["callId"] for r in results] == ["call_write_1"]
    assert results[0]["message"]["content"][0]["isError"] is False


def test_replay_past_the_recording_ends_the_turn_with_replay_exhausted(tmp_path: Path) -> None:
    # The recorded session asked twice but got one answer (a tool call; its script ran out).
    recorder = Cli(tmp_path / "record")
    script = recorder.script([{"tool_calls": [{"id": "c1", "name": "list_dir", "arguments": {}}]}])
    recorded = recorder("run", "List.", "--model", script)
    assert recorded.returncode == 1 and "SCRIPT_EXHAUSTED" in recorded.stderr
    log = recorder.log_path(session_id_of(recorded))

    replayer = Cli(tmp_path / "replay")
    result = replayer("run", "List.", "--model", f"replay:{log}")
    assert result.returncode == 1
    assert (
        "LlmError: replay model has no recorded assistant message left for request 2"
        in result.stderr
    )
    assert f"all 1 recorded in {log} were replayed" in result.stderr
    session_id = session_id_of(result)
    events = replayer.events(session_id)
    assert [
        e["data"]["message"]["source"]["callId"] for e in events if e["type"] == "tool/result"
    ] == ["c1"]
    ends = [e["data"] for e in events if e["type"] == "turn/end"]
    assert ends[-1]["reason"]["kind"] == "error"
    assert ends[-1]["reason"]["error"]["code"] == "REPLAY_EXHAUSTED"
    assert not [e for e in events if e["type"] == "llm/retry"]  # not retryable
    ok(replayer("check", session_id))


@pytest.mark.skipif(
    not (FIXTURES / "parallel-tool-calls").is_dir(), reason="../shared fixtures absent"
)
def test_replay_of_a_dsh_fixture_reproduces_its_answers_with_valid_pairing(tmp_path: Path) -> None:
    fixture = FIXTURES / "parallel-tool-calls"
    replayer = Cli(tmp_path)
    result = ok(replayer("run", "Read a.txt and b.txt.", "--model", f"replay:{fixture}"))
    session_id = session_id_of(result)
    events = replayer.events(session_id)
    messages = [e["data"]["message"] for e in events if e["type"] == "assistant/message"]
    assert [[b["type"] for b in m["content"]] for m in messages] == [
        ["tool-call", "tool-call"],
        ["text"],
    ]
    assert [b["id"] for b in messages[0]["content"]] == ["call_read_a", "call_read_b"]
    assert messages[1]["content"] == [{"type": "text", "text": "DONE"}]
    # dsh's `read` tool does not exist here: each call is answered, in model order, as an error.
    results = [e["data"]["message"] for e in events if e["type"] == "tool/result"]
    assert [r["source"]["callId"] for r in results] == ["call_read_a", "call_read_b"]
    assert all(r["content"][0]["isError"] for r in results)
    ok(replayer("check", session_id))
